"""The client's bearer token never leaves the front door (architecture invariant 4).

Drives successes and every kind of rejection with a recognisable token through the endpoint
wired to the real ``GatewayObserver`` (access line + audit), and checks the captured log events,
the Prometheus exposition, every response body and header, and what the backend received.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
import structlog
from prometheus_client import generate_latest
from structlog.testing import capture_logs

from gateway.config import AuditConfig, LoggingConfig
from gateway.observability.access import GatewayObserver
from gateway.observability.audit import AuditSink
from gateway.observability.logging import configure
from gateway.observability.metrics import Metrics
from tests.integration.front_door.conftest import MakeGateway
from tests.support.fakes import principal
from tests.support.gateway_harness import legacy_headers, modern_headers, modern_request
from tests.support.raw_http import exchange

TOKEN = "tok-SECRET-7f3a9c"


@contextlib.contextmanager
def rendered_lines() -> Iterator[io.StringIO]:
    """The production JSON configuration into a buffer: the access line takes its direct
    rendering path (not structlog's chain), as in ``serve``."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    buffer = io.StringIO()
    configure("json", "info", stream=buffer)
    structlog.configure(cache_logger_on_first_use=False)
    try:
        yield buffer
    finally:
        structlog.reset_defaults()
        structlog.contextvars.clear_contextvars()
        root.handlers[:] = handlers
        root.setLevel(level)


@pytest.mark.parametrize("output", ["captured", "rendered"])
@pytest.mark.parametrize("kind", ["valid", "unknown"])
async def test_the_bearer_token_appears_in_no_log_metric_body_or_backend_call(
    make_gw: MakeGateway, kind: str, output: str
) -> None:
    token = TOKEN if kind == "valid" else TOKEN + "-unknown"
    metrics = Metrics()
    audit_out = io.StringIO()
    observer = GatewayObserver(
        metrics=metrics,
        logging_config=LoggingConfig(),
        audit=AuditSink.from_config(AuditConfig(sink="stdout"), stream=audit_out),
        record_request_metrics=False,
    )
    gw = await make_gw(tokens={TOKEN: principal("erin", "mcp:access docs:read")}, observer=observer)
    auth = f"Bearer {token}"
    exchanges: list[tuple[Any, dict[str, str]]] = [
        (
            modern_request("server/discover", 1),
            modern_headers("server/discover", Authorization=auth),
        ),
        (modern_request("tools/list", 2), modern_headers("tools/list", Authorization=auth)),
        (
            modern_request("tools/call", 3, {"name": "echo", "arguments": {"text": "x"}}),
            modern_headers("tools/call", "echo", Authorization=auth),
        ),
        (
            modern_request("tools/call", 4, {"name": "create_ticket", "arguments": {}}),
            modern_headers("tools/call", "create_ticket", Authorization=auth),
        ),
        (b"{not json", modern_headers("server/discover", Authorization=auth)),
        ({"jsonrpc": "2.0", "id": 5, "method": "tools/list"}, legacy_headers(Authorization=auth)),
        (  # the client puts its credential where the access line logs client text (method)
            {"jsonrpc": "2.0", "id": 6, "method": auth},
            legacy_headers(Authorization=auth),
        ),
    ]
    seen: list[str] = []
    capture = capture_logs() if output == "captured" else rendered_lines()
    with capture as logs:
        for body, headers in exchanges:
            response = await gw.post(body, headers)
            seen.append(await response.text())
            seen.append(json.dumps(dict(response.headers)))
    written = json.dumps(logs, default=str) if isinstance(logs, list) else logs.getvalue()
    assert "mcp.request" in written, "the observer wrote access lines"
    assert TOKEN not in written
    assert ('"tool_call"' in audit_out.getvalue()) == (kind == "valid")  # refused before
    assert TOKEN not in audit_out.getvalue()
    assert TOKEN not in generate_latest(metrics.registry).decode()
    assert TOKEN not in generate_latest(gw.metrics.registry).decode()
    assert all(TOKEN not in text for text in seen)
    for recorded in gw.backend.calls:
        assert TOKEN not in repr(recorded.call)
        assert TOKEN not in repr(recorded.principal)


@pytest.mark.parametrize(
    "folded",
    [
        b"Authorization: Bearer\r\n " + TOKEN.encode(),
        b"Authorization: Bearer tok-\r\n\t" + TOKEN.encode(),
        b"Authorization:\r\n Bearer " + TOKEN.encode(),
    ],
    ids=["after the scheme", "inside the token", "before the scheme"],
)
async def test_a_token_split_by_obsolete_line_folding_reaches_no_log_and_no_answer(
    make_gw: MakeGateway, caplog: pytest.LogCaptureFixture, folded: bytes
) -> None:
    """Issue 12 item 4: the parser's error text quoted the folded header, and the traceback of
    the plain-text 400 carried it into an ERROR line where the one-line redaction missed it."""
    gw = await make_gw(tokens={TOKEN: principal("erin", "mcp:access docs:read")})
    caplog.set_level(logging.DEBUG)
    head = b"POST /mcp HTTP/1.1\r\nHost: x\r\n" + folded + b"\r\nContent-Length: 2\r\n\r\n{}"
    with capture_logs() as logs:
        response = await exchange(gw.server.port, head)
    assert response.status == 400
    assert response.json()["error"] == {"code": -31400, "message": "Malformed HTTP request"}
    assert TOKEN.encode() not in response.body
    assert all(TOKEN not in value for value in response.headers.values())
    assert TOKEN not in json.dumps(logs, default=str)
    for record in caplog.records:
        assert TOKEN not in record.getMessage()
        assert record.exc_info is None
    assert TOKEN not in generate_latest(gw.metrics.registry).decode()
    assert gw.authenticator.calls == 0 and gw.backend.calls == []
