"""Interop: the ResourceServer against the development issuer (authlib-based, another codebase).

The IssuerStub tests pin exact behaviour; these prove the same client speaks to a real RFC 8414 /
RFC 7662 / RFC 7523 implementation: discovery, both client-secret methods, private_key_jwt,
revocation and refresh tokens.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import pytest
from joserfc.jwk import RSAKey

from gateway.auth.resource_server import ResourceServer
from gateway.config import CacheConfig, Secret
from gateway.dev.dev_issuer import DevIssuer
from gateway.errors import InvalidToken
from gateway.outbound.client import Outbound
from gateway.seams import AuthRequest
from tests.support.auth import RESOURCE, FakeClock, make_config
from tests.support.test_issuer import IssuerStub, generate_rsa_key

SECRET = "introspection-secret:&%+"


@pytest.fixture
async def dev() -> AsyncIterator[DevIssuer]:
    issuer = DevIssuer(resources=[RESOURCE])
    await issuer.start()
    try:
        yield issuer
    finally:
        await issuer.stop()


@pytest.fixture
async def servers() -> AsyncIterator[list[tuple[ResourceServer, Outbound]]]:
    made: list[tuple[ResourceServer, Outbound]] = []
    yield made
    for rs, outbound in made:
        await rs.close()
        await outbound.close()


async def start_rs(
    dev: DevIssuer,
    made: list[tuple[ResourceServer, Outbound]],
    clock: Any = time.time,
    **issuer: Any,
) -> ResourceServer:
    config = make_config(IssuerStub().bind(dev.url), **issuer)
    config = replace(config, issuer=replace(config.issuer, url=dev.url))
    outbound = Outbound()
    rs = ResourceServer(config, outbound, clock=clock)
    made.append((rs, outbound))
    await rs.start()
    return rs


def req(token: str) -> AuthRequest:
    return AuthRequest(("Bearer " + token,), frozenset(), "192.0.2.20")


@pytest.mark.parametrize("method", ["client_secret_basic", "client_secret_post"])
async def test_client_secret_methods_introspect_a_dev_issuer_token(
    dev: DevIssuer, servers: list[tuple[ResourceServer, Outbound]], method: str
) -> None:
    dev.register_client("mcp-gateway", SECRET, auth_method=method, can_introspect=True)
    rs = await start_rs(
        dev,
        servers,
        client_id="mcp-gateway",
        client_auth=method,
        client_secret=Secret(SECRET, "literal"),
    )
    assert rs.ready
    token = dev.mint_token(sub="bob", scopes="mcp:access notes:read")
    principal = await rs.authenticate(req(token))
    assert principal.subject == "bob"
    assert principal.scopes == frozenset({"mcp:access", "notes:read"})
    assert principal.issuer == dev.url


async def test_private_key_jwt_is_accepted_by_an_authlib_issuer(
    dev: DevIssuer, servers: list[tuple[ResourceServer, Outbound]]
) -> None:
    private, public = generate_rsa_key()
    jwks = {"keys": [RSAKey.import_key(public).as_dict(private=False) | {"kid": "gw-1"}]}
    dev.register_client(
        "mcp-gateway", auth_method="private_key_jwt", jwks=jwks, can_introspect=True
    )
    rs = await start_rs(
        dev,
        servers,
        client_id="mcp-gateway",
        client_auth="private_key_jwt",
        client_secret=None,
        private_key=Secret(private, "literal"),
        private_key_id="gw-1",
    )
    for _ in range(2):  # a fresh jti per call (the issuer refuses replays)
        token = dev.mint_token(sub="carol", scopes="mcp:access")
        assert (await rs.authenticate(req(token))).subject == "carol"


async def test_a_token_revoked_at_the_dev_issuer_stops_working_after_max_ttl(
    dev: DevIssuer, servers: list[tuple[ResourceServer, Outbound]]
) -> None:
    dev.register_client("mcp-gateway", SECRET, can_introspect=True)
    clock = FakeClock()
    rs = await start_rs(
        dev,
        servers,
        clock=clock,
        client_id="mcp-gateway",
        client_secret=Secret(SECRET, "literal"),
        cache=CacheConfig(max_ttl_s=1),
    )
    token = dev.mint_token(sub="bob", scopes="mcp:access")
    await rs.authenticate(req(token))
    assert dev.revoke(token)
    assert (await rs.authenticate(req(token))).subject == "bob"  # cached
    clock.advance(1)
    with pytest.raises(InvalidToken):
        await rs.authenticate(req(token))


async def test_a_token_for_another_resource_is_refused(
    dev: DevIssuer, servers: list[tuple[ResourceServer, Outbound]]
) -> None:
    dev.register_client("mcp-gateway", SECRET, can_introspect=True)
    rs = await start_rs(
        dev, servers, client_id="mcp-gateway", client_secret=Secret(SECRET, "literal")
    )
    token = dev.mint_token(sub="bob", scopes="mcp:access", audience="https://other.example/mcp")
    with pytest.raises(InvalidToken):
        await rs.authenticate(req(token))
