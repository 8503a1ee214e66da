"""The gateway in front of the official SDK's ``MCPServer`` (one, or two federated), and the SDK
clients and waits the subscription and surface tests of both protocol eras share."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from mcp import types
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.support.live_stack import LiveStack, ServerFactory, live_stack
from tests.support.sdk_upstream import SdkUpstream, sdk_upstream

__all__ = [
    "Heard",
    "backend_settings",
    "eventually",
    "federated_sdk_stack",
    "legacy_client",
    "listeners",
    "next_event",
    "quiet",
    "sdk_client",
    "sdk_session",
    "sdk_stack",
    "sdk_stack_fixture",
]


@contextlib.asynccontextmanager
async def sdk_stack(
    tmp_path: Path,
    aiohttp_server: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
    *,
    policy: str,
    gateway: Mapping[str, Any] | None = None,
) -> AsyncIterator[tuple[LiveStack, SdkUpstream]]:
    """The gateway (``gateway`` keys over the base) in front of one SDK server with prompts,
    resources and a subscription bus."""
    async with (
        sdk_upstream(surface=True) as sdk,
        live_stack(
            tmp_path,
            aiohttp_server,
            monkeypatch,
            backend_url=sdk.url,
            policy=policy,
            gateway=gateway,
        ) as live,
    ):
        yield live, sdk


def sdk_stack_fixture(policy: str, gateway: Mapping[str, Any] | None = None) -> Any:
    """A ``stack`` fixture for a test module: :func:`sdk_stack` with ``policy`` and ``gateway``,
    yielding ``(live, sdk)``; ``stack = sdk_stack_fixture(POLICY, {...})`` at module level."""

    @pytest.fixture
    async def stack(
        tmp_path: Path, aiohttp_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
    ) -> AsyncIterator[tuple[LiveStack, SdkUpstream]]:
        async with sdk_stack(
            tmp_path, aiohttp_server, monkeypatch, policy=policy, gateway=gateway
        ) as pair:
            yield pair

    return stack


def backend_settings(url: str, env: str) -> dict[str, Any]:
    """A ``backends:`` entry for an SDK server, its bearer service token in ``$env``."""
    return {
        "url": url,
        "allow_insecure_http": True,
        "credential": {"type": "bearer", "token": {"env": env}},
    }


@contextlib.asynccontextmanager
async def federated_sdk_stack(
    tmp_path: Path,
    aiohttp_server: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
    *,
    policy: str,
    gateway: Mapping[str, Any] | None = None,
) -> AsyncIterator[tuple[LiveStack, SdkUpstream, SdkUpstream]]:
    """The gateway in front of two SDK servers, backends ``docs`` and ``wiki``."""
    monkeypatch.setenv("SURFACE_DOCS", "docs-service-token")
    monkeypatch.setenv("SURFACE_WIKI", "wiki-service-token")
    async with (
        sdk_upstream(surface=True) as docs,
        sdk_upstream(surface=True) as wiki,
        live_stack(
            tmp_path,
            aiohttp_server,
            monkeypatch,
            policy=policy,
            backends={
                "docs": backend_settings(docs.url, "SURFACE_DOCS"),
                "wiki": backend_settings(wiki.url, "SURFACE_WIKI"),
            },
            gateway=gateway,
        ) as live,
    ):
        yield live, docs, wiki


@contextlib.asynccontextmanager
async def sdk_session(
    url: str, token: str, mode: str = "auto", **options: Any
) -> AsyncIterator[Client]:
    """A connected SDK client of the gateway at ``url`` with ``token`` (``mode``: ``auto`` or
    ``legacy``; ``options`` for :class:`mcp.client.Client`)."""
    async with (
        create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode, **options) as client,
    ):
        yield client


def sdk_client(live: LiveStack, token: str, mode: str = "auto") -> tuple[Any, Client]:
    """An SDK client of the gateway with ``token`` (``mode``: ``auto`` or ``legacy``)."""
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    return http, Client(streamable_http_client(live.server.mcp_url, http_client=http), mode=mode)


class Heard:
    """The notifications an SDK client's message handler received."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[Any] = asyncio.Queue()

    async def __call__(self, message: Any) -> None:
        if isinstance(message, types.ServerNotification):
            await self.queue.put(message)

    async def next(self, within: float = 10.0) -> Any:
        async with asyncio.timeout(within):
            return await self.queue.get()

    async def quiet(self, seconds: float = 0.5) -> None:
        with pytest.raises(TimeoutError):
            await self.next(seconds)


def legacy_client(live: LiveStack, token: str, heard: Heard | None = None) -> tuple[Any, Client]:
    """A 2025 SDK client (``mode="legacy"``: a session and its GET stream) with ``token``."""
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    transport = streamable_http_client(live.server.mcp_url, http_client=http)
    return http, Client(transport, mode="legacy", message_handler=heard)


async def next_event(sub: Any, within: float = 5.0) -> Any:
    """The next notification of a 2026 listen ``sub``."""
    async with asyncio.timeout(within):
        return await sub.__anext__()


async def quiet(sub: Any, seconds: float = 0.5) -> None:
    """Nothing arrives on ``sub`` for ``seconds``."""
    with pytest.raises(TimeoutError):
        await next_event(sub, seconds)


def listeners(sdk: SdkUpstream) -> int:
    """Listen streams open at the SDK server, besides the gateway's own catalog listener."""
    return len(sdk.bus._listeners) - 1


async def eventually(check: Callable[[], object], within: float = 5.0) -> None:
    """Wait until ``check()`` holds, failing after ``within`` seconds."""
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, "condition never held"
        await asyncio.sleep(0.05)
