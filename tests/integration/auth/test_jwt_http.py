"""RFC 9068 JWT access tokens validated locally, through the real HTTP surface.

The full gateway (``build_services``) runs in front of the development issuer in JWT mode with
no introspection endpoint (as Microsoft Entra ID has none); every token is made by that issuer's
real keys or forged the way an attacker would. Each refusal must be exactly the
``invalid_token`` row (401, RFC 6750 challenge, JSON-RPC -31401), cost no issuer call, and never
reach the backend.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gateway.dev.dev_issuer import DevIssuer
from tests.support.jwt_forge import access_claims, forge_hs256_with_public_key, forge_none, tamper
from tests.support.jwt_stack import assert_invalid_token, jwt_stack, metric
from tests.support.live_stack import LiveStack, MakeStack

pytestmark = pytest.mark.row("invalid_token")


async def echo(stack: LiveStack, token: str) -> tuple[int, dict[str, str], str]:
    return await stack.call(token, "echo", {"text": "hi"})


async def test_a_jwt_is_accepted_without_any_issuer_call_and_then_served_from_the_cache(
    tmp_path: Path, make_stack: MakeStack
) -> None:
    audit = tmp_path / "audit.jsonl"
    async with make_stack.of(
        jwt_stack,
        gateway={"audit": {"sink": "file", "path": str(audit)}},
    ) as stack:
        fetched = stack.issuer.jwks.calls
        token = stack.token()
        assert token.count(".") == 2  # a JWT, not an opaque token
        for _ in range(3):
            status, _, text = await echo(stack, token)
            assert status == 200, text
            assert json.loads(text)["result"]["isError"] is False
        assert await metric(stack, "jwt_validations_total", result="valid") == 1
        assert await metric(stack, "authentications_total", auth_method="jwt") == 3
        assert await metric(stack, "token_cache_total", outcome="hit") == 2
        assert stack.issuer.jwks.calls == fetched  # the startup fetch was all
        assert stack.issuer.introspection_calls == 0
        # The backend got the gateway's credential, never the client's token.
        calls = stack.upstream.calls("tools/call")
        assert len(calls) == 3
        for call in calls:
            assert token not in repr(call.headers) and token not in call.body.decode()
    events = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [(e["subject"], e["auth_method"]) for e in events] == [("erin", "jwt")] * 3


def _cases() -> dict[str, Callable[[DevIssuer, str], str]]:
    def signed(**changes: Any) -> Callable[[DevIssuer, str], str]:
        return lambda dev, aud: dev.sign_jwt(access_claims(dev.url, aud, **changes))

    def header(**fields: Any) -> Callable[[DevIssuer, str], str]:
        return lambda dev, aud: dev.sign_jwt(access_claims(dev.url, aud), header=fields)

    now = int(time.time())
    return {
        "bad signature": lambda dev, aud: tamper(dev.sign_jwt(access_claims(dev.url, aud))),
        "alg none": lambda dev, aud: forge_none(access_claims(dev.url, aud)),
        "HS256 signed with the public key": lambda dev, aud: forge_hs256_with_public_key(
            access_claims(dev.url, aud), dev.keys.key(), dev.keys.signing_kid
        ),
        "wrong kid": header(kid="no-such-key"),
        "wrong aud": signed(aud="https://other.example/mcp"),
        "no aud": signed(aud=None),
        "expired": signed(exp=now - 3600),
        "nbf in the future": signed(nbf=now + 3600),
        "iat in the future": signed(iat=now + 3600),
        "typ JWT (not at+jwt)": header(typ="JWT"),
        "no typ": header(typ=None),
        "crit header": header(crit=["exp"], exp=now + 60),
        "cnf-bound (DPoP)": signed(cnf={"jkt": "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I"}),
        "ID token (nonce, aud = client)": lambda dev, aud: dev.sign_jwt(
            access_claims(dev.url, aud, nonce="n-0S6_WzA2Mj", azp="demo-cli"),
            header={"typ": "JWT"},
        ),
        "ID token with at+jwt typ": signed(nonce="n-0S6_WzA2Mj", at_hash="77QmUPtjPfzWtF2AnpK9RQ"),
        "Keycloak-style refresh JWT": signed(typ="Refresh"),
        "no sub": signed(sub=None),
        "iss of an unknown issuer": signed(iss="https://evil.example.com"),
        "iss with a trailing slash": lambda dev, aud: dev.sign_jwt(
            access_claims(dev.url + "/", aud)
        ),
        "opaque refresh token (no issuer introspects)": lambda dev, aud: secrets.token_urlsafe(48),
        "malformed payload": lambda dev, aud: dev.sign_jwt(access_claims(dev.url, aud)).replace(
            ".", ".e30x", 1
        ),
    }


CASES = _cases()


@pytest.mark.parametrize("case", list(CASES))
async def test_every_bad_jwt_is_401_invalid_token_without_an_issuer_call(
    make_stack: MakeStack, case: str
) -> None:
    async with make_stack.of(jwt_stack) as stack:
        token = CASES[case](stack.issuer, stack.config.resource)
        fetched = stack.issuer.jwks.calls
        status, headers, text = await echo(stack, token)
        assert_invalid_token(stack, status, headers, text)
        # Only an unknown kid may refresh the key set (once); nothing else calls the issuer.
        assert stack.issuer.jwks.calls - fetched == (1 if case == "wrong kid" else 0)
        assert stack.upstream.calls("tools/call") == []
        # Local refusals cost no issuer call, so they are never charged to the budget.
        assert await metric(stack, "rate_limited_total", scope="failed_auth") == 0


async def test_a_token_at_max_token_bytes_is_accepted_and_one_byte_more_is_refused(
    make_stack: MakeStack,
) -> None:
    limit = 2048
    async with make_stack.of(jwt_stack, issuer={"max_token_bytes": limit}) as stack:

        def sized(length: int) -> str:
            pad = 0
            while True:
                claims = access_claims(stack.issuer.url, stack.config.resource, pad="x" * pad)
                token = stack.issuer.sign_jwt(claims)
                if len(token) >= length:
                    assert len(token) - length < 4  # base64: 4 characters per 3 bytes
                    return token
                pad += 1

        # Find tokens of exactly limit and limit + 1 characters (pad until one lands on it).
        exact = next(t for t in (sized(limit - k) for k in range(4)) if len(t) == limit)
        over = next(t for t in (sized(limit + 1 + k) for k in range(4)) if len(t) == limit + 1)
        assert (await echo(stack, exact))[0] == 200
        assert_invalid_token(stack, *await echo(stack, over))


async def test_key_rotation_works_without_a_restart(make_stack: MakeStack) -> None:
    dev = DevIssuer(token_format="jwt", introspection=False)
    dev.jwks.max_age_s = 1  # the gateway refreshes every second (jwks_min_refresh_s: 1)
    async with make_stack.of(
        jwt_stack,
        dev=dev,
        issuer={"jwks_min_refresh_s": 1, "jwks_unknown_kid_interval_s": 1},
    ) as stack:
        old_kid = dev.keys.signing_kid
        old_token = stack.token(sub="before")
        assert (await echo(stack, old_token))[0] == 200
        # 1. A new key, published and used at once: the unknown kid refreshes the set.
        new_kid = dev.keys.add("EC")
        dev.keys.use(new_kid)
        new_token = stack.token(sub="after")
        assert json.loads((await echo(stack, new_token))[2])["result"]["isError"] is False
        assert (await echo(stack, old_token))[0] == 200  # both keys are published
        # 2. The old key is removed: within a refresh interval its tokens stop working, even
        # the one the gateway had cached.
        dev.keys.remove(old_kid)
        deadline = time.monotonic() + 5
        while (await echo(stack, old_token))[0] == 200:
            assert time.monotonic() < deadline, "the removed key kept working"
            await asyncio.sleep(0.2)
        assert_invalid_token(stack, *await echo(stack, old_token))
        assert_invalid_token(
            stack,
            *await echo(
                stack,
                stack.issuer.sign_jwt(
                    access_claims(dev.url, stack.config.resource),
                    kid=new_kid,
                    header={"kid": old_kid},
                ),
            ),
        )
        assert (await echo(stack, new_token))[0] == 200


async def test_a_flood_of_random_kids_costs_at_most_one_jwks_fetch_per_interval(
    make_stack: MakeStack,
) -> None:
    async with make_stack.of(
        jwt_stack,
        issuer={"jwks_unknown_kid_interval_s": 60},
        gateway={"limits": {"pre_auth_rate": None}},
    ) as stack:
        dev = stack.issuer
        before = dev.jwks.calls
        claims = access_claims(dev.url, stack.config.resource)
        tokens = [dev.sign_jwt(claims, header={"kid": secrets.token_hex(8)}) for _ in range(1000)]
        statuses: list[int] = []
        for start in range(0, len(tokens), 50):  # under the per-IP in-flight share (64)
            batch = tokens[start : start + 50]
            results = await asyncio.gather(*(echo(stack, token) for token in batch))
            statuses.extend(status for status, _, _ in results)
        assert statuses == [401] * 1000
        assert dev.jwks.calls - before <= 1
        # The valid caller is not affected.
        assert (await echo(stack, stack.token()))[0] == 200


async def test_a_revoked_jwt_is_refused_although_its_signature_is_valid(
    make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    admin = "jwt-admin-token-0123456789abcdef0123"
    monkeypatch.setenv("JWT_ADMIN_TOKEN", admin)
    async with make_stack.of(
        jwt_stack,
        gateway={"admin": {"token": {"env": "JWT_ADMIN_TOKEN"}}},
    ) as stack:
        token = stack.token()
        assert (await echo(stack, token))[0] == 200  # verified and cached
        status, text = await stack.revoke(token, admin)
        assert status == 200, text
        assert_invalid_token(stack, *await echo(stack, token))  # evicted, then the marker
        assert_invalid_token(stack, *await echo(stack, token))
        assert (await echo(stack, stack.token(sub="other")))[0] == 200
