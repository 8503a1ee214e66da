"""Issue 12 through the production wiring: the failed-auth budget, discovered endpoints with
userinfo, oversized identity claims.

The gateway is ``GatewayServer(config, build_services(config))`` as ``mcp-gateway serve`` runs it,
against a loopback issuer stub (``tests/support/test_issuer.py``, which can be slow or advertise a
hostile endpoint) and the demo backend, which records what reaches it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from gateway.app import GatewayServer
from gateway.config import load_config
from gateway.dev.demo_backend import DemoBackend
from gateway.wiring.production import build_services
from tests.support.test_issuer import IssuerStub

ROOT = Path(__file__).resolve().parents[2]
SERVICE_TOKEN = "hostile-stack-service-token"
LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}


@dataclass
class Stack:
    issuer: IssuerStub
    backend: DemoBackend
    server: GatewayServer
    session: aiohttp.ClientSession

    async def post(
        self, token: str, body: dict[str, Any] | None = None, *, ip: str | None = None
    ) -> tuple[int, dict[str, str], dict[str, Any]]:
        headers = {
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
            "Accept": "application/json",
            "MCP-Protocol-Version": "2025-06-18",
        }
        if ip is not None:
            headers["X-Forwarded-For"] = ip
        async with self.session.post(
            self.server.mcp_url, data=json.dumps(body or LIST), headers=headers
        ) as response:
            return response.status, dict(response.headers), json.loads(await response.read())

    async def ready(self) -> int:
        async with self.session.get(self.server.ops_url + "/readyz") as response:
            return response.status


@contextlib.asynccontextmanager
async def stack(
    tmp_path: Path,
    aiohttp_server: Any,
    *,
    issuer_yaml: str = "",
    limits_yaml: str = "{}",
    hostile_endpoint: str | None = None,
) -> AsyncIterator[Stack]:
    """``hostile_endpoint``: the metadata advertises this introspection endpoint (``{host}`` is
    the stub's host:port); the gateway then never becomes ready."""
    stub = IssuerStub()
    issuer_server = await aiohttp_server(stub.app())
    stub.bind(str(issuer_server.make_url("/")))
    if hostile_endpoint is not None:
        stub.introspection_endpoint = hostile_endpoint.format(host=stub.base_url.split("//")[1])
    backend = DemoBackend(service_token=SERVICE_TOKEN)
    await backend.start()
    (tmp_path / "service-token").write_text(SERVICE_TOKEN)
    (tmp_path / "issuer-secret").write_text(stub.client_secret)
    (tmp_path / "gateway.yaml").write_text(
        f"""
resource: {stub.resource}
listen: {{host: 127.0.0.1, port: 0}}
ops_listen: {{host: 127.0.0.1, port: 0}}
trusted_proxies: [127.0.0.0/8]
issuer:
  url: {stub.issuer}
  client_id: {stub.client_id}
  client_secret: {{file: issuer-secret}}
  allow_insecure_http: true
  cache: {{max_ttl_s: 60}}
{issuer_yaml}
backend:
  url: {backend.url}
  allow_insecure_http: true
  credential: {{type: bearer, token: {{file: service-token}}}}
policy: {ROOT / "gateway" / "dev" / "demo-policy.yaml"}
audit: {{sink: off}}
limits: {limits_yaml}
"""
    )
    config = load_config(tmp_path / "gateway.yaml")
    server = GatewayServer(config, build_services(config))
    await server.start()
    try:
        async with aiohttp.ClientSession() as session:
            running = Stack(stub, backend, server, session)
            if hostile_endpoint is None:
                for _ in range(200):
                    if await running.ready() == 200:
                        break
                    await asyncio.sleep(0.05)
                else:
                    pytest.fail("the gateway never became ready")
            yield running
    finally:
        await server.stop()
        await backend.stop()


def grant(stub: IssuerStub, token: str, **claims: Any) -> None:
    stub.grant(token, scope="mcp:access notes:read", **claims)


class TestFailedAuthBudget:
    @pytest.mark.row("invalid_token")
    async def test_a_hundred_concurrent_retries_of_one_bad_token_cost_one_charge(
        self, tmp_path: Path, aiohttp_server: Any
    ) -> None:
        yaml = "  failed_auth_rate: 3/minute\n"
        limits = "{max_in_flight_per_ip: 200}"  # all hundred from one address, at once
        async with stack(tmp_path, aiohttp_server, issuer_yaml=yaml, limits_yaml=limits) as s:
            s.issuer.revoke("stale-token")
            s.issuer.fault, s.issuer.slow_s = "slow", 0.3  # one flight for all of them
            results = await asyncio.gather(
                *(s.post("stale-token", ip="198.51.100.7") for _ in range(100))
            )
            assert {status for status, _, _ in results} == {401}
            assert s.issuer.introspection_calls == 1
            s.issuer.fault = None
            # One charge of three: two more bad tokens still reach the issuer and get 401.
            for n in range(2):
                status, _, _ = await s.post(f"other-bad-{n}", ip="198.51.100.7")
                assert status == 401

    @pytest.mark.row("rate_limited")
    async def test_a_fresh_valid_token_gets_in_after_a_guesser_spent_the_budget(
        self, tmp_path: Path, aiohttp_server: Any
    ) -> None:
        # A 2 s probe interval: the requests below are well within it even on a loaded machine
        # (at 0.5 s the fresh token itself could become the next probe and get in at once).
        yaml = "  failed_auth_rate: 3/minute\n  failed_auth_probe_interval_s: 2\n"
        async with stack(tmp_path, aiohttp_server, issuer_yaml=yaml) as s:
            for n in range(4):  # the guesser, from the shared address
                status, _, _ = await s.post(f"guess-{n}", ip="198.51.100.7")
                assert status == 401
            grant(s.issuer, "fresh-valid", sub="bob")
            status, headers, body = await s.post("fresh-valid", ip="198.51.100.7")
            assert status == 429
            wait = int(headers["Retry-After"])
            assert 1 <= wait <= 2  # the next probe, not the end of the minute
            assert body == {
                "jsonrpc": "2.0",
                "id": None,
                "error": {"code": -31429, "message": f"Too many requests, retry in {wait} s"},
            }
            await asyncio.sleep(wait)  # as Retry-After says
            status, _, body = await s.post("fresh-valid", ip="198.51.100.7")
            assert status == 200, body
            # Cached now: the budget never applies to it again; new guesses still wait.
            assert (await s.post("fresh-valid", ip="198.51.100.7"))[0] == 200
            assert (await s.post("guess-next", ip="198.51.100.7"))[0] == 429


class TestDiscoveredEndpoints:
    @pytest.mark.row("issuer_unavailable")
    @pytest.mark.parametrize(
        "shape", ["http://evil@{host}/introspect", "http://{host}/introspect#x"]
    )
    async def test_a_hostile_discovered_endpoint_leaves_the_gateway_not_ready_answering_503(
        self, tmp_path: Path, aiohttp_server: Any, shape: str
    ) -> None:
        async with stack(tmp_path, aiohttp_server, hostile_endpoint=shape) as s:
            assert await s.ready() == 503
            grant(s.issuer, "valid-token")
            for _ in range(3):  # every uncached request: 503, never 500
                status, headers, body = await s.post("valid-token")
                assert status == 503, body
                assert headers["Retry-After"].isdigit()
                assert body["error"] == "issuer_unavailable"
            assert s.issuer.introspection_calls == 0


class TestIdentityClaims:
    @pytest.mark.row("invalid_token")
    async def test_an_oversized_sub_is_401_and_never_reaches_the_backend(
        self, tmp_path: Path, aiohttp_server: Any
    ) -> None:
        async with stack(tmp_path, aiohttp_server) as s:
            grant(s.issuer, "long-sub", sub="x" * 10_000)
            grant(s.issuer, "long-client", client_id="c" * 257)
            grant(s.issuer, "at-the-cap", sub="y" * 256)
            before = len(s.backend.received)
            call = {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "hi"}},
            }
            for token in ("long-sub", "long-client"):
                status, headers, _ = await s.post(token, call)
                assert status == 401
                assert 'error="invalid_token"' in headers["WWW-Authenticate"]
            assert len(s.backend.received) == before
            status, _, body = await s.post("at-the-cap", call)
            assert status == 200, body
