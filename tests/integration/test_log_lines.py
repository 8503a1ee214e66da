"""Operator-facing log lines, read from the production JSON output (redaction included).

Each test drives the real gateway over HTTP (development issuer, real upstream) with the
production logging configuration writing into a buffer, then reads the JSON lines an operator
would see.
"""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from gateway.app import GatewayServer
from gateway.config import load_config
from gateway.dev.dev_issuer import DevIssuer
from gateway.wiring.production import build_services
from tests.support.jwt_forge import access_claims
from tests.support.jwt_stack import jwt_stack
from tests.support.live_stack import LiveStack, MakeStack
from tests.support.serve_process import gateway_config, write_config


@pytest.fixture
async def stack(make_stack: MakeStack) -> AsyncIterator[LiveStack]:
    async with make_stack() as running:
        yield running


def lines(buffer: io.StringIO, event: str) -> list[dict[str, Any]]:
    parsed = [json.loads(raw) for raw in buffer.getvalue().splitlines() if raw.startswith("{")]
    return [line for line in parsed if line.get("event") == event]


async def test_the_gateways_own_token_type_message_is_not_mangled_by_redaction(
    stack: LiveStack, json_log: io.StringIO
) -> None:
    token = stack.token()
    # A refresh token presented as a bearer: the issuer says token_type "refresh_token".
    record = stack.issuer.store.tokens[token]
    stack.issuer.store.tokens[token] = dataclasses.replace(record, kind="refresh_token")
    status, _, _ = await stack.modern(token, "tools/list")
    assert status == 401
    (rejected,) = lines(json_log, "token_rejected")
    assert rejected["reason"] == "token_type is not an access token this issuer accepts"
    assert token not in json_log.getvalue()


async def test_an_issuer_mismatch_names_the_issuer_the_metadata_declared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, json_log: io.StringIO
) -> None:
    async with DevIssuer() as issuer:
        issuer.register_client("mcp-gateway", "s3cret", can_introspect=True)
        monkeypatch.setenv("LOG_TEST_SECRET", "s3cret")
        configured = issuer.url + "/"  # the metadata says issuer.url, without the slash
        settings = gateway_config(
            issuer_url=configured,
            backend_url="http://127.0.0.1:9/mcp",
            secret={"env": "LOG_TEST_SECRET"},
            credential={"env": "LOG_TEST_SECRET"},
            audit={"sink": "off"},
        )
        write_config(tmp_path, settings, "version: 1\nbaseline_scopes: [mcp:access]\n")
        config = load_config(tmp_path / "gateway.yaml")
        server = GatewayServer(config, build_services(config))
        await server.start()
        try:
            # Under load (a shared 2-core machine) discovery can take seconds: wait for the line
            # up to a generous deadline, polling, rather than a fixed count of short sleeps.
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                if lines(json_log, "issuer_discovery_failed"):
                    break
                await asyncio.sleep(0.05)
            async with (
                aiohttp.ClientSession() as session,
                session.get(server.ops_url + "/readyz") as response,
            ):
                assert response.status == 503
        finally:
            await server.stop()
    failed = lines(json_log, "issuer_discovery_failed")[0]
    assert failed["reason"] == "issuer metadata names a different issuer"
    assert failed["issuer"] == configured
    assert failed["declared_issuer"] == issuer.url


async def test_token_rejected_lines_carry_the_request_id_also_from_the_negative_cache(
    stack: LiveStack, json_log: io.StringIO
) -> None:
    # The line is rendered directly (not through structlog's chain) on this hot path: it must
    # still carry what every line of a request carries, and never the token.
    token = stack.token()
    assert stack.issuer.revoke(token)
    for _ in range(2):  # introspected, then a negative-cache hit
        status, _, _ = await stack.modern(token, "tools/list")
        assert status == 401
    rejected = lines(json_log, "token_rejected")
    access = [line for line in lines(json_log, "mcp.request") if line["status"] == 401]
    assert [line["reason"] for line in rejected] == [
        "token is not active",
        "refused earlier (negative cache)",
    ]
    assert [line["request_id"] for line in rejected] == [line["request_id"] for line in access]
    for line in rejected:
        assert line["level"] == "info"
        assert line["timestamp"].endswith("Z")
        assert line["client_ip"] == "127.0.0.1"
        assert len(line["fingerprint"]) == 12
        assert line["trace_id"]
    assert token not in json_log.getvalue()


async def test_the_typ_refusal_reads_as_written_and_the_access_line_names_the_issuer(
    make_stack: MakeStack,
    json_log: io.StringIO,
) -> None:
    # Issue 43: the redactor took "(refresh" after "Bearer" for a credential ("typ claim is not
    # Bearer [REDACTED] or ID token)"); the access line did not say which issuer admitted the
    # caller, so with two issuers the access log could not tell.
    async with make_stack.of(jwt_stack) as stack:
        dev = stack.issuer
        refresh = dev.sign_jwt(access_claims(dev.url, stack.config.resource, typ="Refresh"))
        status, _, _ = await stack.modern(refresh, "tools/list")
        assert status == 401
        status, _, _ = await stack.modern(stack.token(), "tools/list")
        assert status == 200
    (rejected,) = lines(json_log, "token_rejected")
    assert rejected["reason"] == "typ claim is not Bearer (refresh or ID token)"
    refused, served = lines(json_log, "mcp.request")
    assert (refused["status"], refused["issuer"]) == (401, None)
    assert (served["status"], served["issuer"]) == (200, dev.url)
