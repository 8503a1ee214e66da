"""Issue 32 items 1 and 8: a revocation names what the issuer signed, and lasts until a JWT's
``exp``.

ECDSA has a second valid signature ``(r, n - s)`` for every token; anyone holding an ES256 token
can write it without the key, and about half of real issuers' ES256 tokens are high-S, so the
gateway accepts both forms. A revocation keyed by the token's bytes missed the other spelling:
these tests show both spellings 200/200 before and 401/401 after ``mcp-gateway revoke`` (or the
admin endpoint), on two replicas sharing Redis, after a restart, and with the memory backend; a
fresh high-S token is still accepted; and with a short ``admin.revocation_ttl_s`` a revoked JWT
stays refused until its own ``exp``.

Real processes throughout: gateway replicas (``tests/support/replicas.py``), redis-server, the
development issuer signing with a P-256 key.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.support.jwt_forge import high_s, respell_ecdsa
from tests.support.redis_server import RedisServer, redis_server
from tests.support.replicas import SHARED_JWT_INTROSPECTION, Replica, ReplicaStack, replica_stack

pytestmark = pytest.mark.slow

__all__ = ["redis_server"]

JWT_ONLY = {"issuer": {"tokens": "jwt", "client_id": None, "client_secret": None}}
JWT_ISSUER = {"token_format": "jwt", "introspection": False}


def use_ec_key(stack: ReplicaStack) -> None:
    """Sign from now on with a new P-256 key (ES256); the replicas fetch it as an unknown kid."""
    stack.issuer.keys.use(stack.issuer.keys.add("EC"))


def mint_es256(stack: ReplicaStack, *, high: bool | None = None, **claims: Any) -> str:
    """An ES256 access token; ``high``: one whose signature is (or is not) in the high-S form."""
    while True:
        token = stack.mint(**claims)
        assert json.loads(_b64(token.split(".")[0]))["alg"] == "ES256"
        if high is None or high_s(token) == high:
            return token


def _b64(segment: str) -> bytes:
    return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))


def _unix(rfc3339: str) -> float:
    return datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp()


async def status(stack: ReplicaStack, replica: Replica, token: str) -> int:
    return (await stack.post(replica, token, "tools/list"))[0]


async def refused_everywhere(stack: ReplicaStack, tokens: list[str], seconds: float) -> None:
    """Every replica answers every token 401 within ``seconds`` (the broadcast)."""
    deadline = time.monotonic() + seconds
    for replica in stack.replicas:
        for token in tokens:
            while (code := await status(stack, replica, token)) != 401:
                assert code == 200, code
                if time.monotonic() > deadline:
                    pytest.fail(f"replica {replica.name} still accepts a revoked spelling")
                await asyncio.sleep(0.02)


async def test_both_ecdsa_spellings_are_revoked_together_on_every_replica(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    async with replica_stack(
        tmp_path, redis_server, overrides=JWT_ONLY, issuer_options=JWT_ISSUER
    ) as stack:
        a, b = stack.replicas
        use_ec_key(stack)
        token = mint_es256(stack)
        other = respell_ecdsa(token)
        assert other != token and high_s(other) != high_s(token)
        # Before: both forms verify, on both replicas (each is cached under its own bytes).
        for replica in (a, b):
            assert [await status(stack, replica, t) for t in (token, other)] == [200, 200]
        # A spelling with a broken signature shares the token's jti but is never a cache hit.
        head, _, signature = token.rpartition(".")
        broken = head + "." + ("A" if signature[0] != "A" else "B") + signature[1:]
        assert await status(stack, a, broken) == 401
        result = await asyncio.to_thread(
            stack.cli, "revoke", "--url", a.ops_url, "--token-file", "-", stdin=token + "\n"
        )
        assert result.returncode == 0, result.stderr
        assert "revoked (all_replicas)" in result.stdout
        await refused_everywhere(stack, [token, other], 1.0)
        # A replica that restarts (empty caches) refuses both spellings: the marker in Redis.
        await stack.restart(b)
        assert [await status(stack, b, t) for t in (token, other)] == [401, 401]
        # Accept both S forms: a fresh high-S token (and a low-S one) of the same issuer works.
        for high in (True, False):
            fresh = mint_es256(stack, high=high, sub="bob")
            for replica in (a, b):
                assert await status(stack, replica, fresh) == 200
        for replica in (a, b):
            log = replica.log()
            assert '"reason":"revoked at the gateway"' in log
            for t in (token, other):
                assert t not in log and t.rsplit(".", 1)[1] not in log


async def test_revoking_the_other_spelling_by_the_admin_endpoint_with_the_memory_backend(
    tmp_path: Path,
) -> None:
    async with replica_stack(
        tmp_path, None, replicas=1, overrides=JWT_ONLY, issuer_options=JWT_ISSUER
    ) as stack:
        (a,) = stack.replicas
        use_ec_key(stack)
        token = mint_es256(stack)
        other = respell_ecdsa(token)
        # A token without jti: the key is its signing input, which both spellings share.
        claims = json.loads(_b64(token.split(".")[1]))
        del claims["jti"]
        bare = stack.issuer.sign_jwt(claims)
        bare_other = respell_ecdsa(bare)
        spellings = [token, other, bare, bare_other]
        assert [await status(stack, a, t) for t in spellings] == [200] * 4
        status_code, reply = await stack.revoke(a, {"token": other})  # the re-spelled one
        assert status_code == 200 and reply["revoked"] == "this_replica"
        assert [await status(stack, a, t) for t in spellings] == [401, 401, 200, 200]
        status_code, reply = await stack.revoke(a, {"token": bare})
        assert status_code == 200
        assert [await status(stack, a, t) for t in spellings] == [401] * 4
        assert await status(stack, a, mint_es256(stack, high=True, sub="bob")) == 200


async def test_jwt_plus_introspection_an_issuer_that_accepts_both_spellings(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    """An issuer whose introspection verifies the signature (not the exact bytes) says both
    spellings are active; the shared cache holds each under its own bytes, and the revocation
    reaches both on both replicas."""
    async with replica_stack(tmp_path, redis_server, **SHARED_JWT_INTROSPECTION) as stack:
        a, b = stack.replicas
        use_ec_key(stack)
        token = mint_es256(stack)
        other = respell_ecdsa(token)
        stack.issuer.store.tokens[other] = stack.issuer.store.tokens[token]
        for replica in (a, b):
            assert [await status(stack, replica, t) for t in (token, other)] == [200, 200]
        status_code, _ = await stack.revoke(b, {"token": token})
        assert status_code == 200
        await refused_everywhere(stack, [token, other], 1.0)
        await stack.restart(a)
        assert [await status(stack, a, t) for t in (token, other)] == [401, 401]


async def test_a_revoked_jwt_stays_refused_until_its_exp_past_a_short_revocation_ttl(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    """Item 8: ``admin.revocation_ttl_s: 2`` and a token that lives 10 minutes: still refused
    after the ttl, on both replicas and after a restart (the marker lasts until ``exp``)."""
    overrides = {
        "issuer": {**JWT_ONLY["issuer"], "cache": {"max_ttl_s": 1}, "clock_skew_s": 5},
        "admin": {"revocation_ttl_s": 2},
    }
    async with replica_stack(
        tmp_path, redis_server, overrides=overrides, issuer_options=JWT_ISSUER
    ) as stack:
        a, b = stack.replicas
        token = stack.mint(ttl_s=600)
        exp = json.loads(_b64(token.split(".")[1]))["exp"]
        assert [await status(stack, r, token) for r in (a, b)] == [200, 200]
        result = await asyncio.to_thread(
            stack.cli, "revoke", "--url", a.ops_url, "--token-file", "-", stdin=token
        )
        assert result.returncode == 0, result.stderr
        (event,) = [
            json.loads(line)
            for line in a.log().splitlines()
            if '"event":"token_revoked"' in line and '"log":"audit"' in line
        ]
        # Until exp + clock_skew_s (RFC 3339, whole seconds).
        assert abs(_unix(event["until"]) - (exp + 5)) <= 1, (event, exp)
        await refused_everywhere(stack, [token], 1.0)
        await asyncio.sleep(3)  # past admin.revocation_ttl_s
        assert [await status(stack, r, token) for r in (a, b)] == [401, 401]
        await stack.restart(b)
        assert await status(stack, b, token) == 401
        prefix = json.loads(a.config_path.read_text())["state"]["redis"]["key_prefix"]
        score = redis_server.client().zscore(prefix + "revoked", event["revocation_key"])
        assert score is not None and abs(float(score) - (exp + 5)) <= 1


async def test_with_the_memory_backend_a_revoked_jwt_outlives_the_ttl_too(tmp_path: Path) -> None:
    overrides = {
        "issuer": {**JWT_ONLY["issuer"], "cache": {"max_ttl_s": 1}},
        "admin": {"revocation_ttl_s": 2},
    }
    async with replica_stack(
        tmp_path, None, replicas=1, overrides=overrides, issuer_options=JWT_ISSUER
    ) as stack:
        (a,) = stack.replicas
        token, other = stack.mint(ttl_s=600), stack.mint("bob", ttl_s=600)
        exp = json.loads(_b64(token.split(".")[1]))["exp"]
        assert await status(stack, a, token) == 200
        status_code, reply = await stack.revoke(a, {"token": token})
        assert status_code == 200
        assert abs(_unix(reply["until"]) - (exp + 30)) <= 1  # exp + the default clock_skew_s
        await asyncio.sleep(3)
        assert await status(stack, a, token) == 401
        assert await status(stack, a, other) == 200


@pytest.mark.parametrize("tokens", ["introspection", "jwt+introspection"])
async def test_trailing_dots_do_not_escape_a_revocation(tmp_path: Path, tokens: str) -> None:
    """``h.p.s.`` is ``h.p.s`` to an issuer that splits the token as Java's ``String.split``
    does (trailing empty strings dropped: Keycloak's ``JWSInput``), so its introspection says the
    spelling with trailing dots is active too. The gateway refuses that spelling (next test) and
    its revocation key is the token's: revoking either spelling revokes the token."""
    async with replica_stack(
        tmp_path,
        None,
        replicas=1,
        overrides={"issuer": {"tokens": tokens}},
        issuer_options={"token_format": "jwt"},
    ) as stack:
        (a,) = stack.replicas
        for revoked in ("", ".", "..."):
            token = stack.mint(f"user{len(revoked)}")
            dotted = [token + ".", token + "..", token + "..."]
            for spelling in dotted:  # what a splitting issuer answers for each
                stack.issuer.store.tokens[spelling] = stack.issuer.store.tokens[token]
            spellings = [token, *dotted]
            assert [await status(stack, a, t) for t in spellings] == [200, 401, 401, 401]
            status_code, reply = await stack.revoke(a, {"token": token + revoked})
            assert status_code == 200, reply
            assert [await status(stack, a, t) for t in spellings] == [401] * 4
            assert '"reason":"revoked at the gateway"' in a.log()


@pytest.mark.parametrize("tokens", ["jwt", "introspection", "jwt+introspection"])
async def test_a_jwt_with_trailing_dots_is_refused_without_an_issuer_call(
    tmp_path: Path, tokens: str
) -> None:
    """Not a JWS to a strict reader, ``h.p.s.`` used to be routed as an opaque token: to every
    introspecting issuer whatever its ``iss`` says, and in ``jwt+introspection`` past the JWT's
    own checks (its ``cnf`` binding, the ID-token markers) to an issuer that reads it as the
    JWT itself. It is a malformed JWS: 401 ``invalid_token``, no introspection."""
    overrides = JWT_ONLY if tokens == "jwt" else {"issuer": {"tokens": tokens}}
    async with replica_stack(
        tmp_path,
        None,
        replicas=1,
        overrides=overrides,
        issuer_options={"token_format": "jwt", "introspection": tokens != "jwt"},
    ) as stack:
        (a,) = stack.replicas
        token = stack.mint()
        for dotted in (token + ".", token + ".."):
            stack.issuer.store.tokens[dotted] = stack.issuer.store.tokens[token]
        calls = stack.issuer.introspection_calls
        for dotted in (token + ".", token + ".."):
            code, body, headers = await stack.post(a, dotted, "tools/list")
            assert code == 401, body
            assert 'error="invalid_token"' in headers["WWW-Authenticate"]
        assert stack.issuer.introspection_calls == calls
        assert await status(stack, a, token) == 200
        assert '"reason":"JWS with trailing dots"' in a.log()


async def test_an_introspected_jwt_past_max_token_lifetime_stays_revoked_until_its_exp(
    tmp_path: Path,
) -> None:
    """``tokens: introspection`` checks no JWT locally, so a JWT whose ``exp`` is further ahead
    than ``max_token_lifetime_s`` is accepted (its issuer says active); its revocation used to be
    cut at ``now + max_token_lifetime_s`` and the token came back before its ``exp``."""
    overrides = {
        "issuer": {
            "tokens": "introspection",
            "max_token_lifetime_s": 60,
            "clock_skew_s": 0,
            "cache": {"max_ttl_s": 1},
        },
        "admin": {"revocation_ttl_s": 1},
    }
    async with replica_stack(
        tmp_path, None, replicas=1, overrides=overrides, issuer_options={"token_format": "jwt"}
    ) as stack:
        (a,) = stack.replicas
        token = stack.mint(ttl_s=600)
        exp = json.loads(_b64(token.split(".")[1]))["exp"]
        assert await status(stack, a, token) == 200
        status_code, reply = await stack.revoke(a, {"token": token})
        assert status_code == 200
        assert abs(_unix(reply["until"]) - exp) <= 1, (reply, exp)
        await asyncio.sleep(1.5)  # past admin.revocation_ttl_s
        assert await status(stack, a, token) == 401
