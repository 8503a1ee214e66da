"""The production gateway in front of a JWT-only development issuer (Entra-like), from one call.

``async with jwt_stack(tmp_path, aiohttp_server, monkeypatch, ...) as stack`` is
:func:`tests.support.live_stack.live_stack` with a :class:`~gateway.dev.dev_issuer.DevIssuer` that
issues RFC 9068 JWT access tokens and has **no** introspection endpoint, and an ``issuer:`` with
``tokens: jwt`` and no client credentials. ``issuer=`` keys are merged into that ``issuer:``.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from gateway.app import GatewayServer
from gateway.config import load_config
from gateway.dev.dev_issuer import DevIssuer
from gateway.wiring.production import build_services
from tests.support.live_stack import LiveStack, ServerFactory, live_stack

__all__ = [
    "assert_invalid_token",
    "jwt_stack",
    "metric",
    "parse_challenge",
    "readyz",
    "started_gateway",
]


@contextlib.asynccontextmanager
async def jwt_stack(
    tmp_path: Path,
    aiohttp_server: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
    *,
    issuer: Mapping[str, Any] | None = None,
    gateway: Mapping[str, Any] | None = None,
    dev: DevIssuer | None = None,
    policy: str | None = None,
    ready_timeout_s: float = 10.0,
    wait_ready: bool = True,
) -> AsyncIterator[LiveStack]:
    dev = dev or DevIssuer(token_format="jwt", introspection=False)
    section = {"tokens": "jwt", "client_id": None, "client_secret": None, **(issuer or {})}
    async with live_stack(
        tmp_path,
        aiohttp_server,
        monkeypatch,
        issuer=dev,
        gateway={"issuer": section, **(gateway or {})},
        ready_timeout_s=ready_timeout_s,
        wait_ready=wait_ready,
        **({"policy": policy} if policy is not None else {}),
    ) as stack:
        yield stack


def parse_challenge(header: str) -> dict[str, str]:
    assert header.startswith("Bearer "), header
    return dict(re.findall(r'([A-Za-z_]+)="([^"]*)"', header))


def assert_invalid_token(
    stack: LiveStack, status: int, headers: Mapping[str, str], text: str
) -> None:
    """The ``invalid_token`` row exactly: 401, the RFC 6750 challenge, JSON-RPC -31401."""
    assert status == 401, text
    assert headers["Cache-Control"] == "no-store"
    params = parse_challenge(headers["WWW-Authenticate"])
    assert params["error"] == "invalid_token"
    assert params["error_description"] == "Invalid or expired access token"
    assert params["resource_metadata"] == stack.config.prm_url
    body = json.loads(text)
    assert body["error"]["code"] == -31401
    assert body["error"]["message"] == "Invalid or expired access token"


async def metric(stack: LiveStack, name: str, **labels: str) -> float:
    """One sample from the gateway's ``/metrics`` (0 when absent)."""
    async with stack.session.get(stack.server.ops_url + "/metrics") as response:
        text = await response.text()
    wanted = ",".join(f'{k}="{v}"' for k, v in labels.items())
    series = f"mcp_gateway_{name}" + (f"{{{wanted}}}" if wanted else "")
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


@contextlib.asynccontextmanager
async def started_gateway(
    config_path: Path,
) -> AsyncIterator[tuple[GatewayServer, aiohttp.ClientSession]]:
    """The production wiring for ``config_path``, started but *not* waited for (readiness is
    what the test looks at)."""
    config = load_config(config_path)
    server = GatewayServer(config, build_services(config))
    await server.start()
    session = aiohttp.ClientSession()
    try:
        yield server, session
    finally:
        await session.close()
        await server.stop()


async def readyz(server: GatewayServer, session: aiohttp.ClientSession) -> tuple[int, Any]:
    async with session.get(server.ops_url + "/readyz") as response:
        return response.status, await response.json()
