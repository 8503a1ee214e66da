"""JWK Set outages, several issuers at once and ``tokens: jwt+introspection``, through HTTP.

The production gateway with development issuers speaking real HTTP: the JWK Set down at
startup (not ready, 503), down or broken later (the cached keys keep working), garbage (503,
never a 500); one JWT-only and one introspecting issuer side by side, each refusing the other's
audience and never seeing the other's tokens; two introspecting issuers asked in order, each
answer cached; revocation at the issuer honoured in ``jwt+introspection`` mode.
"""

from __future__ import annotations

import asyncio
import json
import time

import aiohttp
import pytest

from gateway.app import GatewayServer
from gateway.dev.dev_issuer import DevIssuer
from tests.support.jwt_forge import access_claims, tamper
from tests.support.jwt_stack import (
    assert_invalid_token,
    jwt_stack,
    metric,
    parse_challenge,
    readyz,
    started_gateway,
)
from tests.support.live_stack import (
    LiveStack,
    MakeStack,
    issuer_entries,
    modern_meta,
    other_issuer,
)

GARBAGE = [
    b"<html>502 Bad Gateway</html>",
    b'{"keys": "none"}',
    b'{"keys": [{"kty": "oct", "k": "c2VjcmV0LXNoYXJlZC13aXRoLWV2ZXJ5b25l", "kid": "hmac"}]}',
]


async def echo_at(
    server: GatewayServer, session: aiohttp.ClientSession, token: str
) -> tuple[int, dict[str, str], str]:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "hi"}, "_meta": modern_meta()},
    }
    headers = {
        "Authorization": f"Bearer {token}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": "echo",
    }
    async with session.post(server.mcp_url, data=json.dumps(body), headers=headers) as response:
        return response.status, dict(response.headers), await response.text()


async def echo(stack: LiveStack, token: str) -> tuple[int, dict[str, str], str]:
    return await stack.call(token, "echo", {"text": "hi"})


def assert_issuer_unavailable(status: int, headers: dict[str, str], text: str) -> None:
    assert status == 503, text
    assert int(headers["Retry-After"]) > 0
    params = parse_challenge(headers["WWW-Authenticate"])
    assert "error" not in params and params["resource_metadata"].endswith(
        "/.well-known/oauth-protected-resource/mcp"
    )
    assert json.loads(text) == {
        "error": "issuer_unavailable",
        "error_description": "Authorization server unavailable, retry later",
    }


async def wait_until_ready(server: GatewayServer, session: aiohttp.ClientSession) -> None:
    deadline = time.monotonic() + 15
    while (await readyz(server, session))[0] != 200:
        assert time.monotonic() < deadline, await readyz(server, session)
        await asyncio.sleep(0.1)


@pytest.mark.row("issuer_unavailable")
@pytest.mark.parametrize("fault", ["status 503", *(f"garbage {i}" for i in range(len(GARBAGE)))])
async def test_no_usable_jwks_at_startup_is_not_ready_and_503_until_it_returns(
    make_stack: MakeStack, fault: str
) -> None:
    async with make_stack.of(jwt_stack) as stack:
        dev = stack.issuer
        if fault == "status 503":
            dev.jwks.status = 503
        else:
            dev.jwks.body = GARBAGE[int(fault.split()[1])]
        # A second replica of the same configuration starts while the key set is unusable.
        async with started_gateway(stack.config_path) as (server, session):
            await asyncio.sleep(0.3)
            status, body = await readyz(server, session)
            assert status == 503
            assert body["checks"]["issuer"] is False
            (issuer,) = body["issuers"]
            assert (issuer["url"], issuer["tokens"], issuer["ready"]) == (dev.url, "jwt", False)
            assert issuer["keys"] == 0 and issuer["reason"].startswith("jwks ")
            token = stack.token()
            assert_issuer_unavailable(*await echo_at(server, session, token))
            # The key set comes back: the replica becomes ready without a restart.
            dev.jwks.status, dev.jwks.body = None, None
            await wait_until_ready(server, session)
            assert (await echo_at(server, session, token))[0] == 200


@pytest.mark.parametrize("fault", ["status 503", *(f"garbage {i}" for i in range(len(GARBAGE)))])
async def test_a_jwks_outage_later_keeps_the_cached_keys_working(
    make_stack: MakeStack, fault: str
) -> None:
    async with make_stack.of(jwt_stack, issuer={"jwks_unknown_kid_interval_s": 1}) as stack:
        dev = stack.issuer
        assert (await echo(stack, stack.token(sub="early")))[0] == 200
        if fault == "status 503":
            dev.jwks.status = 503
        else:
            dev.jwks.body = GARBAGE[int(fault.split()[1])]
        before = dev.jwks.calls
        # An unknown kid makes the gateway fetch the set; the fetch fails, the keys stay.
        unknown = dev.sign_jwt(
            access_claims(dev.url, stack.config.resource), header={"kid": "rotated-in-later"}
        )
        assert_invalid_token(stack, *await echo(stack, unknown))
        assert dev.jwks.calls == before + 1
        assert await metric(stack, "jwks_fetch_total", result="failure") == 1
        fresh = stack.token(sub="during-the-outage")  # never seen: verified with the cached key
        status, _, text = await echo(stack, fresh)
        assert status == 200, text
        assert (await readyz(stack.server, stack.session))[0] == 200


async def test_two_issuers_one_jwt_one_introspection_each_refusing_the_others_audience(
    make_stack: MakeStack,
) -> None:
    entra_like = DevIssuer(token_format="jwt", introspection=False)
    await entra_like.start()
    try:
        async with (
            make_stack(  # the stack's own issuer (opaque tokens, introspection) is the second
                gateway={
                    "issuer": None,
                    "issuers": [
                        {
                            "url": entra_like.url,
                            "tokens": "jwt",
                            "allow_insecure_http": True,
                            "audiences": ["api://jwt-audience"],
                        },
                        {
                            "url": "{issuer_url}",
                            "client_id": "mcp-gateway",
                            "client_secret": {"env": "LIVE_STACK_GW_SECRET"},
                            "allow_insecure_http": True,
                            "audiences": ["api://introspection-audience"],
                        },
                    ],
                },
            ) as stack
        ):
            await _two_issuers(stack, entra_like)
    finally:
        await entra_like.stop()


async def _two_issuers(stack: LiveStack, jwt_issuer: DevIssuer) -> None:
    opaque_issuer = stack.issuer
    resource = stack.config.resource
    assert [i.url for i in stack.config.issuers] == [jwt_issuer.url, opaque_issuer.url]

    def jwt(aud: str) -> str:
        return jwt_issuer.mint_token(sub="jay", scopes="mcp:access tools:echo", audience=aud)

    def opaque(aud: str) -> str:
        return opaque_issuer.mint_token(sub="otto", scopes="mcp:access tools:echo", audience=aud)

    # Each issuer's tokens are accepted, with the resource or the issuer's own extra audience.
    for token in (jwt(resource), jwt("api://jwt-audience")):
        assert (await echo(stack, token))[0] == 200
    assert opaque_issuer.introspection_calls == 0  # a JWT never goes to the other issuer
    for token in (opaque(resource), opaque("api://introspection-audience")):
        assert (await echo(stack, token))[0] == 200
    assert opaque_issuer.introspection_calls == 2
    # ...and each one's token is refused with the other's audience.
    assert_invalid_token(stack, *await echo(stack, jwt("api://introspection-audience")))
    assert opaque_issuer.introspection_calls == 2
    assert_invalid_token(stack, *await echo(stack, opaque("api://jwt-audience")))
    assert opaque_issuer.introspection_calls == 3
    assert await metric(stack, "authentications_total", auth_method="jwt") == 2
    assert await metric(stack, "authentications_total", auth_method="introspection") == 2
    # Protected-resource metadata names both authorization servers (RFC 9728 §2).
    async with stack.session.get(
        stack.config.prm_url.replace(
            stack.config.public_origin, stack.server.mcp_url.rsplit("/mcp", 1)[0]
        )
    ) as response:
        document = await response.json()
    assert document["authorization_servers"] == [jwt_issuer.url, opaque_issuer.url]
    # Both are reported, and ready.
    status, body = await readyz(stack.server, stack.session)
    assert status == 200
    assert [(i["tokens"], i["ready"]) for i in body["issuers"]] == [
        ("jwt", True),
        ("introspection", True),
    ]


async def test_several_introspecting_issuers_are_asked_in_order_and_each_answer_is_cached(
    make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An opaque token names no issuer: it is introspected at each introspecting issuer in order
    # until one accepts; the accepted result is cached, and a refusal by an earlier issuer of a
    # token a later one accepts is not charged to the failed-auth budget.
    async with other_issuer(monkeypatch) as other:
        # No probes (interval 0): past the budget it is 429 until the minute ends.
        common = {"failed_auth_rate": "1/minute", "failed_auth_probe_interval_s": 0}
        first, second = issuer_entries(other)
        async with make_stack(
            gateway={"issuer": None, "issuers": [{**first, **common}, {**second, **common}]},
        ) as stack:
            home = stack.token(sub="erin")
            away = other.mint_token(
                sub="zoe", scopes="mcp:access tools:echo", audience=stack.config.resource
            )

            def calls() -> tuple[int, int]:
                return stack.issuer.introspection_calls, other.introspection_calls

            assert (await echo(stack, home))[0] == 200
            assert calls() == (1, 0)  # the first issuer accepted it: the second never saw it
            assert (await echo(stack, away))[0] == 200
            assert calls() == (2, 1)  # refused by the first, accepted by the second
            for _ in range(3):
                assert (await echo(stack, home))[0] == 200
                assert (await echo(stack, away))[0] == 200
            assert calls() == (2, 1)  # both answers cached
            # The first issuer's refusal of zoe's token was not charged (1/minute): two unknown
            # tokens still reach both issuers and get their 401; only then is the budget spent.
            for n in range(2):
                assert_invalid_token(stack, *await echo(stack, f"unknown-token-{n}"))
            assert calls() == (4, 3)
            status, headers, _ = await echo(stack, "unknown-token-2")
            assert status == 429
            assert int(headers["Retry-After"]) > 0
            assert calls() == (4, 3)


async def test_jwt_plus_introspection_honours_a_revocation_at_the_issuer(
    make_stack: MakeStack,
) -> None:
    dev = DevIssuer(token_format="jwt")  # JWT access tokens, and it introspects them too
    async with make_stack(
        issuer=dev,
        gateway={"issuer": {"tokens": "jwt+introspection", "cache": {"max_ttl_s": 1}}},
    ) as stack:
        token = stack.token()
        for _ in range(3):
            assert (await echo(stack, token))[0] == 200
        assert dev.introspection_calls == 1  # then cached, like any introspected token
        assert await metric(stack, "authentications_total", auth_method="jwt+introspection") == 3
        # A forged token is refused locally: it never reaches the introspection endpoint.
        assert_invalid_token(stack, *await echo(stack, tamper(stack.token(sub="forged"))))
        assert dev.introspection_calls == 1
        # Revoked at the issuer: refused once the cache entry (max_ttl_s: 1) is gone.
        assert dev.revoke(token)
        await asyncio.sleep(1.1)
        assert_invalid_token(stack, *await echo(stack, token))
        assert dev.introspection_calls == 2
