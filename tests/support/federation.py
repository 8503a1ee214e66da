"""Two real upstreams behind one production gateway (``backends:``), and clients of both eras.

``async with federated_stack(tmp_path, aiohttp_server, monkeypatch) as fed`` starts:

* ``docs``: a :class:`~tests.support.upstreams.ModernUpstream` (2026-07-28, JSON replies) that
  accepts only the static bearer ``DOCS_SECRET``;
* ``tickets``: a :class:`~tests.support.upstreams.LegacyUpstream` (2025-06-18, session + SSE)
  that accepts only tokens its own client-credentials :class:`TokenServer` issued;
* the development issuer and the gateway exactly as ``mcp-gateway serve`` wires it
  (:func:`tests.support.live_stack.live_stack` with a ``backends:`` section).

Default prefixes (``docs__``, ``tickets__``); ``backends=`` merges extra settings per backend.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.live_stack import LiveStack, ServerFactory, live_stack
from tests.support.policy import policy_text
from tests.support.upstreams import LegacyUpstream, ModernUpstream, TokenServer, echo_tool

__all__ = [
    "DOCS_SECRET",
    "POLICY",
    "TICKETS_CLIENT_SECRET",
    "Federation",
    "federated_stack",
    "scopes",
]

DOCS_SECRET = "docs-service-secret"
TICKETS_CLIENT_SECRET = "tickets-client-secret"
POLICY = policy_text(tools={"docs__*": "docs:read", "tickets__*": "tickets:write"})
ALL_SCOPES = "mcp:access docs:read tickets:write"


def scopes(*extra: str) -> str:
    return " ".join(("mcp:access", *extra))


@dataclass
class Federation:
    stack: LiveStack
    docs: ModernUpstream
    tickets: LegacyUpstream
    tokens: TokenServer
    """The tickets backend's token endpoint (client credentials)."""

    def token(self, granted: str = ALL_SCOPES, **kw: Any) -> str:
        return self.stack.token(granted, **kw)

    async def modern(
        self, token: str, method: str, params: Mapping[str, Any] | None = None, **kw: Any
    ) -> tuple[int, dict[str, str], Any]:
        status, headers, text = await self.stack.modern(token, method, params, **kw)
        return status, headers, json.loads(text) if text else None

    async def modern_call(
        self, token: str, tool: str, arguments: Mapping[str, Any] | None = None
    ) -> tuple[int, dict[str, str], Any]:
        params = {"name": tool, "arguments": dict(arguments or {})}
        return await self.modern(token, "tools/call", params, name=tool)

    async def legacy(
        self, token: str, method: str, params: Mapping[str, Any] | None = None, rid: int = 7
    ) -> tuple[int, Any]:
        """One request of an initialized 2025-06-18 client (the gateway keeps no session)."""
        status, _, text = await self.stack.legacy(token, method, params, rid=rid)
        return status, json.loads(text) if text else None

    async def legacy_initialize(self, token: str) -> None:
        await self.stack.legacy_initialize(token)

    async def listed(self, token: str | None = None, era: str = "modern") -> list[str]:
        """Every exposed tool name, all pages followed."""
        token = token or self.token()
        names: list[str] = []
        cursor: str | None = None
        for _ in range(100):
            params = {"cursor": cursor} if cursor else {}
            if era == "modern":
                status, _, envelope = await self.modern(token, "tools/list", params)
            else:
                status, envelope = await self.legacy(token, "tools/list", params)
            assert status == 200, envelope
            result = envelope["result"]
            names += [tool["name"] for tool in result["tools"]]
            cursor = result.get("nextCursor")
            if cursor is None:
                return names
        raise AssertionError("tools/list never ended")

    async def readyz(self) -> tuple[int, dict[str, Any]]:
        async with self.stack.session.get(self.stack.server.ops_url + "/readyz") as response:
            return response.status, await response.json()

    async def metrics(self) -> str:
        async with self.stack.session.get(self.stack.server.ops_url + "/metrics") as response:
            return await response.text()


@contextlib.asynccontextmanager
async def federated_stack(
    tmp_path: Path,
    aiohttp_server: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
    *,
    docs: ModernUpstream | None = None,
    tickets: LegacyUpstream | None = None,
    backends: Mapping[str, Mapping[str, Any]] | None = None,
    policy: str = POLICY,
    gateway: Mapping[str, Any] | None = None,
    wait_ready: bool = True,
    tickets_url: str | None = None,
    prepare: Callable[[Path], Awaitable[None]] | None = None,
) -> AsyncIterator[Federation]:
    """Start both upstreams, the issuer and the gateway (see the module docstring).

    ``tickets_url`` points the tickets backend somewhere else (e.g. a closed port);
    ``prepare``: as for :func:`~tests.support.live_stack.live_stack`.
    """
    docs = docs or ModernUpstream(
        accepted={DOCS_SECRET}, tools=[echo_tool("search"), echo_tool("echo")]
    )
    tickets = tickets or LegacyUpstream(
        accepted=set(), tools=[echo_tool("create"), echo_tool("echo")]
    )
    tokens = TokenServer(
        client_id="gw-tickets", client_secret=TICKETS_CLIENT_SECRET, grant_to=tickets.accepted
    )
    token_server = await aiohttp_server(tokens.app())
    tokens.issuer = str(token_server.make_url("")).rstrip("/")
    docs_url = str((await aiohttp_server(docs.app())).make_url("/mcp"))
    if tickets_url is None:
        tickets_url = str((await aiohttp_server(tickets.app())).make_url("/mcp"))
    monkeypatch.setenv("FED_DOCS_TOKEN", DOCS_SECRET)
    monkeypatch.setenv("FED_TICKETS_SECRET", TICKETS_CLIENT_SECRET)
    settings: dict[str, dict[str, Any]] = {
        "docs": {
            "url": docs_url,
            "allow_insecure_http": True,
            "credential": {"type": "bearer", "token": {"env": "FED_DOCS_TOKEN"}},
        },
        "tickets": {
            "url": tickets_url,
            "allow_insecure_http": True,
            "credential": {
                "type": "client_credentials",
                "client_id": "gw-tickets",
                "client_secret": {"env": "FED_TICKETS_SECRET"},
                "token_endpoint": tokens.issuer + "/token",
            },
        },
    }
    for name, extra in (backends or {}).items():
        settings.setdefault(name, {}).update(extra)
    async with live_stack(
        tmp_path,
        aiohttp_server,
        monkeypatch,
        policy=policy,
        gateway=gateway,
        backends=settings,
        wait_ready=wait_ready,
        prepare=prepare,
    ) as stack:
        yield Federation(stack, docs, tickets, tokens)
