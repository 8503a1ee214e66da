"""Helpers for the pinned catalog's HTTP tests: the ``catalog`` commands as processes, requests
to either replica, a readiness poll."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from gateway.app import GatewayServer
from gateway.backend.federation import FederatedBackend
from gateway.backend.upstream_backend import UpstreamBackend
from tests.support.live_stack import LiveStack
from tests.support.serve_process import run_command


async def catalog_cli(
    config: Path, *args: str, env: dict[str, str] | None = None
) -> tuple[int, str, str]:
    """``mcp-gateway catalog ARGS --config CONFIG`` as a process (the upstream keeps serving);
    ``env``: its whole environment (default: this process's)."""
    return await run_command("catalog", *args, "--config", str(config), cwd=config.parent, env=env)


def pin_first(done: list[str]) -> Callable[[Path], Awaitable[None]]:
    """A ``live_stack`` ``prepare``: ``catalog pin`` (twice: the bytes must be the same)."""

    async def prepare(config: Path) -> None:
        code, out, err = await catalog_cli(config, "pin")
        assert code == 0, (out, err)
        lock = (config.parent / "catalog.lock.yaml").read_text()
        # Stable: a second pin of the same catalog writes the same bytes.
        assert (await catalog_cli(config, "pin"))[0] == 0
        assert (config.parent / "catalog.lock.yaml").read_text() == lock
        done.append(out)

    return prepare


def member(server: GatewayServer) -> UpstreamBackend:
    federation = server.services.backend
    assert isinstance(federation, FederatedBackend)
    backend = federation.member("default")
    assert isinstance(backend, UpstreamBackend)
    return backend


async def raw(
    stack: LiveStack,
    server: GatewayServer,
    method: str,
    params: dict[str, Any],
    name: str | None = None,
) -> tuple[int, dict[str, str], str]:
    """One 2026-07-28 request to ``server`` (either replica) with the stack's token."""
    original = stack.server
    stack.server = server
    try:
        return await stack.modern(stack.token(), method, params, name=name)
    finally:
        stack.server = original


async def listed(
    stack: LiveStack, server: GatewayServer, method: str, key: str
) -> dict[str, dict[str, Any]]:
    """The items of a list result by name (a template: by ``uriTemplate``)."""
    status, _, text = await raw(stack, server, method, {})
    assert status == 200, text
    field = "uriTemplate" if key == "resourceTemplates" else "name"
    return {item[field]: item for item in json.loads(text)["result"][key]}


async def names(stack: LiveStack, server: GatewayServer, method: str, key: str) -> list[str]:
    return sorted(await listed(stack, server, method, key))


async def ops(stack: LiveStack, server: GatewayServer, path: str) -> str:
    async with stack.session.get(server.ops_url + path) as response:
        return await response.text()


async def eventually(check: Callable[[], Awaitable[bool]], timeout_s: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not await check():
        if asyncio.get_running_loop().time() > deadline:
            pytest.fail("the condition never held")
        await asyncio.sleep(0.05)
