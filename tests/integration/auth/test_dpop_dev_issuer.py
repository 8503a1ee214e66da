"""The development issuer issues DPoP-bound tokens (RFC 9449 §5) and the gateway accepts them.

A client with its own key asks the issuer's token endpoint for a token with a ``DPoP`` proof
(``htu`` = the token endpoint); the issuer checks the proof and binds the token (``token_type:
DPoP``, ``cnf.jkt`` in the JWT and in the introspection answer). The same client then calls the
gateway with ``Authorization: DPoP`` and a fresh proof for the resource. The proofs come from the
tests' independent client (:mod:`tests.support.dpop_client`).
"""

from __future__ import annotations

import base64
import json
from typing import Any

import aiohttp
import pytest

from gateway.dev.dev_issuer import DevIssuer
from tests.integration.auth.test_dpop_http import RESOURCE, dpop, send
from tests.support.dpop_client import DpopKey
from tests.support.jwt_stack import jwt_stack, metric
from tests.support.live_stack import LiveStack, MakeStack

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

CLIENT, SECRET = "dpop-client", "dpop-client-secret-0123456789"
SCOPES = ("mcp:access", "tools:echo")


def _dev(fmt: str) -> DevIssuer:
    if fmt == "jwt":
        return DevIssuer(token_format="jwt", introspection=False, scopes=SCOPES)
    return DevIssuer(scopes=SCOPES)


def _claims(jwt: str) -> dict[str, Any]:
    segment = jwt.split(".")[1]
    decoded: dict[str, Any] = json.loads(
        base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))
    )
    return decoded


async def _token(
    stack: LiveStack, proof: str | None, *, extra: tuple[tuple[str, str], ...] = ()
) -> tuple[int, dict[str, Any]]:
    headers = [
        ("Authorization", "Basic " + base64.b64encode(f"{CLIENT}:{SECRET}".encode()).decode())
    ]
    if proof is not None:
        headers.append(("DPoP", proof))
    headers.extend(extra)
    data = {
        "grant_type": "client_credentials",
        "scope": "mcp:access tools:echo",
        "resource": RESOURCE,
    }
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{stack.issuer.url}/token", data=data, headers=headers) as response,
    ):
        return response.status, await response.json()


@pytest.mark.parametrize("fmt", ["jwt", "opaque"])
async def test_a_token_from_the_token_endpoint_with_a_proof_is_bound_and_accepted(
    make_stack: MakeStack,
    fmt: str,
) -> None:
    key = DpopKey("EdDSA")
    if fmt == "jwt":
        context = make_stack.of(jwt_stack, dev=_dev(fmt), issuer={"dpop": "required"})
    else:
        context = make_stack(
            issuer=_dev(fmt),
            gateway={"issuer": {"dpop": "required"}},
        )
    async with context as stack:
        stack.issuer.register_client(CLIENT, SECRET, grant_types=["client_credentials"])
        token_url = f"{stack.issuer.url}/token"
        metadata = stack.issuer.metadata()
        assert "EdDSA" in metadata["dpop_signing_alg_values_supported"]
        status, reply = await _token(stack, key.proof(token_url))
        assert status == 200, reply
        assert reply["token_type"] == "DPoP"
        token = reply["access_token"]
        if fmt == "jwt":
            assert _claims(token)["cnf"] == {"jkt": key.jkt}
        status, _, text = await send(stack, dpop(token, key.proof(RESOURCE, token=token)))
        assert status == 200, text
        method = "jwt+dpop" if fmt == "jwt" else "introspection+dpop"
        assert await metric(stack, "authentications_total", auth_method=method) == 1
        # Without a proof the issuer issues a bearer token, which `required` refuses.
        status, reply = await _token(stack, None)
        assert status == 200 and reply["token_type"] == "Bearer", reply
        status, _, _ = await send(stack, [("Authorization", f"Bearer {reply['access_token']}")])
        assert status == 401


async def test_the_token_endpoint_refuses_a_bad_or_replayed_proof(make_stack: MakeStack) -> None:
    key = DpopKey()
    async with make_stack.of(jwt_stack, dev=_dev("jwt"), issuer={"dpop": "allowed"}) as stack:
        stack.issuer.register_client(CLIENT, SECRET, grant_types=["client_credentials"])
        token_url = f"{stack.issuer.url}/token"
        proof = key.proof(token_url)
        assert (await _token(stack, proof))[0] == 200
        private = dict(key.key.as_dict(private=True))
        for bad in (
            proof,  # replayed
            key.proof(RESOURCE),  # htu of another endpoint
            key.proof(token_url, typ="JWT"),
            key.proof(token_url, jwk=private),
            key.proof(token_url, alg="HS256"),
        ):
            status, reply = await _token(stack, bad)
            assert (status, reply["error"]) == (400, "invalid_dpop_proof"), reply
        status, reply = await _token(
            stack, key.proof(token_url), extra=(("DPoP", key.proof(token_url)),)
        )
        assert (status, reply["error"]) == (400, "invalid_dpop_proof")
