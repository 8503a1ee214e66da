"""GatewayServer lifecycle: ops endpoints, readiness, graceful drain, request ids, real SIGTERM."""

from __future__ import annotations

import asyncio
import dataclasses
import ipaddress
import json
import re
import signal
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import structlog
from aiohttp import web

from gateway.app import GatewayServer, Services
from gateway.config import Config, Listen, load_config
from gateway.outbound.client import Destination, Outbound
from gateway.outbound.failures import OutboundConnectionError
from gateway.outbound.responses import Response
from tests.support.serve_process import serve_process

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "config"
ENV = {"TEST_INTROSPECTION_SECRET": "introspection-secret", "TEST_BACKEND_TOKEN": "backend-token"}
LOOPBACK = (ipaddress.ip_network("127.0.0.0/8"),)


def make_config(*, drain_s: float = 5.0, trusted: bool = False) -> Config:
    config = load_config(FIXTURES / "minimal.yaml", ENV)
    return dataclasses.replace(
        config,
        listen=Listen("127.0.0.1", 0),
        ops_listen=Listen("127.0.0.1", 0),
        limits=dataclasses.replace(config.limits, drain_timeout_s=drain_s),
        trusted_proxies=LOOPBACK if trusted else (),
    )


@pytest.fixture
async def http() -> AsyncIterator[Outbound]:
    client = Outbound(user_agent="lifecycle-test")
    client.add(Destination("test", connect_timeout_s=2.0))
    yield client
    await client.close()


async def get(http: Outbound, url: str, **headers: str) -> Response:
    return await http.request("test", "GET", url, timeout_s=10, headers=headers)


@pytest.fixture
async def running() -> AsyncIterator[Callable[..., Awaitable[GatewayServer]]]:
    servers: list[GatewayServer] = []

    async def start(config: Config | None = None, services: Services | None = None) -> Any:
        server = GatewayServer(config or make_config(), services)
        await server.start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        await server.stop()


class TestOpsListener:
    async def test_healthz_answers_200_while_alive(self, running: Any, http: Outbound) -> None:
        server = await running()
        response = await get(http, server.ops_url + "/healthz")
        assert response.status == 200
        assert json.loads(response.body) == {"status": "alive"}
        assert response.headers["Cache-Control"] == "no-store"

    async def test_metrics_are_served_on_the_ops_listener_in_prometheus_format(
        self, running: Any, http: Outbound
    ) -> None:
        server = await running()
        response = await get(http, server.ops_url + "/metrics")
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain; version=")
        assert b"mcp_gateway_build_info{" in response.body
        assert b"# TYPE mcp_gateway_requests_total counter" in response.body

    @pytest.mark.parametrize("path", ["/metrics", "/healthz", "/readyz"])
    async def test_ops_paths_are_404_on_the_public_listener(
        self, running: Any, http: Outbound, path: str
    ) -> None:
        server = await running()
        response = await get(http, f"http://127.0.0.1:{server.public_port}{path}")
        assert response.status == 404

    async def test_the_two_listeners_use_different_ports(self, running: Any) -> None:
        server = await running()
        assert server.public_port > 0
        assert server.ops_port > 0
        assert server.public_port != server.ops_port
        assert server.mcp_url == f"http://127.0.0.1:{server.public_port}/mcp"


class TestReadiness:
    async def test_readyz_is_503_until_every_check_is_ready_then_200(
        self, running: Any, http: Outbound
    ) -> None:
        issuer_ready = asyncio.Event()
        services = Services()
        services.add_readiness_check("issuer_metadata", issuer_ready.is_set)
        services.add_readiness_check("backend_catalog", lambda: True)
        server = await running(services=services)

        response = await get(http, server.ops_url + "/readyz")
        assert response.status == 503
        assert json.loads(response.body) == {
            "status": "not_ready",
            "checks": {"issuer_metadata": False, "backend_catalog": True},
            "policy_version": None,
        }

        issuer_ready.set()
        response = await get(http, server.ops_url + "/readyz")
        assert response.status == 200
        assert json.loads(response.body)["status"] == "ready"

    async def test_a_background_startup_task_can_make_the_gateway_ready(
        self, running: Any, http: Outbound
    ) -> None:
        done = asyncio.Event()
        services = Services()
        services.add_readiness_check("discovery", done.is_set)

        async def discover() -> None:
            await asyncio.sleep(0.05)
            done.set()

        services.background.append(discover)
        server = await running(services=services)
        await asyncio.wait_for(done.wait(), 5)
        assert (await get(http, server.ops_url + "/readyz")).status == 200

    async def test_a_readiness_check_that_raises_counts_as_not_ready(
        self, running: Any, http: Outbound
    ) -> None:
        def broken() -> bool:
            raise RuntimeError("probe failed")

        services = Services()
        services.add_readiness_check("broken", broken)
        server = await running(services=services)
        response = await get(http, server.ops_url + "/readyz")
        assert response.status == 503
        assert json.loads(response.body)["checks"] == {"broken": False}

    async def test_readyz_reports_the_active_policy_version(
        self, running: Any, http: Outbound
    ) -> None:
        policy = SimpleNamespace(version="sha256:0123abcd")
        services = Services(policy=SimpleNamespace(current=lambda: policy))  # type: ignore[arg-type]
        server = await running(services=services)
        body = json.loads((await get(http, server.ops_url + "/readyz")).body)
        assert body == {"status": "ready", "checks": {}, "policy_version": "sha256:0123abcd"}


class TestPublicListener:
    async def test_the_mcp_path_answers_503_until_the_pipeline_is_wired(
        self, running: Any, http: Outbound
    ) -> None:
        server = await running()
        response = await http.request(
            "test",
            "POST",
            server.mcp_url,
            timeout_s=10,
            body=b"{}",
            headers={"Content-Type": "application/json"},
        )
        assert response.status == 503
        assert json.loads(response.body) == {"error": "mcp endpoint not wired"}

    async def test_only_the_exact_mcp_path_is_routed(self, running: Any, http: Outbound) -> None:
        server = await running()
        for path in ("/mcp/", "/mcpx", "/", "/other"):
            response = await get(http, f"http://127.0.0.1:{server.public_port}{path}")
            assert response.status == 404, path

    async def test_a_wired_mcp_handler_receives_every_method(
        self, running: Any, http: Outbound
    ) -> None:
        async def handler(request: web.Request) -> web.Response:
            return web.Response(text=request.method)

        server = await running(services=Services(mcp_handler=handler))
        for method in ("POST", "GET", "DELETE", "PUT"):
            response = await http.request("test", method, server.mcp_url, timeout_s=10)
            assert (response.status, response.body) == (200, method.encode())

    async def test_install_routes_takes_precedence_over_the_single_handler(
        self, running: Any, http: Outbound
    ) -> None:
        async def prm(request: web.Request) -> web.Response:
            return web.json_response({"resource": "https://mcp.example.com/mcp"})

        def install(app: web.Application) -> None:
            app.router.add_get("/.well-known/oauth-protected-resource/mcp", prm)
            app.router.add_route("*", "/mcp", prm)

        services = Services(install_routes=install, mcp_handler=_echo_request_id)
        server = await running(services=services)
        base = f"http://127.0.0.1:{server.public_port}"
        metadata = await get(http, base + "/.well-known/oauth-protected-resource/mcp")
        assert json.loads(metadata.body) == {"resource": "https://mcp.example.com/mcp"}
        assert json.loads((await get(http, server.mcp_url)).body)["resource"]


async def _echo_request_id(request: web.Request) -> web.Response:
    # What every log line of this request is bound to.
    return web.Response(text=structlog.contextvars.get_contextvars()["request_id"])


class TestRequestId:
    async def test_a_trusted_proxys_request_id_is_kept_echoed_and_bound_to_logs(
        self, running: Any, http: Outbound
    ) -> None:
        services = Services(mcp_handler=_echo_request_id)
        server = await running(make_config(trusted=True), services)
        response = await get(http, server.mcp_url, **{"X-Request-Id": "edge-7f3a.01_B"})
        assert response.headers["X-Request-Id"] == "edge-7f3a.01_B"
        assert response.body == b"edge-7f3a.01_B"

    async def test_an_untrusted_peers_request_id_is_replaced(
        self, running: Any, http: Outbound
    ) -> None:
        services = Services(mcp_handler=_echo_request_id)
        server = await running(make_config(trusted=False), services)
        response = await get(http, server.mcp_url, **{"X-Request-Id": "attacker-chosen"})
        generated = response.headers["X-Request-Id"]
        assert re.fullmatch(r"[0-9a-f]{32}", generated)
        assert response.body == generated.encode()

    @pytest.mark.parametrize(
        ("offered", "kept"),
        [
            pytest.param("a" * 128, True, id="128 chars (limit)"),
            pytest.param("a" * 129, False, id="129 chars (one past)"),
            pytest.param("has space", False, id="space"),
            pytest.param("semi;colon", False, id="separator"),
            pytest.param("line\u00e9", False, id="non-ascii"),
        ],
    )
    async def test_a_trusted_request_id_must_be_short_and_token_safe(
        self, running: Any, http: Outbound, offered: str, kept: bool
    ) -> None:
        server = await running(make_config(trusted=True), Services(mcp_handler=_echo_request_id))
        raw = offered.encode("utf-8").decode("latin-1")  # header bytes as sent on the wire
        response = await get(http, server.mcp_url, **{"X-Request-Id": raw})
        echoed = response.headers["X-Request-Id"]
        assert (echoed == offered) is kept
        if not kept:
            assert re.fullmatch(r"[0-9a-f]{32}", echoed)

    async def test_404_and_ops_responses_carry_a_request_id_too(
        self, running: Any, http: Outbound
    ) -> None:
        server = await running()
        missing = await get(http, f"http://127.0.0.1:{server.public_port}/nope")
        health = await get(http, server.ops_url + "/healthz")
        assert re.fullmatch(r"[0-9a-f]{32}", missing.headers["X-Request-Id"])
        assert re.fullmatch(r"[0-9a-f]{32}", health.headers["X-Request-Id"])


class TestGracefulStop:
    async def test_a_slow_request_in_flight_finishes_during_the_drain(self, http: Outbound) -> None:
        entered = asyncio.Event()
        release = asyncio.Event()

        async def slow(request: web.Request) -> web.Response:
            entered.set()
            await release.wait()
            return web.Response(text="finished")

        server = GatewayServer(make_config(drain_s=5.0), Services(mcp_handler=slow))
        await server.start()
        in_flight = asyncio.create_task(get(http, server.mcp_url))
        await asyncio.wait_for(entered.wait(), 5)

        started = time.monotonic()
        stopping = asyncio.create_task(server.stop())
        await asyncio.sleep(0.1)
        # Draining: not ready any more, no new connections, the old request still runs.
        readyz = await get(http, server.ops_url + "/readyz")
        assert readyz.status == 503
        assert json.loads(readyz.body)["status"] == "draining"
        fresh = Outbound()
        fresh.add(Destination("fresh", connect_timeout_s=1.0))
        try:
            with pytest.raises(OutboundConnectionError):
                await fresh.request("fresh", "GET", server.mcp_url, timeout_s=2)
        finally:
            await fresh.close()
        assert not in_flight.done()

        release.set()
        response = await asyncio.wait_for(in_flight, 5)
        assert (response.status, response.body) == (200, b"finished")
        await asyncio.wait_for(stopping, 5)
        assert time.monotonic() - started < 5.0  # within the drain timeout

    async def test_a_request_slower_than_the_drain_timeout_is_cancelled_and_stop_returns(
        self, http: Outbound
    ) -> None:
        entered = asyncio.Event()
        cancelled = asyncio.Event()

        async def stuck(request: web.Request) -> web.Response:
            entered.set()
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                cancelled.set()
                raise
            return web.Response(text="never")

        server = GatewayServer(make_config(drain_s=0.3), Services(mcp_handler=stuck))
        await server.start()
        in_flight = asyncio.create_task(get(http, server.mcp_url))
        await asyncio.wait_for(entered.wait(), 5)
        await asyncio.wait_for(server.stop(), 10)
        assert cancelled.is_set()
        with pytest.raises(OutboundConnectionError):
            await asyncio.wait_for(in_flight, 5)

    async def test_stop_cancels_background_tasks_runs_cleanups_and_closes_outbound(
        self,
    ) -> None:
        events: list[str] = []

        async def forever() -> None:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                events.append("background cancelled")
                raise

        async def cleanup() -> None:
            events.append("cleanup")

        outbound = Outbound()
        outbound.add(Destination("issuer"))
        services = Services(outbound=outbound, background=[forever], cleanups=[cleanup])
        server = GatewayServer(make_config(), services)
        await server.start()
        await asyncio.sleep(0)
        await server.stop()
        assert events == ["background cancelled", "cleanup"]
        assert outbound._sessions == {}


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
async def test_mcp_gateway_serve_exits_0_on_sigterm_within_the_drain_timeout(
    tmp_path: Path,
) -> None:
    (tmp_path / "policy.yaml").write_text(
        (FIXTURES / "policy.yaml").read_text(encoding="utf-8"), encoding="utf-8"
    )
    config = (FIXTURES / "minimal.yaml").read_text(encoding="utf-8") + (
        "listen: {host: 127.0.0.1, port: 0}\n"
        "ops_listen: {host: 127.0.0.1, port: 0}\n"
        "limits: {drain_timeout_s: 3}\n"
    )
    (tmp_path / "gateway.yaml").write_text(config, encoding="utf-8")
    async with serve_process(tmp_path / "gateway.yaml", env=ENV) as gw:
        _, ops_url = await gw.started()
        client = Outbound()
        client.add(Destination("test"))
        try:
            health = await client.request("test", "GET", f"{ops_url}/healthz", timeout_s=5)
        finally:
            await client.close()
        assert health.status == 200

        sent = time.monotonic()
        gw.process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(gw.process.wait(), 3 + 5) == 0
        assert time.monotonic() - sent < 3 + 5
        await gw.wait_for("gateway.stopped", 5)  # the reader has the last lines too
        events = [line["event"] for line in gw.lines]
        assert events[-1] == "gateway.stopped"
        assert "gateway.draining" in events


async def test_a_failed_start_releases_the_services_and_the_bound_listener() -> None:
    blocker = GatewayServer(make_config())
    await blocker.start()
    try:
        cleaned: list[str] = []

        async def cleanup() -> None:
            cleaned.append("cleanup")

        outbound = Outbound()
        outbound.add(Destination("issuer"))
        config = dataclasses.replace(make_config(), listen=Listen("127.0.0.1", blocker.public_port))
        server = GatewayServer(config, Services(outbound=outbound, cleanups=[cleanup]))
        with pytest.raises(OSError):
            await server.start()
        assert cleaned == ["cleanup"]
        assert outbound._sessions == {}
        assert server._ops_runner is None  # the ops listener bound first was closed again
    finally:
        await blocker.stop()
