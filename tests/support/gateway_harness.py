"""A running front door on loopback: add_mcp_routes + McpEndpoint + the fakes of ``fakes.py``.

``await start_gateway(aiohttp_server, aiohttp_client, limits=...)`` returns a :class:`Gateway`
whose ``post`` sends raw or JSON bodies with modern or legacy headers. The server is a real
aiohttp server on 127.0.0.1 with an ephemeral port.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from aiohttp.web_runner import BaseRunner

from gateway.app.connection_limits import ListenerLimits
from gateway.app.fast_path import MCP_LANE
from gateway.app.server import ListenerRunner
from gateway.config import (
    BackendConfig,
    Config,
    CredentialConfig,
    IssuerConfig,
    Limits,
    ProtocolConfig,
    ServerInfo,
)
from gateway.http.pipeline.endpoint import McpEndpoint
from gateway.http.pipeline.routes import add_mcp_routes
from gateway.limits.memory import MemoryRateLimiter
from gateway.observability.metrics import Metrics
from gateway.seams import Observer, Principal, RequestContext
from tests.support.fakes import (
    PRM_URL,
    FakeAuthenticator,
    FakeBackend,
    FakePolicySource,
    default_policy,
    principal,
)

__all__ = [
    "MODERN",
    "RESOURCE",
    "Gateway",
    "ListenerTestServer",
    "RecordingObserver",
    "harness_config",
    "legacy_headers",
    "modern_headers",
    "modern_request",
    "start_gateway",
]

MODERN = "2026-07-28"
RESOURCE = "https://mcp.example.com/mcp"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "front-door-tests", "version": "1"},
}

ServerFactory = Callable[..., Awaitable[TestServer]]
ClientFactory = Callable[..., Awaitable[TestClient[web.Request, web.Application]]]


def harness_config(**limits: Any) -> Config:
    """A Config for the harness; keyword arguments override :class:`Limits` fields."""
    return Config(
        source="<harness>",
        resource=RESOURCE,
        issuer=IssuerConfig(url="https://id.example.com", client_id="gateway"),
        backend=BackendConfig(
            url="http://127.0.0.1:9/mcp", credential=CredentialConfig(type="bearer")
        ),
        policy_paths=(),
        server=ServerInfo(name="front-door-test", instructions="Fake tools for tests."),
        limits=dataclasses.replace(Limits(), **limits),
        protocol=ProtocolConfig(),
    )


def default_tokens() -> dict[str, Principal]:
    return {
        "good": principal("alice", "mcp:access docs:read"),
        "basic": principal("bob", "mcp:access"),
        "no-baseline": principal("carol", "docs:read"),
        "ops": principal(
            "ops", "mcp:access docs:read tickets:write admin", client_id="ops-console"
        ),
    }


class RecordingObserver:
    def __init__(self) -> None:
        self.started: list[RequestContext] = []
        self.finished: list[RequestContext] = []

    def request_started(self, ctx: RequestContext) -> None:
        self.started.append(ctx)

    def request_finished(self, ctx: RequestContext) -> None:
        self.finished.append(ctx)


def modern_headers(method: str, name: str | None = None, **extra: str) -> dict[str, str]:
    headers = {
        "Authorization": "Bearer good",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": method,
    }
    if name is not None:
        headers["Mcp-Name"] = name
    headers.update(extra)
    return headers


def legacy_headers(version: str | None = "2025-06-18", **extra: str) -> dict[str, str]:
    headers = {
        "Authorization": "Bearer good",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
    }
    if version is not None:
        headers["MCP-Protocol-Version"] = version
    headers.update(extra)
    return headers


def modern_request(
    method: str,
    request_id: int | str | None = 1,
    params: Mapping[str, Any] | None = None,
    *,
    meta: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if request_id is not None:
        body["id"] = request_id
    body["params"] = {**(params or {}), "_meta": dict(META if meta is None else meta)}
    return body


@dataclass(slots=True)
class Gateway:
    config: Config
    server: TestServer
    client: TestClient[web.Request, web.Application]
    endpoint: McpEndpoint
    authenticator: FakeAuthenticator
    policy: FakePolicySource
    backend: FakeBackend
    observer: RecordingObserver
    metrics: Metrics

    @property
    def url(self) -> str:
        return str(self.server.make_url(self.config.mcp_path))

    async def post(
        self,
        body: bytes | Mapping[str, Any] | list[Any],
        headers: Mapping[str, str],
        *,
        path: str | None = None,
    ) -> Any:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        return await self.client.post(
            path or self.config.mcp_path, data=data, headers=dict(headers)
        )

    async def call_tool(
        self, name: str, arguments: Mapping[str, Any] | None = None, **headers: str
    ) -> Any:
        body = modern_request("tools/call", 7, {"name": name, "arguments": dict(arguments or {})})
        return await self.post(body, modern_headers("tools/call", name, **headers))


async def start_gateway(
    aiohttp_server: ServerFactory,
    aiohttp_client: ClientFactory,
    *,
    config: Config | None = None,
    tokens: Mapping[str, Principal] | None = None,
    prm: bool = True,
    observer: Observer | None = None,
    **limits: Any,
) -> Gateway:
    """Serve the front door with fakes on 127.0.0.1 (ephemeral port)."""
    config = config or harness_config(**limits)
    authenticator = FakeAuthenticator(tokens if tokens is not None else default_tokens())
    policy = FakePolicySource(default_policy())
    backend = FakeBackend()
    recorder = RecordingObserver()
    metrics = Metrics()
    endpoint = McpEndpoint(
        config=config,
        authenticator=authenticator,
        policy=policy,
        backend=backend,
        limiter=MemoryRateLimiter(),
        observer=recorder if observer is None else _Both(recorder, observer),
        metrics=metrics,
    )
    app = web.Application()
    add_mcp_routes(app, endpoint, config=config, prm_document=_prm(config) if prm else None)
    app[MCP_LANE] = config.mcp_path  # as gateway/app/public.py marks it with an observer wired
    # The production listener (connection bounds, no decompression, the gateway's own answers
    # to malformed HTTP), with handler_cancellation=True as gateway/app/lifecycle.py runs it.
    server = ListenerTestServer(app, limits=ListenerLimits.from_config(config), metrics=metrics)
    client = await aiohttp_client(server)
    return Gateway(
        config, server, client, endpoint, authenticator, policy, backend, recorder, metrics
    )


class ListenerTestServer(TestServer):
    """aiohttp's TestServer on 127.0.0.1, serving through the gateway's ListenerRunner."""

    def __init__(
        self, app: web.Application, *, limits: ListenerLimits, metrics: Metrics | None = None
    ) -> None:
        super().__init__(app, host="127.0.0.1", port=0)
        self._limits = limits
        self._metrics = metrics

    async def _make_runner(self, **kwargs: Any) -> BaseRunner:
        return ListenerRunner(self.app, limits=self._limits, metrics=self._metrics, **kwargs)


class _Both:
    """Fan one request's events out to the recording observer and a real one."""

    def __init__(self, first: Observer, second: Observer) -> None:
        self._observers = (first, second)

    def request_started(self, ctx: RequestContext) -> None:
        for observer in self._observers:
            observer.request_started(ctx)

    def request_finished(self, ctx: RequestContext) -> None:
        for observer in self._observers:
            observer.request_finished(ctx)


def _prm(config: Config) -> Callable[[], dict[str, Any]]:
    document = {
        "resource": config.resource,
        "authorization_servers": [config.issuer.url],
        "scopes_supported": ["mcp:access"],
        "bearer_methods_supported": ["header"],
        "resource_name": config.server.resource_name,
    }
    assert PRM_URL.endswith(config.prm_path)
    return lambda: document
