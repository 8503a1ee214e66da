"""The external decision point (``policy_external``, OpenID AuthZEN 1.0) through the whole stack.

The dev issuer's tokens (introspected), the real gateway, a real upstream and a small real
AuthZEN server (:mod:`tests.support.authzen_pdp`) on loopback that records every evaluation
request. The decision point is asked only after the local policy allowed (it narrows, never
widens); its refusal is 403 ``external_policy_denied`` without a challenge; a slow, failing or
garbled one is 503 ``policy_unavailable`` with ``Retry-After`` (or, under ``on_error:
allow_local``, the local allow stands); decisions are cached by the request's facts; the
gateway's own credential is sent, the caller's token never.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.support.authzen_pdp import AuthZenPdp, authzen_pdp
from tests.support.batches import assert_only_the_second_refused, two_tool_calls
from tests.support.jwt_stack import metric
from tests.support.live_stack import (
    LiveStack,
    ServerFactory,
    audit_events,
    live_stack,
    peer_section,
)
from tests.support.otlp_receiver import OtlpReceiver
from tests.support.upstreams import ModernUpstream, echo_tool

POLICY = """\
version: 1
baseline_scopes: [mcp:access]
tools:
  echo: {scopes: [tools:echo]}
  danger: {scopes: [tools:echo]}
  admin_echo: {scopes: [admin]}
prompts:
  "*": {scopes: []}
resources:
  "file:///**": {scopes: []}
"""
PDP_SECRET = "pdp-service-credential-0451"
DENIED = "Denied by the organisation's policy decision point"
UNAVAILABLE = {
    "error": "policy_unavailable",
    "error_description": "Policy decision point unavailable, retry later",
}
URI = "file:///docs/a.txt"


def _upstream() -> ModernUpstream:
    text = {"type": "text", "text": "hi"}
    return ModernUpstream(
        tools=[echo_tool("echo"), echo_tool("danger"), echo_tool("admin_echo")],
        answers={
            "prompts/list": {
                "prompts": [{"name": "greet", "arguments": [{"name": "who"}]}, {"name": "plan"}]
            },
            "prompts/get": {"messages": [{"role": "user", "content": text}]},
            "resources/list": {"resources": [{"uri": URI, "name": "a"}]},
            "resources/templates/list": {"resourceTemplates": []},
            "resources/read": {"contents": [{"uri": URI, "text": "doc"}]},
        },
    )


def _refuse(*ids: str) -> Any:
    return lambda body: body["resource"]["id"] not in ids


@asynccontextmanager
async def _stack(
    tmp_path: Path,
    aiohttp_server: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
    pdp: AuthZenPdp,
    gateway_extra: dict[str, Any] | None = None,
    **section: Any,
) -> AsyncIterator[tuple[LiveStack, ModernUpstream]]:
    upstream = _upstream()
    gateway = {
        "policy_external": peer_section(monkeypatch, pdp.url, "PDP_TOKEN", PDP_SECRET, **section),
        "audit": {"sink": "file", "path": str(tmp_path / "audit.jsonl")},
        **(gateway_extra or {}),
    }
    async with live_stack(
        tmp_path, aiohttp_server, monkeypatch, upstream=upstream, policy=POLICY, gateway=gateway
    ) as stack:
        yield stack, upstream


def _assert_denied(status: int, headers: dict[str, str], text: str) -> dict[str, Any]:
    assert status == 403, text
    assert headers["Cache-Control"] == "no-store"
    assert "WWW-Authenticate" not in headers  # more scopes would not change the PDP's answer
    body = json.loads(text)
    reason = {"reason": "external_policy"}
    assert body["error"] == {"code": -31403, "message": DENIED, "data": reason}
    assert "secret policy detail" not in text  # the PDP's context is never relayed
    return body  # type: ignore[no-any-return]


def _assert_unavailable(status: int, headers: dict[str, str], text: str) -> None:
    assert status == 503, text
    assert headers["Retry-After"] == "5"
    assert headers["Cache-Control"] == "no-store"
    assert "WWW-Authenticate" not in headers
    assert json.loads(text) == UNAVAILABLE


async def _legacy(stack: LiveStack, token: str, method: str, params: dict[str, Any]) -> Any:
    body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}
    return await stack.post(token, body, {"MCP-Protocol-Version": "2025-06-18"})


@pytest.mark.row("external_policy_denied")
async def test_the_decision_point_narrows_what_the_local_policy_allows_in_both_eras(
    tmp_path: Path, aiohttp_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with (
        authzen_pdp(aiohttp_server, AuthZenPdp(rule=_refuse("danger"))) as pdp,
        _stack(tmp_path, aiohttp_server, monkeypatch, pdp) as (stack, upstream),
    ):
        token = stack.token()
        status, _, text = await stack.call(token, "echo", {"text": "hi"})
        assert status == 200 and '"isError":false' in text.replace(" ", ""), text
        _assert_denied(*(await stack.call(token, "danger", {"text": "hi"})))
        # A 2025 client (initialize first) gets the same HTTP-level answer, with its id; the
        # question is the same, so the cached decision answers it.
        status, headers, text = await stack.legacy_call(token, "danger", {"text": "hi"})
        assert _assert_denied(status, headers, text)["id"] == 5
        called = [r.json["params"]["name"] for r in upstream.calls("tools/call")]
        assert called == ["echo"]  # the refused calls never went upstream
        assert len(pdp.seen) == 2
        assert await metric(stack, "policy_external_decisions_total", outcome="allow") == 1
        assert await metric(stack, "policy_external_decisions_total", outcome="deny") == 1
        assert await metric(stack, "policy_external_decisions_total", outcome="cache_hit") == 1
        assert await metric(stack, "policy_external_duration_seconds_count") == 2
        assert await metric(stack, "rejections_total", row="external_policy_denied") == 2
        refused = [e for e in audit_events(stack) if e.get("tool") == "danger"]
        assert [(e["decision"], e["error_row"], e["pdp"]) for e in refused] == [
            ("deny", "external_policy_denied", {"decision": "deny", "cached": False}),
            ("deny", "external_policy_denied", {"decision": "deny", "cached": True}),
        ]
        allowed = [e for e in audit_events(stack) if e.get("tool") == "echo"]
        assert allowed[0]["pdp"] == {"decision": "allow", "cached": False}


async def test_it_never_widens_a_local_refusal_is_answered_without_asking(
    tmp_path: Path, aiohttp_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A PDP that would allow everything: the local policy's refusals stand, unasked.
    async with (
        authzen_pdp(aiohttp_server) as pdp,
        _stack(tmp_path, aiohttp_server, monkeypatch, pdp) as (stack, upstream),
    ):
        token = stack.token()
        status, headers, _ = await stack.call(token, "admin_echo")  # needs the admin scope
        assert status == 403 and 'error="insufficient_scope"' in headers["WWW-Authenticate"]
        status, _, text = await stack.call(stack.token("mcp:access"), "echo")  # no tools:echo
        assert status == 403, text
        status, _, text = await stack.call(token, "not_in_the_policy")
        assert status == 400 and json.loads(text)["error"]["code"] == -32602
        status, _, text = await stack.modern(
            token, "resources/read", {"uri": "secret://x"}, name="secret://x"
        )
        assert status == 400, text  # no rule: hidden, never asked
        assert pdp.seen == []
        assert upstream.calls("tools/call") == []


@pytest.mark.parametrize("credential", ["bearer", "basic"])
async def test_the_question_carries_facts_and_the_gateways_credential_never_the_token(
    tmp_path: Path,
    aiohttp_server: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    credential: str,
) -> None:
    section: dict[str, Any] = {
        "subject_properties": {
            "cerbos.roles": "roles",
            "tenant": "tid",
            "department": "org.department",
            "absent": "no_such_claim",
        },
    }
    if credential == "basic":
        section["credential"] = {
            "type": "basic",
            "username": "gateway",
            "password": {"env": "PDP_TOKEN"},
        }
        expected = "Basic " + base64.b64encode(f"gateway:{PDP_SECRET}".encode()).decode()
    else:
        expected = f"Bearer {PDP_SECRET}"
    async with (
        authzen_pdp(aiohttp_server, AuthZenPdp(credential=expected)) as pdp,
        _stack(tmp_path, aiohttp_server, monkeypatch, pdp, **section) as (stack, _),
    ):
        now = int(time.time())
        token = stack.issuer.mint_signed(
            {
                "iss": stack.issuer.url,
                "sub": "sam",
                "aud": stack.config.resource,
                "iat": now,
                "exp": now + 300,
                "client_id": "ops-console",
                "scope": "mcp:access tools:echo",
                "roles": ["sre", "oncall"],
                "tid": "t-1",
                "org": {"department": "platform"},
            },
            header={"typ": "at+jwt"},
        )
        status, _, text = await stack.call(token, "echo", {"text": "private words"})
        assert status == 200, text
        (seen,) = pdp.seen
        assert seen.headers["Authorization"] == expected
        (event,) = audit_events(stack)  # one request id in the gateway's trail and the PDP's log
        assert seen.headers["X-Request-ID"] == event["request_id"]
        assert seen.headers["Content-Type"] == "application/json"
        assert seen.body == {
            "subject": {
                "type": "user",
                "id": "sam",
                "properties": {
                    "issuer": stack.issuer.url,
                    "client_id": "ops-console",
                    "scopes": ["mcp:access", "tools:echo"],
                    "auth_method": "introspection",
                    "cerbos.roles": ["sre", "oncall"],
                    "tenant": "t-1",
                    "department": "platform",
                },
            },
            "action": {"name": "tools/call"},
            # send_arguments is off by default: the arguments stay at the gateway.
            "resource": {"type": "mcp_tool", "id": "echo", "properties": {"backend": "default"}},
            "context": {"resource_server": stack.config.resource},
        }
        # The caller's token reaches neither the PDP (body, headers), nor logs, nor metrics.
        assert token.encode() not in seen.raw
        assert all(token not in value for value in seen.headers.values())
        async with stack.session.get(stack.server.ops_url + "/metrics") as response:
            metrics_text = await response.text()
        assert token not in metrics_text and PDP_SECRET not in metrics_text
    captured = capfd.readouterr()
    for secret in (token, PDP_SECRET):
        assert secret not in captured.out and secret not in captured.err


@pytest.mark.row("policy_unavailable")
async def test_a_wrong_service_credential_is_the_gateways_fault_a_503(
    tmp_path: Path, aiohttp_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with (
        authzen_pdp(aiohttp_server, AuthZenPdp(credential="Bearer something-else")) as pdp,
        _stack(tmp_path, aiohttp_server, monkeypatch, pdp) as (stack, upstream),
    ):
        _assert_unavailable(*(await stack.call(stack.token(), "echo")))
        assert len(pdp.seen) == 1 and upstream.calls("tools/call") == []


async def test_decisions_are_cached_by_the_requests_facts(
    tmp_path: Path, aiohttp_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with (
        authzen_pdp(aiohttp_server) as pdp,
        _stack(tmp_path, aiohttp_server, monkeypatch, pdp, send_arguments=True) as (stack, _),
    ):
        token = stack.token()
        for _ in range(3):
            assert (await stack.call(token, "echo", {"text": "a"}))[0] == 200
        assert len(pdp.seen) == 1  # the same question: answered from the cache
        assert (await stack.call(token, "echo", {"text": "b"}))[0] == 200
        assert len(pdp.seen) == 2  # other arguments: another question
        assert pdp.seen[1].body["resource"]["properties"]["arguments"] == {"text": "b"}
        assert (await stack.call(stack.token(sub="other"), "echo", {"text": "b"}))[0] == 200
        assert len(pdp.seen) == 3  # another subject: another question
        assert (await stack.call(token, "danger", {"text": "b"}))[0] == 200
        assert len(pdp.seen) == 4  # another tool
        assert await metric(stack, "policy_external_decisions_total", outcome="cache_hit") == 2
    # Without send_arguments the arguments are not a fact of the question (nor sent).
    async with (
        authzen_pdp(aiohttp_server) as pdp,
        _stack(tmp_path, aiohttp_server, monkeypatch, pdp) as (stack, _),
    ):
        token = stack.token()
        for text in ("a", "b"):
            assert (await stack.call(token, "echo", {"text": text}))[0] == 200
        assert len(pdp.seen) == 1
        assert "arguments" not in pdp.seen[0].body["resource"]["properties"]
    # ttl_s: 0 turns the cache off.
    async with (
        authzen_pdp(aiohttp_server) as pdp,
        _stack(tmp_path, aiohttp_server, monkeypatch, pdp, cache={"ttl_s": 0}) as (stack, _),
    ):
        token = stack.token()
        for _ in range(2):
            assert (await stack.call(token, "echo", {"text": "a"}))[0] == 200
        assert len(pdp.seen) == 2


@pytest.mark.row("policy_unavailable")
async def test_a_slow_decision_point_is_a_503_with_retry_after_in_both_eras(
    tmp_path: Path, aiohttp_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    pdp = AuthZenPdp()
    pdp.faults.delay_s = 2.0
    async with (
        authzen_pdp(aiohttp_server, pdp),
        _stack(tmp_path, aiohttp_server, monkeypatch, pdp, timeout_s=0.3) as (stack, upstream),
    ):
        token = stack.token()
        began = time.monotonic()
        _assert_unavailable(*(await stack.call(token, "echo")))
        assert time.monotonic() - began < 1.5  # the deadline, not the PDP, ended the wait
        _assert_unavailable(*(await stack.legacy_call(token, "echo")))
        assert upstream.calls("tools/call") == []
        assert await metric(stack, "policy_external_decisions_total", outcome="error") == 2
        assert await metric(stack, "rejections_total", row="policy_unavailable") == 2
        # A failure is never cached: once the PDP answers again, so does the gateway.
        pdp.faults.delay_s = 0.0
        assert (await stack.call(token, "echo"))[0] == 200


@pytest.mark.row("policy_unavailable")
@pytest.mark.parametrize(
    "fault",
    [
        "status_500",
        "status_404",
        "html",
        "decision_not_boolean",
        "not_an_object",
        "no_decision",
        "gone",
        "duplicate_decision",
        "nan",
        "byte_order_mark",
        "text_plain",
    ],
)
async def test_a_failing_or_garbled_decision_point_is_a_503(
    tmp_path: Path,
    aiohttp_server: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    fault: str,
) -> None:
    pdp = AuthZenPdp()
    bodies = {
        "html": b"<html>oops</html>",
        "decision_not_boolean": b'{"decision": "true"}',
        "not_an_object": b"[true]",
        "no_decision": b'{"context": {}}',
        # Read leniently, each of these was an allow (the last "decision" wins, NaN and a BOM
        # are accepted by json.loads, the content type was not looked at): a strict reader
        # refuses them all, so the PDP has given no decision.
        "duplicate_decision": b'{"decision": false, "decision": true}',
        "nan": b'{"decision": true, "context": {"score": NaN}}',
        "byte_order_mark": b'\xef\xbb\xbf{"decision": true}',
        "text_plain": b'{"decision": true}',
    }
    if fault.startswith("status_"):
        pdp.faults.status = int(fault[7:])
    elif fault in bodies:
        pdp.faults.body = bodies[fault]
        if fault == "text_plain":
            pdp.faults.content_type = "text/plain; charset=utf-8"
    async with (
        authzen_pdp(aiohttp_server, pdp),
        _stack(tmp_path, aiohttp_server, monkeypatch, pdp) as (stack, upstream),
    ):
        if fault == "gone":  # nothing listens there any more: connection refused
            assert pdp.server is not None
            await pdp.server.close()
        token = stack.token()
        _assert_unavailable(*(await stack.call(token, "echo")))
        assert upstream.calls("tools/call") == []
    # The failure is logged by reason and status: no token, no credential, no PDP body.
    captured = capfd.readouterr()
    assert "policy_external_failed" in captured.out
    for secret in (token, PDP_SECRET, "oops", "pdp fault"):
        assert secret not in captured.out and secret not in captured.err


async def test_on_error_allow_local_lets_the_local_allow_stand_and_says_so(
    tmp_path: Path, aiohttp_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    pdp = AuthZenPdp(rule=_refuse("danger"))
    pdp.faults.status = 500
    async with (
        authzen_pdp(aiohttp_server, pdp),
        _stack(tmp_path, aiohttp_server, monkeypatch, pdp, on_error="allow_local") as (stack, _),
    ):
        token = stack.token()
        status, _, text = await stack.call(token, "danger")
        assert status == 200, text  # served on the local policy's allow
        event = [e for e in audit_events(stack) if e.get("tool") == "danger"][-1]
        assert event["pdp"] == {"decision": "error", "cached": False, "fallback": "allow_local"}
        assert await metric(stack, "policy_external_decisions_total", outcome="error") == 1
        # A refusal is still a refusal: allow_local is about failures only.
        pdp.faults.status = None
        _assert_denied(*(await stack.call(token, "danger")))


@pytest.mark.row("external_policy_denied")
@pytest.mark.parametrize("era", ["modern", "legacy"])
async def test_prompts_get_and_resources_read_are_narrowed_too(
    tmp_path: Path, aiohttp_server: ServerFactory, monkeypatch: pytest.MonkeyPatch, era: str
) -> None:
    pdp = AuthZenPdp(rule=_refuse("plan", "file:///secret/x.txt"))
    async with (
        authzen_pdp(aiohttp_server, pdp),
        _stack(tmp_path, aiohttp_server, monkeypatch, pdp, send_arguments=True) as (stack, up),
    ):
        token = stack.token("mcp:access")

        async def ask(method: str, params: dict[str, Any], name: str) -> Any:
            if era == "modern":
                return await stack.modern(token, method, params, name=name)
            return await _legacy(stack, token, method, params)

        status, _, text = await ask(
            "prompts/get", {"name": "greet", "arguments": {"who": "x"}}, "greet"
        )
        assert status == 200, text
        _assert_denied(*(await ask("prompts/get", {"name": "plan"}, "plan")))
        status, _, text = await ask("resources/read", {"uri": URI}, URI)
        assert status == 200, text
        # Another spelling of the refused URI: the PDP is asked about the normal form.
        spelled = "file:///docs/../secret/x.txt"
        _assert_denied(*(await ask("resources/read", {"uri": spelled}, spelled)))
        questions = [(s.body["action"]["name"], s.body["resource"]) for s in pdp.seen]
        assert questions == [
            (
                "prompts/get",
                {
                    "type": "mcp_prompt",
                    "id": "greet",
                    "properties": {"backend": "default", "arguments": {"who": "x"}},
                },
            ),
            (
                "prompts/get",
                {
                    "type": "mcp_prompt",
                    "id": "plan",
                    "properties": {"backend": "default", "arguments": {}},
                },
            ),
            (
                "resources/read",
                {"type": "mcp_resource", "id": URI, "properties": {"backend": "default"}},
            ),
            (
                "resources/read",
                {
                    "type": "mcp_resource",
                    "id": "file:///secret/x.txt",
                    "properties": {"backend": "default"},
                },
            ),
        ]
        assert [
            (r.json["params"]["name"], r.json["params"]["arguments"])
            for r in up.calls("prompts/get")
        ] == [("greet", {"who": "x"})]
        assert [r.json["params"]["uri"] for r in up.calls("resources/read")] == [URI]
        for method, rule in (("prompts/get", "*"), ("resources/read", "file:///**")):
            labels = {"method": method, "outcome": "denied", "rule": rule}
            assert await metric(stack, "surface_requests_total", **labels) == 1
        targets = [
            (e["event"], e.get("prompt", e.get("uri")), e["pdp"]["decision"])
            for e in audit_events(stack)
            if "pdp" in e
        ]
        assert targets == [
            ("prompt_get", "greet", "allow"),
            ("prompt_get", "plan", "deny"),
            ("resource_read", URI, "allow"),
            ("resource_read", "file:///secret/x.txt", "deny"),
        ]


@pytest.mark.row("policy_unavailable")
async def test_a_slow_decision_point_on_the_surface_is_a_503(
    tmp_path: Path, aiohttp_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    pdp = AuthZenPdp()
    pdp.faults.delay_s = 2.0
    async with (
        authzen_pdp(aiohttp_server, pdp),
        _stack(tmp_path, aiohttp_server, monkeypatch, pdp, timeout_s=0.3) as (stack, up),
    ):
        token = stack.token("mcp:access")
        _assert_unavailable(*(await stack.modern(token, "resources/read", {"uri": URI}, name=URI)))
        _assert_unavailable(*(await _legacy(stack, token, "prompts/get", {"name": "plan"})))
        assert up.calls("resources/read") == [] and up.calls("prompts/get") == []


@pytest.mark.row("external_policy_denied")
async def test_in_a_2025_03_26_batch_the_refused_member_gets_the_error_the_others_their_results(
    tmp_path: Path, aiohttp_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with (
        authzen_pdp(aiohttp_server, AuthZenPdp(rule=_refuse("danger"))) as pdp,
        _stack(tmp_path, aiohttp_server, monkeypatch, pdp) as (stack, upstream),
    ):
        status, _, text = await stack.post(stack.token(), two_tool_calls("echo", "danger"))
        assert_only_the_second_refused(status, text, message=DENIED, reason="external_policy")
        assert [r.json["params"]["name"] for r in upstream.calls("tools/call")] == ["echo"]
        # One audit event per member, each with its own say of the decision point.
        events = [(e["tool"], e["decision"], e["error_row"], e["pdp"]) for e in audit_events(stack)]
        assert events == [
            ("echo", "allow", None, {"decision": "allow", "cached": False}),
            ("danger", "deny", "external_policy_denied", {"decision": "deny", "cached": False}),
        ]


async def test_a_consultation_is_a_client_span_of_the_request_and_a_cache_hit_none(
    tmp_path: Path, aiohttp_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    receiver = OtlpReceiver()
    collector = await aiohttp_server(receiver.app(), host="127.0.0.1")
    tracing = {
        "tracing": {"otlp": {"endpoint": f"http://127.0.0.1:{collector.port}", "timeout_s": 5}}
    }
    async with (
        authzen_pdp(aiohttp_server) as pdp,
        _stack(tmp_path, aiohttp_server, monkeypatch, pdp, gateway_extra=tracing) as (stack, _),
    ):
        token = stack.token()
        for _ in range(2):  # the second is answered from the decision cache
            assert (await stack.call(token, "echo", {"text": "a"}))[0] == 200
        spans = await receiver.wait_for(6)
    consultations = [s for s in spans if s.name == "mcp_gateway.policy_external"]
    assert len(consultations) == 1 and len(pdp.seen) == 1
    (span,) = consultations
    server = next(s for s in spans if s.kind == "server" and s.trace_id == span.trace_id)
    assert span.kind == "client" and server is not None
    assert span.attributes["http.response.status_code"] == 200
    assert span.attributes["server.address"] == "127.0.0.1"
    exported = b"".join(receiver.raw)
    assert token.encode() not in exported and PDP_SECRET.encode() not in exported


async def test_methods_limits_what_the_decision_point_is_asked_about(
    tmp_path: Path, aiohttp_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A PDP refusing everything, asked about tools/call only: prompts and reads are local.
    async with (
        authzen_pdp(aiohttp_server, AuthZenPdp(rule=lambda body: False)) as pdp,
        _stack(tmp_path, aiohttp_server, monkeypatch, pdp, methods=["tools/call"]) as (stack, _),
    ):
        token = stack.token()
        _assert_denied(*(await stack.call(token, "echo")))
        params = {"name": "greet", "arguments": {"who": "x"}}
        assert (await stack.modern(token, "prompts/get", params, name="greet"))[0] == 200
        assert (await stack.modern(token, "resources/read", {"uri": URI}, name=URI))[0] == 200
        assert [s.body["action"]["name"] for s in pdp.seen] == ["tools/call"]
        events = [e for e in audit_events(stack) if e["event"] != "tool_call"]
        assert [("pdp" in e, e["decision"]) for e in events] == [(False, "allow")] * 2


async def test_tools_limits_which_tools_the_decision_point_decides_on(
    tmp_path: Path, aiohttp_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with (
        authzen_pdp(aiohttp_server, AuthZenPdp(rule=lambda body: False)) as pdp,
        _stack(tmp_path, aiohttp_server, monkeypatch, pdp, tools=["dan?er", "admin_*"]) as (
            stack,
            _,
        ),
    ):
        token = stack.token()
        assert (await stack.call(token, "echo"))[0] == 200  # not listed: the local policy alone
        _assert_denied(*(await stack.call(token, "danger")))
        assert [s.body["resource"]["id"] for s in pdp.seen] == ["danger"]
        # Prompts and reads are governed by methods (all three by default), not by tools.
        assert (await stack.modern(token, "resources/read", {"uri": URI}, name=URI))[0] == 403
