"""RFC 8693 token exchange through the real HTTP surface: the backend gets an issuer-minted token
for itself, with the caller's ``sub``, never the caller's own token (issue 16).

The upstream introspects every token it receives at the development issuer over HTTP, so what
these tests assert is the issuer's word on the token the backend got."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from pathlib import Path
from typing import Any

import pytest
from joserfc.jwk import RSAKey

from gateway.config import TOKEN_EXCHANGE_GRANT
from gateway.dev.dev_issuer import DevIssuer
from tests.support.exchange_stack import (
    BACKEND_RESOURCE,
    EXCHANGE_CLIENT,
    EXCHANGE_SECRET,
    INTROSPECTOR,
    IntrospectingUpstream,
    exchange_stack,
)
from tests.support.jwt_stack import metric
from tests.support.live_stack import (
    LiveStack,
    MakeStack,
    issuer_entries,
    other_issuer,
)
from tests.support.test_issuer import generate_rsa_key

ADMIN = "exchange-admin-token-0123456789abcdef"


def _ok(status: int, text: str) -> None:
    assert status == 200, text
    assert json.loads(text)["result"].get("isError") is not True, text


def _audit(output: str) -> list[dict[str, Any]]:
    events = []
    for line in output.splitlines():
        if line.startswith("{") and '"log":"audit"' in line:
            events.append(json.loads(line))
    return [e for e in events if e.get("event") == "tool_call"]


async def _revoke(stack: LiveStack, token: str) -> None:
    status, text = await stack.revoke(token, ADMIN)
    assert status == 200, text


async def test_the_backend_gets_a_token_minted_for_it_with_the_callers_sub(
    make_stack: MakeStack,
    capfd: pytest.CaptureFixture[str],
) -> None:
    async with make_stack.of(exchange_stack, gateway={"audit": {"sink": "stdout"}}) as (
        stack,
        upstream,
    ):
        token = stack.token(sub="erin")
        _ok(*(await stack.call(token, "echo", {"text": "one"}))[::2])
        _ok(*(await stack.call(token, "echo", {"text": "two"}))[::2])
        first, second = upstream.calls_seen()
        assert first.token != token and second.token == first.token  # cached, reused
        doc = first.introspection
        assert doc["active"] is True
        assert doc["sub"] == "erin"
        assert doc["aud"] == BACKEND_RESOURCE
        assert doc["client_id"] == EXCHANGE_CLIENT
        assert doc["act"] == {"sub": EXCHANGE_CLIENT}
        assert stack.issuer.exchange_faults.calls == 1
        assert await metric(stack, "token_exchanges_total", backend="default", result="ok") == 1
        assert await metric(stack, "exchanged_tokens", backend="default") == 1
        # Catalog traffic carries the gateway's own token for the backend, never a caller's.
        catalog = [s for s in upstream.seen if s.method != "tools/call"]
        assert catalog and all(s.introspection["sub"] == EXCHANGE_CLIENT for s in catalog)
        assert all(s.token != token for s in upstream.seen)
        # Another caller gets a token of its own.
        other = stack.token(sub="frank")
        _ok(*(await stack.call(other))[::2])
        assert upstream.calls_seen()[-1].introspection["sub"] == "frank"
        assert upstream.calls_seen()[-1].token != first.token
    # The audit trail records each exchange: backend, the exchanged token's fingerprint, act.
    events = _audit(capfd.readouterr().out)
    fingerprint = hashlib.sha256(first.token.encode()).hexdigest()[:12]
    assert [e["exchange"] for e in events[:2]] == [
        {"backend": "default", "token_fp": fingerprint, "act": None, "exchanged": True},
        {"backend": "default", "token_fp": fingerprint, "act": None, "exchanged": False},
    ]
    assert events[0]["token_fp"] != fingerprint  # the caller's own fingerprint stays apart


async def test_actor_service_sends_the_gateways_own_token_as_actor_token(
    make_stack: MakeStack,
    capfd: pytest.CaptureFixture[str],
) -> None:
    dev = DevIssuer(token_format="jwt")
    dev.exchange_policy.require_actor = True  # an issuer that needs one (Okta's shape)
    async with make_stack.of(
        exchange_stack,
        dev=dev,
        credential={
            "actor": "service",
            "scope": "mcp:access",
            "requested_token_type": "urn:ietf:params:oauth:token-type:jwt",
        },
        gateway={"audit": {"sink": "stdout"}},
    ) as (stack, upstream):
        _ok(*(await stack.call(stack.token(sub="erin")))[::2])
        (seen,) = upstream.calls_seen()
        assert seen.token.count(".") == 2  # a JWT, as requested
        assert seen.introspection["sub"] == "erin"
        assert seen.introspection["scope"] == "mcp:access"  # narrowed to the credential's scope
        # act names the subject of the actor token: the gateway's client-credentials token.
        assert seen.introspection["act"] == {"sub": EXCHANGE_CLIENT}
    (event,) = _audit(capfd.readouterr().out)
    assert event["exchange"]["act"] == EXCHANGE_CLIENT


@pytest.mark.parametrize("client_auth", ["client_secret_post", "private_key_jwt"])
async def test_the_exchange_authenticates_the_gateway_as_client_credentials_do(
    tmp_path: Path, make_stack: MakeStack, client_auth: str
) -> None:
    # The development issuer accepts a client only by the method it was registered with, so a
    # served call proves the exchange (and the catalog's client-credentials token) used it.
    credential: dict[str, Any] = {"client_auth": client_auth}
    client: dict[str, Any] = {"auth_method": client_auth}
    if client_auth == "private_key_jwt":
        private, public = generate_rsa_key()
        (tmp_path / "exchange-key.pem").write_text(private)
        credential |= {
            "client_secret": None,
            "private_key": {"file": str(tmp_path / "exchange-key.pem")},
            "private_key_id": "gw-x1",
        }
        client["jwks"] = {
            "keys": [RSAKey.import_key(public).as_dict(private=False) | {"kid": "gw-x1"}]
        }
    dev = DevIssuer()
    async with make_stack.of(exchange_stack, dev=dev, credential=credential, client=client) as (
        stack,
        upstream,
    ):
        _ok(*(await stack.call(stack.token(sub="erin")))[::2])
        (seen,) = upstream.calls_seen()
        assert seen.introspection["sub"] == "erin"
        assert seen.introspection["client_id"] == EXCHANGE_CLIENT
        assert dev.exchange_faults.calls == 1
        # The same client registered with another method is refused: the gateway's own client
        # is the problem, so the caller gets the 503 row, never a fallback.
        other = "client_secret_basic" if client_auth == "private_key_jwt" else "private_key_jwt"
        dev.register_client(
            EXCHANGE_CLIENT,
            EXCHANGE_SECRET,
            auth_method=other,
            jwks=client.get("jwks") or {"keys": []},
            grant_types=("client_credentials", TOKEN_EXCHANGE_GRANT),
        )
        status, headers, text = await stack.call(stack.token(sub="frank"))
        assert (status, headers["Retry-After"]) == (503, "5"), text
        assert json.loads(text)["error"] == "exchange_unavailable"
        assert len(upstream.calls_seen()) == 1


async def test_fifty_concurrent_calls_by_one_caller_make_one_exchange(
    make_stack: MakeStack,
) -> None:
    dev = DevIssuer()
    dev.exchange_faults.delay_s = 0.3  # every caller arrives while the exchange is in flight
    async with make_stack.of(
        exchange_stack,
        dev=dev,
        gateway={"limits": {"max_in_flight_per_principal": 64, "principal_rate": None}},
    ) as (stack, upstream):
        token = stack.token(sub="erin")
        answers = await asyncio.gather(
            *(stack.call(token, "echo", {"text": str(i)}) for i in range(50))
        )
        for status, _, text in answers:
            _ok(status, text)
        assert dev.exchange_faults.calls == 1
        calls = upstream.calls_seen()
        assert len(calls) == 50 and len({c.token for c in calls}) == 1
        assert await metric(stack, "token_exchanges_total", backend="default", result="ok") == 1


async def test_the_exchanged_token_is_never_used_past_the_callers_expiry(
    make_stack: MakeStack,
) -> None:
    dev = DevIssuer()
    # An issuer that does not bound the exchanged token by the subject token: the gateway must.
    dev.exchange_faults.ttl_s = 3600
    async with make_stack.of(exchange_stack, dev=dev) as (stack, upstream):
        # 3 s, not 1: a 1 s token could lapse before the first exchange on a loaded machine.
        token = stack.token(sub="erin", ttl_s=3)
        _ok(*(await stack.call(token))[::2])
        assert dev.exchange_faults.calls == 1
        await asyncio.sleep(max(0.0, dev.store.tokens[token].expires_at - time.time()) + 0.2)
        # Expired, but within issuer.clock_skew_s the gateway still admits the caller: the cached
        # exchanged token is not used, a new exchange is asked for, and the issuer refuses it.
        status, _, text = await stack.call(token)
        assert status == 403, text
        assert json.loads(text)["error"]["data"] == {"reason": "invalid_grant"}
        assert dev.exchange_faults.calls == 2
        assert len(upstream.calls_seen()) == 1


async def test_a_gateway_revocation_drops_the_exchanged_token_at_once(
    make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EXCHANGE_ADMIN", ADMIN)
    async with make_stack.of(
        exchange_stack,
        gateway={"admin": {"token": {"env": "EXCHANGE_ADMIN"}}},
    ) as (stack, upstream):
        token = stack.token(sub="erin")
        _ok(*(await stack.call(token))[::2])
        assert await metric(stack, "exchanged_tokens", backend="default") == 1
        await _revoke(stack, token)
        assert await metric(stack, "exchanged_tokens", backend="default") == 0
        assert (await stack.call(token))[0] == 401
        assert len(upstream.calls_seen()) == 1


@pytest.mark.parametrize("tokens", ["introspection", "jwt"])
async def test_an_issuer_revocation_stops_the_exchanged_token_within_the_cache_lifetime(
    make_stack: MakeStack, tokens: str
) -> None:
    issuer: dict[str, Any] = {"cache": {"max_ttl_s": 1}}
    if tokens == "jwt":  # validated locally: the issuer is asked again only by the exchange
        issuer |= {"tokens": "jwt", "client_id": None, "client_secret": None}
    dev = DevIssuer(token_format="jwt" if tokens == "jwt" else "opaque")
    async with make_stack.of(exchange_stack, dev=dev, gateway={"issuer": issuer}) as (
        stack,
        upstream,
    ):
        token = stack.token(sub="erin")
        _ok(*(await stack.call(token))[::2])
        exchanged = upstream.calls_seen()[0].token
        dev.revoke(token)  # RFC 7009 at the issuer: its exchanged token goes too
        assert dev.store.tokens[exchanged].revoked
        # The documented bound: issuer.cache.max_ttl_s. Until then the caller's token is still
        # cached as valid; the backend refuses the revoked exchanged token (401), the gateway
        # exchanges once more and the issuer refuses (403); never a fallback. After it, the
        # caller's token is introspected again (401), or (JWT) re-exchanged and refused (403).
        final = 401 if tokens == "introspection" else 403
        loop = asyncio.get_running_loop()
        past_bound = loop.time() + 1.0  # max_ttl_s
        give_up = past_bound + 1.5
        statuses = []
        while True:
            status, _, text = await stack.call(token)
            statuses.append(status)
            if status == final and loop.time() > past_bound:
                break
            assert loop.time() < give_up, statuses
            await asyncio.sleep(0.1)
        assert set(statuses) <= {401, 403}, statuses
        if final == 403:
            assert json.loads(text)["error"]["data"] == {"reason": "invalid_grant"}
        # The caller's cache entry was dropped, and the exchanged token with it.
        assert await metric(stack, "exchanged_tokens", backend="default") == 0
        # Nothing the backend accepted after the revocation.
        accepted = [s for s in upstream.calls_seen() if s.introspection.get("active")]
        assert len(accepted) == 1


async def test_several_issuers_each_callers_token_goes_only_to_its_own_issuer(
    make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with other_issuer(monkeypatch) as other:
        other.register_client(
            EXCHANGE_CLIENT,
            EXCHANGE_SECRET,
            grant_types=("client_credentials", "urn:ietf:params:oauth:grant-type:token-exchange"),
        )
        other.exchange_policy.allow(EXCHANGE_CLIENT, BACKEND_RESOURCE)
        first, second = issuer_entries(other)
        other.register_client(*INTROSPECTOR, can_introspect=True)
        upstream = IntrospectingUpstream(issuer_urls=[other.url])
        async with make_stack.of(
            exchange_stack,
            upstream=upstream,
            gateway={"issuer": None, "issuers": [first, second]},
        ) as (stack, _):
            home = stack.token(sub="erin")
            away = other.mint_token(
                sub="zoe", scopes="mcp:access tools:echo", audience=stack.config.resource
            )
            _ok(*(await stack.call(home))[::2])
            _ok(*(await stack.call(away))[::2])
            assert stack.issuer.exchange_faults.calls == 1
            assert other.exchange_faults.calls == 1
            subs = [s.introspection["sub"] for s in upstream.calls_seen()]
            assert subs == ["erin", "zoe"]
            # zoe's token was exchanged at her issuer: the first issuer never saw it.
            assert away not in stack.issuer.store.tokens


async def test_credential_issuer_refuses_callers_of_other_issuers(
    make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with other_issuer(monkeypatch) as other:
        first, second = issuer_entries(other)
        async with make_stack.of(
            exchange_stack,
            credential={"issuer": "{issuer_url}"},
            gateway={"issuer": None, "issuers": [first, second]},
        ) as (stack, upstream):
            away = other.mint_token(
                sub="zoe", scopes="mcp:access tools:echo", audience=stack.config.resource
            )
            status, _, text = await stack.call(away)
            assert status == 403, text
            assert json.loads(text)["error"]["data"] == {"reason": "issuer_not_accepted"}
            assert other.exchange_faults.calls == 0 and stack.issuer.exchange_faults.calls == 0
            assert upstream.calls_seen() == []
