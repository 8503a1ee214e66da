"""``issuer.assertion_audience``: the ``aud`` of private_key_jwt introspection assertions.

The development issuer verifies the assertion (authlib, RFC 7523 §3) and can be told to accept
one audience only (``store.assertion_audience``), as issuers that insist on the token endpoint
or on the issuer identifier do. The gateway is the production wiring.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from joserfc.jwk import RSAKey

from tests.support.live_stack import LiveStack, MakeStack
from tests.support.test_issuer import generate_rsa_key


def use_private_key_jwt(stack: LiveStack, public_pem: str) -> None:
    jwks = {"keys": [RSAKey.import_key(public_pem).as_dict(private=False) | {"kid": "gw-1"}]}
    stack.issuer.register_client(
        "mcp-gateway", auth_method="private_key_jwt", jwks=jwks, can_introspect=True
    )


def pkjwt(tmp_path: Path, audience: str | None) -> tuple[dict[str, object], str]:
    private, public = generate_rsa_key()
    (tmp_path / "gw-key.pem").write_text(private)
    issuer: dict[str, object] = {
        "client_auth": "private_key_jwt",
        "client_secret": None,
        "private_key": {"file": str(tmp_path / "gw-key.pem")},
        "private_key_id": "gw-1",
    }
    if audience is not None:
        issuer["assertion_audience"] = audience
    return {"issuer": issuer}, public


@pytest.mark.parametrize("audience", ["issuer", "token_endpoint", "introspection_endpoint"])
async def test_the_assertion_names_the_configured_audience(
    tmp_path: Path,
    make_stack: MakeStack,
    audience: str,
) -> None:
    gateway, public = pkjwt(tmp_path, audience)
    async with make_stack(gateway=gateway) as stack:
        use_private_key_jwt(stack, public)
        stack.issuer.store.assertion_audience = audience  # nothing else is accepted
        for rid in (1, 2):  # a fresh jti per assertion
            status, _, text = await stack.modern(stack.token(), "tools/list", rid=rid)
            assert status == 200, text


async def test_the_default_audience_is_the_issuer_and_a_mismatch_is_an_operator_error(
    tmp_path: Path, make_stack: MakeStack
) -> None:
    gateway, public = pkjwt(tmp_path, None)
    async with make_stack(gateway=gateway) as stack:
        use_private_key_jwt(stack, public)
        stack.issuer.store.assertion_audience = "issuer"
        status, _, text = await stack.modern(stack.token(), "tools/list", rid=1)
        assert status == 200, text
        stack.issuer.store.assertion_audience = "token_endpoint"
        status, headers, _ = await stack.modern(stack.token(), "tools/list", rid=2)
        # The issuer refuses the gateway's own client authentication: 503, never 401.
        assert status == 503
        assert "Retry-After" in headers
