"""2025-03-26 batches are all or nothing for HTTP-level answers, and audited per call.

A batch answered 403/429 as a whole must not have run any member (issue 12 item 6: a note was
created under a 403), and every ``tools/call`` member writes its own audit event.
"""

from __future__ import annotations

import asyncio
import io
import json
from typing import Any

import pytest

from gateway.config import AuditConfig, LoggingConfig
from gateway.observability.access import GatewayObserver
from gateway.observability.audit import AuditSink
from gateway.observability.metrics import Metrics
from tests.integration.front_door.conftest import MakeGateway
from tests.support.assertions import assert_error
from tests.support.gateway_harness import Gateway, legacy_headers

LEGACY = "2025-03-26"


def call(rid: int, name: str, **arguments: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


def audited() -> tuple[io.StringIO, GatewayObserver]:
    stream = io.StringIO()
    observer = GatewayObserver(
        metrics=Metrics(),
        logging_config=LoggingConfig(),
        audit=AuditSink.from_config(AuditConfig(sink="stdout"), stream=stream),
        record_request_metrics=False,
    )
    return stream, observer


def events(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines() if line]


@pytest.mark.row("tool_insufficient_scope")
async def test_a_step_up_anywhere_in_a_batch_runs_no_member(make_gw: MakeGateway) -> None:
    stream, observer = audited()
    gw = await make_gw(observer=observer)
    batch = [call(1, "echo", text="note"), call(2, "create_ticket", title="x")]
    response = await gw.post(batch, legacy_headers(LEGACY))
    await assert_error(response, 403)
    assert 'scope="mcp:access tickets:write"' in response.headers["WWW-Authenticate"]
    assert gw.backend.calls == [], "the echo member ran although the batch was refused"
    [event] = events(stream)
    assert (event["tool"], event["decision"], event["status"]) == ("create_ticket", "deny", 403)


async def test_a_step_up_after_a_list_member_refuses_the_batch_too(gw: Gateway) -> None:
    batch = [
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        call(2, "echo", text="a"),
        call(3, "create_ticket"),
    ]
    await assert_error(await gw.post(batch, legacy_headers(LEGACY)), 403)
    assert gw.backend.calls == []


async def test_every_tools_call_member_writes_its_own_audit_event(make_gw: MakeGateway) -> None:
    stream, observer = audited()
    gw = await make_gw(observer=observer)
    batch = [
        call(1, "echo", text="a"),
        {"jsonrpc": "2.0", "id": 2, "method": "ping"},
        call(3, "fail"),
        call(4, "nope"),
        call(5, "echo", text="b"),
    ]
    response = await gw.post(batch, legacy_headers(LEGACY))
    assert response.status == 200
    assert [entry["id"] for entry in await response.json()] == [1, 2, 3, 4, 5]
    found = events(stream)
    assert [(e["tool"], e["outcome"], e["decision"]) for e in found] == [
        ("echo", "ok", "allow"),
        ("fail", "tool_error", "allow"),
        ("nope", "rejected", "deny"),
        ("echo", "ok", "allow"),
    ]
    assert found[2]["jsonrpc_code"] == -32602 and found[2]["error_row"] == "unknown_tool"
    assert len({e["request_id"] for e in found}) == 1
    assert all(e["status"] == 200 for e in found)
    assert len(gw.backend.calls) == 3


@pytest.mark.row("rate_limited")
async def test_a_batch_over_a_tool_rate_limit_runs_no_member(gw: Gateway) -> None:
    # create_ticket allows 2 calls a minute; the third member is over it.
    batch = [call(1, "echo", text="a"), *(call(i, "create_ticket") for i in (2, 3, 4))]
    response = await gw.post(batch, legacy_headers(LEGACY, Authorization="Bearer ops"))
    await assert_error(response, 429)
    assert response.headers["Retry-After"].isdigit()
    assert gw.backend.calls == []


async def test_a_batch_takes_one_slot_per_capped_tool(gw: Gateway) -> None:
    gw.backend.release.set()  # "slow" answers at once
    batch = [call(1, "slow"), call(2, "slow")]
    response = await gw.post(batch, legacy_headers(LEGACY))
    assert response.status == 200
    assert len(gw.backend.calls) == 2


@pytest.mark.row("rate_limited")
async def test_a_batch_whose_capped_tool_is_busy_runs_no_member(gw: Gateway) -> None:
    holder = asyncio.ensure_future(gw.post(call(9, "slow"), legacy_headers(LEGACY)))
    # The single-request "slow" call holds the tool's only slot (max_concurrency 1).
    for _ in range(200):
        if gw.backend.calls:
            break
        await asyncio.sleep(0.01)
    assert len(gw.backend.calls) == 1
    response = await gw.post([call(1, "echo", text="a"), call(2, "slow")], legacy_headers(LEGACY))
    await assert_error(response, 429)
    assert len(gw.backend.calls) == 1, "the echo member ran although the batch was refused"
    gw.backend.release.set()
    assert (await holder).status == 200
