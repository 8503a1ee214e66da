"""The production gateway with a real development issuer and a real upstream, from one call.

``async with live_stack(tmp_path, aiohttp_server, monkeypatch, ...) as stack`` writes a
``gateway.yaml`` (the base below, deep-merged with ``gateway=``) and a policy file, starts the
:class:`~gateway.dev.dev_issuer.DevIssuer` (RFC 7662 over HTTP, ``client_secret_basic``), the
upstream (a :class:`~tests.support.upstreams.ModernUpstream` unless another is passed) and the
gateway exactly as ``mcp-gateway serve`` wires it (:func:`tests.support.wired.wired_gateway`).

A test asks for the ``make_stack`` fixture (:class:`MakeStack`, tests/conftest.py) rather than for
those three: ``async with make_stack(upstream=...) as stack``, and ``make_stack.of(jwt_stack,
...)`` for the other stacks, which take the same three first.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import pytest
import yaml
from aiohttp.test_utils import TestServer

from gateway.app import GatewayServer
from gateway.config import Config
from gateway.dev.dev_issuer import DevIssuer
from tests.support.mcp_client import LEGACY, MODERN, McpTestClient, modern_meta
from tests.support.policy import policy_text
from tests.support.upstreams import LegacyUpstream, ModernUpstream
from tests.support.wired import wired_gateway

__all__ = [
    "LEGACY",
    "MODERN",
    "POLICY",
    "LiveStack",
    "MakeStack",
    "ServerFactory",
    "audit_events",
    "issuer_entries",
    "live_stack",
    "modern_meta",
    "other_issuer",
    "peer_section",
]

SERVICE = "service-secret"
GATEWAY_SECRET = "live-stack-introspection-secret"
OTHER_SECRET = "other-introspection-secret"
POLICY = policy_text(tools={"echo": "tools:echo"})

ServerFactory = Callable[..., Awaitable[TestServer]]
Upstream = ModernUpstream | LegacyUpstream


@dataclass
class LiveStack(McpTestClient):
    server: GatewayServer
    config: Config
    issuer: DevIssuer
    upstream: Any  # Upstream, or None with backend_url (typed loosely: tests use its recorder)
    session: aiohttp.ClientSession
    config_path: Path

    def token(self, scopes: str = "mcp:access tools:echo", sub: str = "erin", **kw: Any) -> str:
        return self.issuer.mint_token(sub=sub, scopes=scopes, audience=self.config.resource, **kw)

    @property
    def mcp_url(self) -> str:
        return self.server.mcp_url

    async def revoke(self, token: str, admin: str) -> tuple[int, str]:
        """``POST /admin/revoke`` of ``token`` on the ops listener, with the admin token
        ``admin``: the answer's status and body."""
        async with self.session.post(
            self.server.ops_url + "/admin/revoke",
            json={"token": token},
            headers={"Authorization": f"Bearer {admin}"},
        ) as response:
            return response.status, await response.text()


def _merge(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        elif value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def _with_issuer_url(value: Any, url: str) -> Any:
    if isinstance(value, str):
        return value.replace("{issuer_url}", url)
    if isinstance(value, list):
        return [_with_issuer_url(item, url) for item in value]
    if isinstance(value, dict):
        return {key: _with_issuer_url(item, url) for key, item in value.items()}
    return value


@contextlib.asynccontextmanager
async def live_stack(
    tmp_path: Path,
    aiohttp_server: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
    *,
    upstream: Upstream | None = None,
    policy: str = POLICY,
    gateway: Mapping[str, Any] | None = None,
    issuer: DevIssuer | None = None,
    backend_url: str | None = None,
    ready_timeout_s: float = 10.0,
    backends: Mapping[str, Mapping[str, Any]] | None = None,
    wait_ready: bool = True,
    prepare: Callable[[Path], Awaitable[None]] | None = None,
) -> AsyncIterator[LiveStack]:
    """Start issuer, upstream and gateway; ``gateway`` keys override the base (None deletes).
    ``{issuer_url}`` in any string of ``gateway`` becomes the started issuer's URL.

    ``issuer``: a :class:`DevIssuer` to use; one that is already running (e.g. another stack's,
    so two gateways accept the same tokens) is left running.

    ``backend_url`` points the gateway at an upstream the test runs itself (e.g. the official
    SDK's server, :mod:`tests.support.sdk_upstream`); ``stack.upstream`` is then None.
    ``backends``: a ``backends:`` section (name -> settings, the test's own upstreams) instead
    of ``backend:``; ``stack.upstream`` is then None. ``wait_ready=False`` yields as soon as the
    listeners are up (a gateway whose readiness needs a backend that is down).
    ``prepare`` is awaited with the written ``gateway.yaml`` before the gateway starts (e.g. to
    run ``mcp-gateway catalog pin`` against the started upstream).
    """
    dev = issuer or DevIssuer()
    # An issuer already running (shared with another gateway in the test) is the caller's to stop.
    owned = not _running(dev)
    if owned:
        await dev.start()
    dev.register_client("mcp-gateway", GATEWAY_SECRET, can_introspect=True)
    if backends is not None:
        backend_url = "http://127.0.0.1:9/unused"  # replaced by the backends: section below
    if backend_url is None:
        upstream = upstream if upstream is not None else ModernUpstream()
        backend_url = str((await aiohttp_server(upstream.app())).make_url("/mcp"))
    monkeypatch.setenv("LIVE_STACK_GW_SECRET", GATEWAY_SECRET)
    monkeypatch.setenv("LIVE_STACK_SERVICE", SERVICE)
    (tmp_path / "policy.yaml").write_text(policy)
    base: dict[str, Any] = {
        "resource": "https://mcp.example.test/mcp",
        "listen": {"host": "127.0.0.1", "port": 0},
        "ops_listen": {"host": "127.0.0.1", "port": 0},
        "issuer": {
            "url": dev.url,
            "client_id": "mcp-gateway",
            "client_secret": {"env": "LIVE_STACK_GW_SECRET"},
            "allow_insecure_http": True,
        },
        "backend": {
            "url": backend_url,
            "allow_insecure_http": True,
            "credential": {"type": "bearer", "token": {"env": "LIVE_STACK_SERVICE"}},
        },
        "policy": "policy.yaml",
        "audit": {"sink": "off"},
    }
    if backends is not None:
        del base["backend"]
        base["backends"] = {name: dict(settings) for name, settings in backends.items()}
    path = tmp_path / "gateway.yaml"
    merged = _with_issuer_url(_merge(base, gateway or {}), dev.url)
    path.write_text(yaml.safe_dump(merged, sort_keys=False))
    try:
        if prepare is not None:
            await prepare(path)
        async with wired_gateway(path, ready_timeout_s=ready_timeout_s, wait_ready=wait_ready) as (
            server,
            session,
        ):
            yield LiveStack(server, server.config, dev, upstream, session, path)
    finally:
        if owned:
            await dev.stop()


def _running(issuer: DevIssuer) -> bool:
    try:
        return bool(issuer.url)
    except RuntimeError:  # not started
        return False


@contextlib.asynccontextmanager
async def other_issuer(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[DevIssuer]:
    """A second development issuer, started, at which the gateway's client ``mcp-gateway`` may
    introspect with the secret in ``$OTHER_SECRET``; stopped on leaving."""
    other = DevIssuer()
    await other.start()
    try:
        other.register_client("mcp-gateway", OTHER_SECRET, can_introspect=True)
        monkeypatch.setenv("OTHER_SECRET", OTHER_SECRET)
        yield other
    finally:
        await other.stop()


def issuer_entries(other: DevIssuer) -> tuple[dict[str, Any], dict[str, Any]]:
    """``issuers:`` entries for the live stack's own issuer and :func:`other_issuer`'s."""
    first = {
        "url": "{issuer_url}",
        "client_id": "mcp-gateway",
        "client_secret": {"env": "LIVE_STACK_GW_SECRET"},
        "allow_insecure_http": True,
    }
    second = {
        "url": other.url,
        "client_id": "mcp-gateway",
        "client_secret": {"env": "OTHER_SECRET"},
        "allow_insecure_http": True,
    }
    return first, second


def audit_events(stack: LiveStack) -> list[dict[str, Any]]:
    """The events of the stack's audit file (``audit: {sink: file}``), none before the first."""
    path = stack.config.audit.path
    assert path is not None
    if not Path(path).exists():
        return []
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line]


def peer_section(
    monkeypatch: pytest.MonkeyPatch, url: str, env: str, secret: str, **more: Any
) -> dict[str, Any]:
    """The configuration of a peer service the gateway asks (a guardrail processor, a decision
    point) on loopback: ``url``, plain HTTP allowed, a 0.5 s timeout, and a bearer credential
    ``secret`` read from the environment variable ``env`` (set here); ``more`` keys override."""
    monkeypatch.setenv(env, secret)
    return {
        "url": url,
        "allow_insecure_http": True,
        "timeout_s": 0.5,
        "credential": {"type": "bearer", "token": {"env": env}},
        **more,
    }


Made = TypeVar("Made")


@dataclass(frozen=True)
class MakeStack:
    """The ``make_stack`` fixture (tests/conftest.py): a stack with the test's ``tmp_path``,
    ``aiohttp_server`` and ``monkeypatch``, the keywords left to the test.
    ``make_stack(upstream=...)`` is :func:`live_stack`'s; ``make_stack.of(jwt_stack, ...)``
    any other stack's of the same three first parameters."""

    tmp_path: Path
    aiohttp_server: ServerFactory
    monkeypatch: pytest.MonkeyPatch

    def __call__(self, **keywords: Any) -> contextlib.AbstractAsyncContextManager[LiveStack]:
        return live_stack(self.tmp_path, self.aiohttp_server, self.monkeypatch, **keywords)

    def of(self, stack: Callable[..., Made], **keywords: Any) -> Made:
        return stack(self.tmp_path, self.aiohttp_server, self.monkeypatch, **keywords)
