"""The token-exchange rows: ``exchange_refused`` (403) and ``exchange_unavailable`` (503), through
HTTP, with the development issuer refusing or failing for real. Neither ever falls back to the
service credential or the caller's token: the upstream receives no ``tools/call`` at all."""

from __future__ import annotations

import json

import aiohttp
import pytest
from aiohttp import web

from gateway.config import TOKEN_EXCHANGE_GRANT
from gateway.dev.dev_issuer import DevIssuer
from tests.support.batches import assert_only_the_second_refused, two_tool_calls
from tests.support.exchange_stack import (
    BACKEND_RESOURCE,
    EXCHANGE_CLIENT,
    EXCHANGE_SECRET,
    INTROSPECTOR,
    IntrospectingUpstream,
    exchange_credential,
    exchange_stack,
)
from tests.support.jwt_stack import metric
from tests.support.live_stack import MakeStack, ServerFactory
from tests.support.upstreams import ModernUpstream

REFUSED = "The authorization server refused this caller access to the tool's backend"


def _assert_refused(status: int, headers: dict[str, str], text: str, reason: str) -> None:
    assert status == 403, text
    assert headers["Cache-Control"] == "no-store"
    assert "WWW-Authenticate" not in headers  # more scopes at this issuer would not help
    body = json.loads(text)
    assert body["error"] == {"code": -31403, "message": REFUSED, "data": {"reason": reason}}


def _assert_unavailable(status: int, headers: dict[str, str], text: str) -> None:
    assert status == 503, text
    assert headers["Retry-After"] == "5"
    assert headers["Cache-Control"] == "no-store"
    assert "WWW-Authenticate" not in headers
    assert json.loads(text) == {
        "error": "exchange_unavailable",
        "error_description": (
            "Authorization server unavailable for this tool's backend, retry later"
        ),
    }


@pytest.mark.row("exchange_refused")
@pytest.mark.parametrize(
    "code",
    ["invalid_grant", "unauthorized_client", "invalid_target", "access_denied", "invalid_scope"],
)
async def test_each_issuer_refusal_is_a_403_naming_the_reason(
    make_stack: MakeStack, code: str
) -> None:
    dev = DevIssuer()
    async with make_stack.of(exchange_stack, dev=dev) as (stack, upstream):
        dev.exchange_faults.error = code
        token = stack.token()
        _assert_refused(*(await stack.call(token)), code)
        assert upstream.calls_seen() == []
        # A legacy client gets the same HTTP-level answer (id of its request).
        status, headers, text = await stack.legacy_call(token)
        _assert_refused(status, headers, text, code)
        assert json.loads(text)["id"] == 5
        assert upstream.calls_seen() == []
        assert (
            await metric(stack, "token_exchanges_total", backend="default", result="refused") == 2
        )
        assert await metric(stack, "rejections_total", row="exchange_refused") == 2
        outcome = {"backend": "default", "outcome": "exchange_failed", "tool": "echo"}
        assert await metric(stack, "backend_requests_total", **outcome) == 2


@pytest.mark.row("exchange_refused")
async def test_the_issuers_own_policy_refusals_reach_the_caller(make_stack: MakeStack) -> None:
    # The issuer does not let the gateway exchange for this backend: invalid_target.
    async with make_stack.of(exchange_stack, allow=("https://elsewhere.test/mcp",)) as (
        stack,
        upstream,
    ):
        _assert_refused(*(await stack.call(stack.token())), "invalid_target")
        assert upstream.calls_seen() == []
    # The caller's token was revoked at the issuer while the gateway still has it cached: the
    # backend refuses the exchanged token (revoked with it, 401), the gateway exchanges once
    # more, and the issuer refuses: invalid_grant.
    async with make_stack.of(exchange_stack) as (stack, upstream):
        token = stack.token()
        status, _, text = await stack.call(token)
        assert status == 200, text
        stack.issuer.revoke(token)
        _assert_refused(*(await stack.call(token)), "invalid_grant")
        assert stack.issuer.exchange_faults.calls == 2
        assert [s.introspection["active"] for s in upstream.calls_seen()] == [True, False]


@pytest.mark.row("exchange_unavailable")
@pytest.mark.parametrize(
    "fault",
    [
        "status_503",
        "status_500",
        "garbage",
        "slow",
        "no_token_type",
        "echo",
        "not_bearer",
        "duplicate_member",
        "nan",
        "byte_order_mark",
        "text_plain",
    ],
)
async def test_an_issuer_that_fails_is_a_503_with_retry_after(
    make_stack: MakeStack, fault: str
) -> None:
    dev = DevIssuer()
    async with make_stack.of(exchange_stack, dev=dev, gateway={"issuer": {"timeout_s": 0.5}}) as (
        stack,
        upstream,
    ):
        faults = dev.exchange_faults
        if fault.startswith("status_"):
            faults.status = int(fault[7:])
        elif fault == "garbage":
            faults.body = b"<html>not json</html>"
        token = stack.token()
        issued = {"issued_token_type": "urn:ietf:params:oauth:token-type:access_token"}
        if fault == "no_token_type":
            faults.body = json.dumps({"access_token": "abc", "token_type": "Bearer"}).encode()
        elif fault == "echo":  # an issuer handing back the subject token: never forwarded
            answer = {"access_token": token, "token_type": "Bearer", **issued}
            faults.body = json.dumps(answer).encode()
        elif fault == "not_bearer":
            answer = {"access_token": "abc", "token_type": "N_A", **issued}
            faults.body = json.dumps(answer).encode()
        elif fault == "slow":
            faults.delay_s = 2.0
        elif fault in _LENIENT:
            # Each of these was a usable token to a lenient reader (the last member wins, NaN
            # and a BOM are accepted, the content type was not looked at); strictly, none is.
            faults.body = _LENIENT[fault]
            if fault == "text_plain":
                faults.content_type = "text/plain"
        _assert_unavailable(*(await stack.call(token)))
        assert upstream.calls_seen() == []
        assert (
            await metric(stack, "token_exchanges_total", backend="default", result="unavailable")
            == 1
        )


_ISSUED = b'"issued_token_type": "urn:ietf:params:oauth:token-type:access_token"'
_LENIENT = {
    "duplicate_member": b'{"access_token": "abc", "token_type": "N_A", "token_type": "Bearer", '
    + _ISSUED
    + b"}",
    "nan": b'{"access_token": "abc", "token_type": "Bearer", "expires_in": NaN, ' + _ISSUED + b"}",
    "byte_order_mark": b'\xef\xbb\xbf{"access_token": "abc", "token_type": "Bearer", '
    + _ISSUED
    + b"}",
    "text_plain": b'{"access_token": "abc", "token_type": "Bearer", ' + _ISSUED + b"}",
}


@pytest.mark.row("exchange_unavailable")
async def test_a_token_endpoint_that_went_away_is_a_503(
    aiohttp_server: ServerFactory, make_stack: MakeStack
) -> None:
    # The token endpoint sits behind a relay the test shuts down once the gateway is ready (the
    # catalog's own token is cached by then): the exchange meets a refused connection.
    dev = DevIssuer()
    await dev.start()
    relay = await aiohttp_server(_relay(dev.url + "/token"))
    async with make_stack.of(
        exchange_stack,
        dev=dev,
        credential={"token_endpoint": str(relay.make_url("/token"))},
    ) as (stack, upstream):
        await relay.close()
        _assert_unavailable(*(await stack.call(stack.token())))
        assert upstream.calls_seen() == []


def _relay(target: str) -> web.Application:
    async def forward(request: web.Request) -> web.Response:
        headers = {k: v for k, v in request.headers.items() if k.lower() in _FORWARDED}
        async with (
            aiohttp.ClientSession() as session,
            session.post(target, data=await request.read(), headers=headers) as response,
        ):
            return web.Response(
                status=response.status,
                body=await response.read(),
                content_type="application/json",
            )

    app = web.Application()
    app.router.add_post("/token", forward)
    return app


_FORWARDED = frozenset({"authorization", "content-type", "accept"})


@pytest.mark.row("exchange_unavailable")
async def test_the_gateways_own_client_refused_is_a_503_not_the_callers_fault(
    make_stack: MakeStack,
) -> None:
    dev = DevIssuer()
    dev.exchange_policy.require_actor = True  # the credential sends none: invalid_request
    async with make_stack.of(exchange_stack, dev=dev) as (stack, upstream):
        _assert_unavailable(*(await stack.call(stack.token())))
        assert upstream.calls_seen() == []


async def test_a_failed_exchange_is_not_cached_the_next_call_exchanges_again(
    make_stack: MakeStack,
) -> None:
    dev = DevIssuer()
    async with make_stack.of(exchange_stack, dev=dev) as (stack, upstream):
        dev.exchange_faults.status = 503
        token = stack.token()
        assert (await stack.call(token))[0] == 503
        dev.exchange_faults.status = None
        status, _, text = await stack.call(token)
        assert status == 200, text
        assert dev.exchange_faults.calls == 2
        assert len(upstream.calls_seen()) == 1


@pytest.mark.row("exchange_refused")
async def test_in_a_2025_03_26_batch_the_refused_member_gets_the_error_the_others_their_results(
    aiohttp_server: ServerFactory, make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    dev = DevIssuer()
    await dev.start()
    dev.register_client(
        EXCHANGE_CLIENT, EXCHANGE_SECRET, grant_types=("client_credentials", TOKEN_EXCHANGE_GRANT)
    )
    dev.register_client(*INTROSPECTOR, can_introspect=True)
    dev.exchange_policy.allow(EXCHANGE_CLIENT, BACKEND_RESOURCE)
    monkeypatch.setenv("EXCHANGE_SECRET", EXCHANGE_SECRET)
    plain, exchanging = ModernUpstream(), IntrospectingUpstream(issuer_urls=[dev.url])
    plain_url = str((await aiohttp_server(plain.app())).make_url("/mcp"))
    exchanging_url = str((await aiohttp_server(exchanging.app())).make_url("/mcp"))
    backends = {
        "plain": {
            "url": plain_url,
            "allow_insecure_http": True,
            "prefix": "",
            "credential": {"type": "bearer", "token": {"env": "LIVE_STACK_SERVICE"}},
        },
        "ex": {
            "url": exchanging_url,
            "allow_insecure_http": True,
            "credential": exchange_credential(),
        },
    }
    policy = (
        "version: 1\nbaseline_scopes: [mcp:access]\ntools:\n  '*echo': {scopes: [mcp:access]}\n"
    )
    try:
        async with make_stack(issuer=dev, backends=backends, policy=policy) as stack:
            dev.exchange_faults.error = "access_denied"
            status, _, text = await stack.post(stack.token(), two_tool_calls("echo", "ex__echo"))
            assert_only_the_second_refused(status, text, message=REFUSED, reason="access_denied")
            assert len(plain.calls("tools/call")) == 1
            assert exchanging.calls_seen() == []
    finally:
        await dev.stop()
