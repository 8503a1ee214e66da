"""DPoP (RFC 9449) through the gateway's HTTP surface, with an independent DPoP client.

The client (:mod:`tests.support.dpop_client`) makes keys with ``cryptography`` and signs proofs
with ``joserfc``; the development issuer binds tokens to its key (``cnf.jkt``, in the JWT and in
the introspection answer). Every refusal is asserted as its status-table row: 401, the JSON-RPC
body, the ``Bearer`` and ``DPoP`` challenges (RFC 9449 §7.1), and no issuer call where none is
needed.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
import structlog
from multidict import CIMultiDict

from gateway.auth.dpop_nonce import NonceKeys
from gateway.dev.dev_issuer import DevIssuer
from tests.support.dpop_client import DpopKey
from tests.support.jwt_stack import jwt_stack, metric
from tests.support.live_stack import (
    LiveStack,
    MakeStack,
    modern_meta,
)
from tests.support.printed import Printed

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

RESOURCE = "https://mcp.example.test/mcp"
ALGS = "ES256 ES384 EdDSA Ed25519 PS256 RS256"
SEAL_KEY = "k6cIHLDM2vJpXwXd0m8Yl0l8b9n8sZbzYQ7Nmt4Ua0A="


def parse_challenges(header: str) -> dict[str, dict[str, str]]:
    """``{"Bearer": {...}, "DPoP": {...}}`` of one WWW-Authenticate value (our rendering puts
    the DPoP challenge last, RFC 9110 §11.6.1)."""
    bearer, found, dpop = header.partition("DPoP algs=")  # our DPoP challenge starts so
    out: dict[str, dict[str, str]] = {}
    if bearer:
        assert bearer.startswith("Bearer") and bearer.endswith(", "), header
        out["Bearer"] = dict(re.findall(r'([a-z_]+)="([^"]*)"', bearer))
    if found:
        out["DPoP"] = dict(re.findall(r'([a-z_]+)="([^"]*)"', "algs=" + dpop))
    return out


async def send(
    stack: LiveStack, headers: Sequence[tuple[str, str]]
) -> tuple[int, CIMultiDict[str], str]:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "hi"}, "_meta": modern_meta()},
    }
    sent: CIMultiDict[str] = CIMultiDict(
        [
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "echo"),
            *headers,
        ]
    )
    url = stack.server.mcp_url
    async with stack.session.post(url, data=json.dumps(body), headers=sent) as response:
        return response.status, CIMultiDict(response.headers), await response.text()


def dpop(token: str, *proofs: str) -> list[tuple[str, str]]:
    return [("Authorization", f"DPoP {token}"), *(("DPoP", p) for p in proofs)]


def assert_row(
    status: int,
    headers: Mapping[str, str],
    text: str,
    *,
    error: str,
    message: str,
    bearer: bool = True,
) -> dict[str, dict[str, str]]:
    """A 401 DPoP row: the fixed message, -31401, and the challenges of RFC 9449 §7.1."""
    assert status == 401, text
    assert headers["Cache-Control"] == "no-store"
    body = json.loads(text)
    assert body["error"]["code"] == -31401
    assert body["error"]["message"] == message
    assert body["error"]["data"] == {"required_scopes": ["mcp:access"]}
    challenges = parse_challenges(headers["WWW-Authenticate"])
    assert set(challenges) == ({"Bearer", "DPoP"} if bearer else {"DPoP"})
    proof_row = error in ("invalid_dpop_proof", "use_dpop_nonce")
    assert challenges["DPoP"]["algs"].split() == ALGS.split()
    assert challenges["DPoP"]["error"] == error
    assert challenges["DPoP"]["error_description"] == message
    assert challenges["DPoP"]["resource_metadata"].endswith("/oauth-protected-resource/mcp")
    if bearer:
        if proof_row:  # the proof's error is the DPoP challenge's; Bearer only points onward
            assert "error" not in challenges["Bearer"]
        else:
            assert challenges["Bearer"]["error"] == error
        assert challenges["Bearer"]["scope"] == "mcp:access"
    return challenges


def assert_bad_proof(status: int, headers: Mapping[str, str], text: str) -> None:
    assert_row(status, headers, text, error="invalid_dpop_proof", message="Invalid DPoP proof")


def jwt_dev() -> DevIssuer:
    return DevIssuer(token_format="jwt", introspection=False)


@pytest.mark.parametrize("alg", ["ES256", "EdDSA"])
async def test_a_bound_jwt_with_a_valid_proof_is_served_as_jwt_dpop(
    make_stack: MakeStack, alg: str
) -> None:
    key = DpopKey(alg)
    async with make_stack.of(jwt_stack, issuer={"dpop": "allowed"}) as stack:
        token = stack.token(jkt=key.jkt)
        for _ in range(2):  # the second one is a cache hit: the proof is checked again, fresh
            status, _, text = await send(stack, dpop(token, key.proof(RESOURCE, token=token)))
            assert status == 200, text
            assert json.loads(json.loads(text)["result"]["content"][0]["text"]) == {"text": "hi"}
        assert await metric(stack, "authentications_total", auth_method="jwt+dpop") == 2
        # allowed: plain bearer tokens still work.
        status, _, text = await send(stack, [("Authorization", f"Bearer {stack.token()}")])
        assert status == 200, text


@pytest.mark.row("invalid_dpop_proof")
async def test_each_bad_proof_is_invalid_dpop_proof_and_never_reaches_the_issuer(
    make_stack: MakeStack,
) -> None:
    key = DpopKey()
    other = DpopKey()
    async with make_stack(gateway={"issuer": {"dpop": "allowed"}}) as stack:
        token = stack.token(jkt=key.jkt)
        good = key.proof(RESOURCE, token=token)
        head, payload, signature = good.split(".")
        flipped = signature[:10] + ("A" if signature[10] != "A" else "B") + signature[11:]
        now = time.time()
        private = dict(key.key.as_dict(private=True))
        bad: dict[str, list[tuple[str, str]]] = {
            "missing proof": dpop(token),
            "two proofs": dpop(token, good, key.proof(RESOURCE, token=token)),
            "wrong typ": dpop(token, key.proof(RESOURCE, token=token, typ="JWT")),
            "alg none": dpop(token, key.proof(RESOURCE, token=token, alg="none")),
            "HS256": dpop(token, key.proof(RESOURCE, token=token, alg="HS256")),
            "private key in jwk": dpop(token, key.proof(RESOURCE, token=token, jwk=private)),
            "bad signature": dpop(token, f"{head}.{payload}.{flipped}"),
            "wrong htm": dpop(token, key.proof(RESOURCE, token=token, htm="GET")),
            "htu host": dpop(token, key.proof("https://evil.test/mcp", token=token)),
            "htu path": dpop(token, key.proof("https://mcp.example.test/other", token=token)),
            "htu query": dpop(token, key.proof(RESOURCE + "?a=1", token=token)),
            "htu = listener": dpop(token, key.proof(stack.server.mcp_url, token=token)),
            "stale iat": dpop(token, key.proof(RESOURCE, token=token, iat=now - 310)),
            "future iat": dpop(token, key.proof(RESOURCE, token=token, iat=now + 310)),
            "wrong ath": dpop(token, key.proof(RESOURCE, token=token + "x")),
            "thumbprint != cnf.jkt": dpop(token, other.proof(RESOURCE, token=token)),
        }
        calls = stack.issuer.introspection_calls
        for case, headers in bad.items():
            status, got, text = await send(stack, headers)
            assert_bad_proof(status, got, text)
            if case != "thumbprint != cnf.jkt":
                # Refused before any cache lookup or issuer call.
                assert stack.issuer.introspection_calls == calls, case
        # The one refusal that needs the token's cnf cost one introspection, then it is cached.
        assert stack.issuer.introspection_calls == calls + 1
        assert await metric(stack, "dpop_refusals_total", reason="htu") == 4
        assert await metric(stack, "dpop_refusals_total", reason="jkt") == 1
        # None of the refusals marked the token refused: the right proof still works.
        status, _, text = await send(stack, dpop(token, key.proof(RESOURCE, token=token)))
        assert status == 200, text
        assert await metric(stack, "authentications_total", auth_method="introspection+dpop") == 1
        assert stack.issuer.introspection_calls == calls + 1


@pytest.mark.row("invalid_dpop_proof")
async def test_a_replayed_proof_is_refused_at_the_same_replica(make_stack: MakeStack) -> None:
    key = DpopKey()
    async with make_stack.of(jwt_stack, issuer={"dpop": "required"}) as stack:
        token = stack.token(jkt=key.jkt)
        proof = key.proof(RESOURCE, token=token)
        status, _, text = await send(stack, dpop(token, proof))
        assert status == 200, text
        status, headers, text = await send(stack, dpop(token, proof))
        assert_row(
            status,
            headers,
            text,
            error="invalid_dpop_proof",
            message="Invalid DPoP proof",
            bearer=False,
        )
        assert await metric(stack, "dpop_refusals_total", reason="replay") == 1
        # The same jti under another key is another proof (keyed by what was signed).
        other = DpopKey()
        other_token = stack.token(jkt=other.jkt)
        jti = json.loads(_payload(proof))["jti"]
        status, _, text = await send(
            stack, dpop(other_token, other.proof(RESOURCE, token=other_token, jti=jti))
        )
        assert status == 200, text


def _payload(proof: str) -> str:
    import base64

    segment = proof.split(".")[1]
    return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)).decode()


@pytest.mark.row("dpop_token_as_bearer")
async def test_a_bound_token_presented_as_bearer_is_refused(make_stack: MakeStack) -> None:
    key = DpopKey()
    async with make_stack(gateway={"issuer": {"dpop": "allowed"}}) as stack:
        token = stack.token(jkt=key.jkt)
        for _ in range(2):  # uncached, then from the cache: the binding is in the entry
            status, headers, text = await send(stack, [("Authorization", f"Bearer {token}")])
            assert_row(
                status,
                headers,
                text,
                error="invalid_token",
                message="This access token must be used with a DPoP proof",
            )
        assert stack.issuer.introspection_calls == 1
        assert await metric(stack, "dpop_refusals_total", reason="as_bearer") == 2


@pytest.mark.row("dpop_required")
async def test_an_unbound_token_under_required_is_refused(make_stack: MakeStack) -> None:
    key = DpopKey()
    async with make_stack.of(jwt_stack, issuer={"dpop": "required"}) as stack:
        token = stack.token()
        status, headers, text = await send(stack, [("Authorization", f"Bearer {token}")])
        assert_row(
            status,
            headers,
            text,
            error="invalid_token",
            message="A DPoP-bound access token is required",
            bearer=False,
        )
        # An unbound token with the DPoP scheme and a valid proof is no better.
        status, headers, text = await send(stack, dpop(token, key.proof(RESOURCE, token=token)))
        assert_row(
            status,
            headers,
            text,
            error="invalid_token",
            message="Invalid or expired access token",
            bearer=False,
        )
        assert await metric(stack, "dpop_refusals_total", reason="required") == 1
        assert await metric(stack, "dpop_refusals_total", reason="unbound") == 1
        # No credentials: a DPoP challenge alone, no Bearer (no issuer accepts bearer tokens).
        status, headers, text = await send(stack, [])
        assert status == 401, text
        challenges = parse_challenges(headers["WWW-Authenticate"])
        assert set(challenges) == {"DPoP"}
        assert "error" not in challenges["DPoP"]


async def test_dpop_off_keeps_refusing_bound_tokens_and_the_dpop_scheme(
    make_stack: MakeStack,
) -> None:
    key = DpopKey()
    async with make_stack.of(jwt_stack) as stack:
        token = stack.token(jkt=key.jkt)
        status, headers, text = await send(stack, [("Authorization", f"Bearer {token}")])
        assert status == 401, text
        assert headers["WWW-Authenticate"].startswith('Bearer error="invalid_token"')
        assert "DPoP" not in headers["WWW-Authenticate"]
        status, headers, text = await send(stack, dpop(token, key.proof(RESOURCE, token=token)))
        assert status == 401, text  # an unknown scheme: no credentials (RFC 6750 §3.1)
        assert json.loads(text)["error"]["message"].startswith("Authentication required")
        async with stack.session.get(
            f"http://127.0.0.1:{stack.server.public_port}/.well-known/oauth-protected-resource/mcp"
        ) as response:
            document = await response.json()
        assert "dpop_signing_alg_values_supported" not in document


async def test_the_metadata_advertises_dpop(make_stack: MakeStack) -> None:
    async with make_stack.of(
        jwt_stack,
        issuer={"dpop": {"mode": "required", "algorithms": ["ES256", "EdDSA"]}},
    ) as stack:
        async with stack.session.get(
            f"http://127.0.0.1:{stack.server.public_port}/.well-known/oauth-protected-resource/mcp"
        ) as response:
            document = await response.json()
        assert document["dpop_signing_alg_values_supported"] == ["ES256", "EdDSA"]
        assert document["dpop_bound_access_tokens_required"] is True
        _, headers, _ = await send(stack, [])
        assert parse_challenges(headers["WWW-Authenticate"])["DPoP"]["algs"] == "ES256 EdDSA"


def _nonce_gateway(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.setenv("DPOP_SEAL_KEY", SEAL_KEY)
    return {
        "input_requests": {
            "enabled": False,
            "seal_keys": [{"id": "a", "key": {"env": "DPOP_SEAL_KEY"}}],
        },
    }


@pytest.mark.row("use_dpop_nonce")
async def test_a_nonce_is_required_issued_and_checked_without_state(
    make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = DpopKey()
    async with make_stack.of(
        jwt_stack,
        issuer={"dpop": {"mode": "required", "nonce": True, "nonce_rotation_s": 60}},
        gateway=_nonce_gateway(monkeypatch),
    ) as stack:
        token = stack.token(jkt=key.jkt)
        status, headers, text = await send(stack, dpop(token, key.proof(RESOURCE, token=token)))
        assert_row(
            status,
            headers,
            text,
            error="use_dpop_nonce",
            message="DPoP nonce required",
            bearer=False,
        )
        nonce = headers["DPoP-Nonce"]
        assert re.fullmatch(r"[A-Za-z0-9_-]{32}", nonce)
        status, _, text = await send(
            stack, dpop(token, key.proof(RESOURCE, token=token, nonce=nonce))
        )
        assert status == 200, text
        # An old nonce (two periods ago, same key) and a foreign one are refused with a fresh one.
        keys = NonceKeys(
            [__import__("base64").b64decode(SEAL_KEY)], RESOURCE, clock=lambda: time.time() - 120
        )
        foreign = NonceKeys([b"\x01" * 32], RESOURCE)
        for stale in (keys.current(60), foreign.current(60), "x" * 32):
            status, headers, text = await send(
                stack, dpop(token, key.proof(RESOURCE, token=token, nonce=stale))
            )
            assert_row(
                status,
                headers,
                text,
                error="use_dpop_nonce",
                message="DPoP nonce required",
                bearer=False,
            )
            assert headers["DPoP-Nonce"] != stale
        assert await metric(stack, "dpop_refusals_total", reason="nonce") == 4


async def test_no_dpop_outcome_leaks_the_token_or_the_proof(
    make_stack: MakeStack, out: Printed
) -> None:
    """SECURITY: the token, the proof and their signatures reach no log line, audit event,
    metric or answer (invariant 4), whatever the outcome."""
    key = DpopKey()
    secrets: list[str] = []
    seen: list[str] = []
    with structlog.testing.capture_logs() as events:
        async with make_stack.of(
            jwt_stack,
            issuer={"dpop": "allowed"},
            gateway={"audit": {"sink": "stdout"}},
        ) as stack:
            token = stack.token(jkt=key.jkt)
            proofs = [
                key.proof(RESOURCE, token=token),
                key.proof(RESOURCE, token=token, htm="GET"),
                key.proof(RESOURCE, token=token + "x"),
                DpopKey().proof(RESOURCE, token=token),
            ]
            proofs.append(proofs[0])  # a replay
            secrets.append(token)
            for proof in proofs:
                secrets.append(proof)
                status, headers, text = await send(stack, dpop(token, proof))
                seen.append(f"{status} {dict(headers)!r} {text}")
            status, headers, text = await send(stack, [("Authorization", f"Bearer {token}")])
            seen.append(f"{status} {dict(headers)!r} {text}")
            async with stack.session.get(stack.server.ops_url + "/metrics") as response:
                metrics = await response.text()
    assert [line[:3] for line in seen] == ["200", "401", "401", "401", "401", "401"]
    output = out.written()
    assert '"auth_method":"jwt+dpop"' in output  # the audit trail names the binding
    assert any(e.get("reason") == "proof jti seen before (replay)" for e in events), events
    haystacks = {
        "structlog events": repr(events),
        "stdout/stderr (audit trail)": output,
        "stdlib logs": out.logged(),
        "responses": "\n".join(seen),
        "metrics": metrics,
    }
    for where, text in haystacks.items():
        for secret in secrets:
            for form in (secret, secret.rsplit(".", 1)[1][:24]):
                assert form not in text, f"a token or proof leaked into {where}"


async def test_a_403_names_the_missing_scope_in_both_challenges(make_stack: MakeStack) -> None:
    key = DpopKey()
    async with make_stack.of(jwt_stack, issuer={"dpop": "allowed"}) as stack:
        token = stack.token(scopes="tools:echo", jkt=key.jkt)  # no baseline mcp:access
        status, headers, text = await send(stack, dpop(token, key.proof(RESOURCE, token=token)))
        assert status == 403, text
        challenges = parse_challenges(headers["WWW-Authenticate"])
        for scheme in ("Bearer", "DPoP"):
            assert challenges[scheme]["error"] == "insufficient_scope"
            assert challenges[scheme]["scope"] == "mcp:access"
        assert challenges["DPoP"]["algs"].split() == ALGS.split()


@pytest.mark.row("use_dpop_nonce")
async def test_an_introspected_token_without_a_nonce_costs_the_issuer_nothing(
    make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every introspecting issuer wants a nonce: refused before the introspection, then the
    retry with the nonce is introspected once."""
    key = DpopKey()
    async with make_stack(
        gateway={
            "issuer": {"dpop": {"mode": "allowed", "nonce": True}},
            **_nonce_gateway(monkeypatch),
        },
    ) as stack:
        token = stack.token(jkt=key.jkt)
        status, headers, text = await send(stack, dpop(token, key.proof(RESOURCE, token=token)))
        assert_row(status, headers, text, error="use_dpop_nonce", message="DPoP nonce required")
        assert stack.issuer.introspection_calls == 0
        nonce = headers["DPoP-Nonce"]
        status, _, text = await send(
            stack, dpop(token, key.proof(RESOURCE, token=token, nonce=nonce))
        )
        assert status == 200, text
        assert stack.issuer.introspection_calls == 1
