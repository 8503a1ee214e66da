"""``Principal.claims`` (issue 25, the base of policy conditions): the validated token's claims,
read-only, from a real development issuer over loopback in each mode: a locally verified JWT
(keys fetched over HTTP), an RFC 7662 introspection answer, and both (the JWT's claims).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import pytest

from gateway.auth.resource_server import ResourceServer
from gateway.config import Secret
from gateway.dev.dev_issuer import DevIssuer
from gateway.outbound.client import Outbound
from gateway.seams import AuthRequest
from tests.support.auth import RESOURCE, make_config
from tests.support.test_issuer import IssuerStub

SECRET = "claims-secret"


@pytest.fixture
async def made() -> AsyncIterator[list[tuple[ResourceServer, Outbound, DevIssuer]]]:
    found: list[tuple[ResourceServer, Outbound, DevIssuer]] = []
    yield found
    for rs, outbound, dev in found:
        await rs.close()
        await outbound.close()
        await dev.stop()


async def start(
    made: list[tuple[ResourceServer, Outbound, DevIssuer]], tokens: str, **dev_kw: Any
) -> tuple[ResourceServer, DevIssuer]:
    dev = DevIssuer(resources=[RESOURCE], **dev_kw)
    await dev.start()
    dev.register_client("mcp-gateway", SECRET, can_introspect=True)
    config = make_config(
        IssuerStub().bind(dev.url),
        client_id="mcp-gateway",
        client_secret=Secret(SECRET, "literal"),
        tokens=tokens,
    )
    config = replace(config, issuer=replace(config.issuer, url=dev.url))
    outbound = Outbound()
    rs = ResourceServer(config, outbound)
    made.append((rs, outbound, dev))
    await rs.start()
    return rs, dev


def keycloak_like(dev: DevIssuer) -> str:
    now = int(time.time())
    return dev.mint_signed(
        {
            "iss": dev.url,
            "sub": "svc-7",
            "aud": RESOURCE,
            "exp": now + 300,
            "iat": now,
            "azp": "ci-bot",
            "client_id": "ci-bot",
            "scope": "mcp:access",
            "tid": "tenant-a",
            "groups": ["/sre"],
            "realm_access": {"roles": ["notes-writer"]},
        },
        header={"typ": "at+jwt"},
    )


@pytest.mark.parametrize("tokens", ["introspection", "jwt", "jwt+introspection"])
async def test_the_principal_carries_the_validated_claims_read_only(
    made: list[tuple[ResourceServer, Outbound, DevIssuer]], tokens: str
) -> None:
    rs, dev = await start(made, tokens, token_format="jwt")
    token = keycloak_like(dev)
    principal = await rs.authenticate(AuthRequest((f"Bearer {token}",), frozenset(), "192.0.2.1"))
    claims = principal.claims
    assert claims["tid"] == "tenant-a"
    assert claims["groups"] == ["/sre"]
    assert claims["realm_access"] == {"roles": ["notes-writer"]}
    assert claims["sub"] == "svc-7" and claims["iss"] == dev.url
    assert "active" not in claims  # the introspection answer's own member, not a claim
    assert "missing" not in claims  # absent keys are absent, not null
    with pytest.raises(TypeError):
        claims["tid"] = "tenant-b"  # type: ignore[index]
    # Claims name people: never in a principal's repr (which logs may print).
    assert "tenant-a" not in repr(principal) and "/sre" not in repr(principal)
    # A cache hit is the same principal, claims included.
    again = await rs.authenticate(AuthRequest((f"Bearer {token}",), frozenset(), "192.0.2.1"))
    assert again.claims == claims


async def test_an_opaque_token_carries_its_introspection_answer(
    made: list[tuple[ResourceServer, Outbound, DevIssuer]],
) -> None:
    rs, dev = await start(made, "introspection")
    token = dev.mint_token(sub="bob", scopes="mcp:access notes:read")
    principal = await rs.authenticate(AuthRequest((f"Bearer {token}",), frozenset(), "192.0.2.1"))
    assert principal.claims["sub"] == "bob"
    assert principal.claims["scope"] == "mcp:access notes:read"
    assert principal.claims["client_id"] == "demo-cli"
    assert token not in repr(dict(principal.claims))  # the token itself is never a claim
