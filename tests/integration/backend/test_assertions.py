"""Signed caller assertions through the real HTTP surface (issue 16).

The dev issuer mints the callers' tokens, the production wiring runs the gateway, and the
upstream checks every ``tools/call`` with an independent verifier (PyJWT, the gateway's JWK Set
fetched over HTTP): signature, ``typ``, ``kid``, ``aud``, ``iss``, ``exp``, the claims against
the caller, and the ``jti`` policy of docs/backends.md (unique per minted assertion; reused
assertions keep theirs).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

import jwt
import pytest
import structlog

from gateway.config import Secret
from tests.support.assertion_verifier import (
    ASSERTION_HEADER,
    ASSERTION_TYP,
    VerifiedUpstream,
    public_pem,
    write_key,
)
from tests.support.live_stack import LiveStack, MakeStack, ServerFactory
from tests.support.policy import policy_text
from tests.support.upstreams import echo_tool

POLICY = policy_text(tools={"echo": "tools:echo", "shout": "tools:echo", "docs__*": "tools:echo"})
RESOURCE = "https://mcp.example.test/mcp"


def _ok(status: int, text: str) -> dict[str, Any]:
    assert status == 200, text
    result = json.loads(text)["result"]
    assert result.get("isError") is not True, result
    return dict(result)


def _bump(path: Path) -> None:
    # A rotated file gets a new mtime even within the filesystem's timestamp resolution.
    stamp = time.time() + 5
    os.utime(path, (stamp, stamp))


async def _jwks(stack: LiveStack, base: str) -> tuple[int, dict[str, str], Any]:
    async with stack.session.get(base + "/.well-known/jwks.json") as response:
        text = await response.text()
        return response.status, dict(response.headers), json.loads(text) if response.ok else None


def _trust(upstream: VerifiedUpstream, stack: LiveStack, audience: str | None = None) -> Any:
    """Point the upstream's verifier at the gateway: its resource as the issuer, the audience
    (default: the backend's URL) and its published key set."""
    verifier = upstream.verifier
    verifier.issuer, verifier.audience = RESOURCE, audience or stack.config.backends[0].url
    verifier.jwks_url = stack.server.ops_url + "/.well-known/jwks.json"
    return verifier


def _identity(key: Path, **extra: Any) -> dict[str, Any]:
    return {"identity": {"assertion": {"key": {"file": str(key)}, **extra}}}


class TestTheBackendVerifiesWhoIsCalling:
    async def test_every_call_carries_an_assertion_that_verifies_and_names_the_caller(
        self, tmp_path: Path, make_stack: MakeStack
    ) -> None:
        key = write_key(tmp_path / "assertion.pem")
        upstream = VerifiedUpstream(tools=[echo_tool("echo"), echo_tool("shout")])
        async with make_stack(
            upstream=upstream,
            policy=POLICY,
            gateway={"backend": _identity(key)},
        ) as stack:
            verifier = _trust(upstream, stack)
            erin = stack.token(sub="erin")
            frank = stack.issuer.mint_token(
                sub="frank",
                client_id="claude-code",
                scopes="mcp:access tools:echo",
                audience=RESOURCE,
                ttl_s=600,
            )
            for token, tool in ((erin, "echo"), (erin, "echo"), (erin, "shout"), (frank, "echo")):
                status, _, text = await stack.call(token, tool, {"text": "hi"})
                _ok(status, text)
            assert verifier.failures == []
            assert len(verifier.verified) == 4
            first, again, shout, other = verifier.verified
            assert first.header["typ"] == ASSERTION_TYP
            assert first.header["alg"] == "EdDSA" and first.header["kid"]
            claims = first.claims
            assert claims["iss"] == RESOURCE
            assert claims["aud"] == stack.config.backends[0].url  # default: the backend URL
            assert claims["sub"] == "erin"
            assert claims["client_id"] == claims["azp"] == "demo-cli"
            assert claims["scope"] == "mcp:access tools:echo"
            assert claims["tool"] == {"name": "echo", "upstream": "echo"}
            assert 0 < claims["exp"] - claims["iat"] <= 60
            assert claims["request_id"] == first.request_id  # minted for this call
            # Nothing else of the caller's token is copied (no jti/aud/iss of the token).
            assert set(claims) == {
                "iss",
                "aud",
                "sub",
                "client_id",
                "azp",
                "scope",
                "tool",
                "iat",
                "exp",
                "jti",
                "request_id",
            }
            # The documented jti policy: reused within half the lifetime for the same caller
            # token and tool (same jti), a fresh one for another tool or another caller.
            assert again.token == first.token and again.claims["jti"] == claims["jti"]
            assert again.request_id != first.request_id  # the header names the current call
            assert shout.claims["tool"]["name"] == "shout"
            assert shout.claims["jti"] != claims["jti"]
            assert other.claims["sub"] == "frank"
            assert other.claims["client_id"] == "claude-code"
            assert len({v.claims["jti"] for v in (first, shout, other)}) == 3
            # Catalog traffic has no caller and carries no assertion.
            for entry in upstream.requests:
                method = (entry.json or {}).get("method")
                assert (ASSERTION_HEADER in entry.headers) == (method == "tools/call"), method

    async def test_without_reuse_every_call_is_a_fresh_assertion_with_a_unique_jti(
        self, tmp_path: Path, make_stack: MakeStack
    ) -> None:
        key = write_key(tmp_path / "assertion.pem", "p256")
        upstream = VerifiedUpstream()
        async with make_stack(
            upstream=upstream,
            gateway={
                "backend": _identity(
                    key,
                    alg="ES256",
                    reuse=False,
                    ttl_s=300,
                    audience="urn:tools",
                    header="X-Caller",
                )
            },
        ) as stack:
            verifier = _trust(upstream, stack, "urn:tools")
            verifier.header = "X-Caller"
            token = stack.token()
            calls = [stack.call(token, "echo", {"text": str(i)}) for i in range(6)]
            for status, _, text in await asyncio.gather(*calls):
                _ok(status, text)
            assert verifier.failures == []
            assert len(verifier.verified) == 6
            assert len({v.claims["jti"] for v in verifier.verified}) == 6
            assert all(v.header["alg"] == "ES256" for v in verifier.verified)
            assert all(v.claims["request_id"] == v.request_id for v in verifier.verified)
            assert all(v.claims["aud"] == "urn:tools" for v in verifier.verified)
            assert all(v.claims["exp"] - v.claims["iat"] <= 300 for v in verifier.verified)
            assert all(ASSERTION_HEADER not in r.headers for r in upstream.requests)

    async def test_the_assertion_never_outlives_the_callers_token(
        self, tmp_path: Path, make_stack: MakeStack
    ) -> None:
        key = write_key(tmp_path / "assertion.pem")
        upstream = VerifiedUpstream()
        async with make_stack(
            upstream=upstream,
            gateway={"backend": _identity(key, ttl_s=300), "issuer": {"clock_skew_s": 0}},
        ) as stack:
            verifier = _trust(upstream, stack)
            before = int(time.time())
            token = stack.token(ttl_s=20)  # exp = mint time + 20, with no clock skew allowed
            _ok(*(await stack.call(token))[::2])
            (seen,) = verifier.verified
            assert seen.claims["exp"] <= before + 21 < seen.claims["iat"] + 300

    async def test_a_client_supplied_assertion_header_never_reaches_the_backend(
        self, tmp_path: Path, make_stack: MakeStack
    ) -> None:
        key = write_key(tmp_path / "assertion.pem")
        forged = jwt.encode({"sub": "admin"}, "x" * 32, algorithm="HS256")
        upstream = VerifiedUpstream()
        async with make_stack(
            upstream=upstream,
            gateway={"backend": _identity(key)},
        ) as stack:
            verifier = _trust(upstream, stack)
            sent = {ASSERTION_HEADER: forged, "X-MCP-Gateway-Subject": "admin"}
            status, _, text = await stack.call(stack.token(sub="erin"), headers=sent)
            _ok(status, text)
            (call,) = upstream.calls("tools/call")
            assert call.headers.getall(ASSERTION_HEADER) == [verifier.verified[0].token]
            assert verifier.verified[0].claims["sub"] == "erin"
            assert forged not in repr(dict(call.headers))
            assert "X-MCP-Gateway-Subject" not in call.headers

    async def test_without_identity_a_client_assertion_header_is_not_forwarded_either(
        self, make_stack: MakeStack
    ) -> None:
        async with make_stack() as stack:
            status, _, text = await stack.call(
                stack.token(), headers={ASSERTION_HEADER: "client-made"}
            )
            _ok(status, text)
            (call,) = stack.upstream.calls("tools/call")
            assert ASSERTION_HEADER not in call.headers
            # No assertion key, no JWK Set anywhere.
            assert (await _jwks(stack, stack.server.ops_url))[0] == 404


class TestTheJwkSet:
    async def test_ops_always_public_only_when_configured_public_keys_only(
        self, tmp_path: Path, make_stack: MakeStack
    ) -> None:
        key = write_key(tmp_path / "assertion.pem")
        async with make_stack(gateway={"backend": _identity(key)}) as stack:
            status, headers, doc = await _jwks(stack, stack.server.ops_url)
            assert status == 200
            assert headers["Content-Type"] == "application/jwk-set+json"
            assert headers["Cache-Control"] == "public, max-age=300"
            (jwk,) = doc["keys"]
            assert jwk["kty"] == "OKP" and jwk["crv"] == "Ed25519"
            assert jwk["use"] == "sig" and jwk["alg"] == "EdDSA" and jwk["kid"]
            assert "d" not in jwk  # never the private part
            base = str(stack.server.mcp_url).rsplit("/mcp", 1)[0]
            assert (await _jwks(stack, base))[0] == 404  # not public unless configured
        async with make_stack(
            gateway={"backend": _identity(key), "identity_jwks": {"public": True}},
        ) as stack:
            base = str(stack.server.mcp_url).rsplit("/mcp", 1)[0]
            status, headers, public = await _jwks(stack, base)
            assert status == 200 and public == doc
            async with stack.session.head(base + "/.well-known/jwks.json") as response:
                assert response.status == 200
            async with stack.session.post(base + "/.well-known/jwks.json") as response:
                assert response.status == 405
            # The route table stays exact: no other well-known path appears.
            async with stack.session.get(base + "/.well-known/jwks") as response:
                assert response.status == 404


class TestRotationWithoutRestart:
    async def test_publish_ahead_swap_the_key_file_retire_the_old_key(
        self, tmp_path: Path, make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(Secret, "RECHECK_S", 0.0)  # look at the files on every use
        key = write_key(tmp_path / "assertion.pem")
        published = tmp_path / "published.pem"
        published.write_text("")  # an empty slot: nothing extra published yet
        upstream = VerifiedUpstream()
        async with make_stack(
            upstream=upstream,
            gateway={
                "backend": _identity(key),
                "identity_jwks": {"publish_keys": [{"file": str(published)}]},
            },
        ) as stack:
            verifier = _trust(upstream, stack)
            token = stack.token()
            _ok(*(await stack.call(token))[::2])
            old_kid = verifier.verified[-1].header["kid"]
            old_token = verifier.verified[-1].token
            # 1. Publish the next key ahead: the set lists both; the old one still signs.
            nxt = write_key(tmp_path / "next.pem")
            published.write_bytes(public_pem(nxt))
            _bump(published)
            doc = (await _jwks(stack, stack.server.ops_url))[2]
            kids = [jwk["kid"] for jwk in doc["keys"]]
            assert kids[0] == old_kid and len(kids) == 2
            new_kid = kids[1]
            # 2. Swap: the next key signs (atomic rename), the old one is published as previous.
            previous = public_pem(key)
            os.replace(nxt, key)
            _bump(key)
            published.write_bytes(previous)
            _bump(published)
            status, _, text = await stack.call(stack.token(sub="after-rotation"))
            _ok(status, text)
            assert verifier.failures == []
            latest = verifier.verified[-1]
            assert latest.header["kid"] == new_kid and latest.claims["sub"] == "after-rotation"
            assert verifier.jwks_fetches == 2  # the unknown kid made the verifier fetch again
            # An assertion minted before the swap still verifies against the published set.
            assert (await verifier.verify(old_token))[1]["kid"] == old_kid
            # 3. Retire the previous key: the set holds only the signing key again.
            published.write_text("")
            _bump(published)
            doc = (await _jwks(stack, stack.server.ops_url))[2]
            assert [jwk["kid"] for jwk in doc["keys"]] == [new_kid]

    async def test_a_broken_rotation_keeps_the_old_key_signing(
        self, tmp_path: Path, make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(Secret, "RECHECK_S", 0.0)
        key = write_key(tmp_path / "assertion.pem")
        upstream = VerifiedUpstream()
        async with make_stack(
            upstream=upstream,
            gateway={"backend": _identity(key)},
        ) as stack:
            verifier = _trust(upstream, stack)
            kid = (await _jwks(stack, stack.server.ops_url))[2]["keys"][0]["kid"]
            write_key(tmp_path / "rsa.pem", "rsa")
            os.replace(tmp_path / "rsa.pem", key)  # an RSA key for alg EdDSA: refused
            _bump(key)
            with structlog.testing.capture_logs() as events:
                status, _, text = await stack.call(stack.token(sub="during-bad-rotation"))
            _ok(status, text)
            assert verifier.verified[-1].header["kid"] == kid
            assert any(e["event"] == "assertion_key_rejected" for e in events), events
            assert [j["kid"] for j in (await _jwks(stack, stack.server.ops_url))[2]["keys"]] == [
                kid
            ]


class TestSeveralBackends:
    async def test_each_backend_gets_its_own_audience_only_where_configured(
        self, tmp_path: Path, aiohttp_server: ServerFactory, make_stack: MakeStack
    ) -> None:
        key = write_key(tmp_path / "assertion.pem")
        docs = VerifiedUpstream(tools=[echo_tool("search")])
        plain = VerifiedUpstream(tools=[echo_tool("shout")])
        docs_url = str((await aiohttp_server(docs.app())).make_url("/mcp"))
        plain_url = str((await aiohttp_server(plain.app())).make_url("/mcp"))
        backends = {
            "docs": {
                "url": docs_url,
                "allow_insecure_http": True,
                "credential": {"type": "bearer", "token": {"env": "LIVE_STACK_SERVICE"}},
                **_identity(key),
            },
            "plain": {
                "url": plain_url,
                "allow_insecure_http": True,
                "prefix": "",
                "credential": {"type": "bearer", "token": {"env": "LIVE_STACK_SERVICE"}},
            },
        }
        async with make_stack(backends=backends, policy=POLICY) as stack:
            verifier = docs.verifier
            verifier.issuer, verifier.audience = RESOURCE, docs_url
            verifier.jwks_url = stack.server.ops_url + "/.well-known/jwks.json"
            token = stack.token()
            _ok(*(await stack.call(token, "docs__search", {"text": "x"}))[::2])
            (seen,) = verifier.verified
            assert seen.claims["tool"] == {"name": "docs__search", "upstream": "search"}
            plain.verifier.jwks_url = verifier.jwks_url
            plain.verifier.issuer, plain.verifier.audience = RESOURCE, plain_url
            status, _, text = await stack.call(token, "shout", {"text": "x"})
            assert status == 200 and json.loads(text)["result"]["isError"] is True
            # The unconfigured backend received no assertion (its verifier refused the call).
            assert plain.verifier.failures == ["InvalidTokenError: 0 assertion headers"]
