"""The production gateway with ``tasks:`` on, in front of a :class:`TaskUpstream`, for tests.

``async with task_stack(tmp_path, aiohttp_server, monkeypatch) as stack`` is an
:func:`~tests.support.input_stack.input_stack` (real development issuer, production wiring,
``input_requests`` keys, audit to ``audit.jsonl``) whose upstream is a
:class:`~tests.support.task_upstream.TaskUpstream` and whose ``gateway.yaml`` has a ``tasks``
section. :func:`call` creates (or calls) with the extension declared; :func:`task` sends one
``tasks/*`` request the way the extension's text describes (``Mcp-Name`` = ``taskId``);
:func:`listen` opens a ``subscriptions/listen`` naming task handles in ``taskIds``.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import json
import time
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from gateway.config import SealKey
from gateway.dev.dev_issuer import DevIssuer
from gateway.protocol.task_handle import TaskClaims, TaskHandles
from tests.support.input_stack import KEY_A, input_stack
from tests.support.live_stack import LiveStack, ServerFactory
from tests.support.mcp_client import modern_body, modern_headers
from tests.support.task_upstream import TASK_TOOLS, TASKS, TaskUpstream

__all__ = ["CAPS", "POLICY", "SCOPES", "call", "forge", "listen", "task", "task_stack"]

SCOPES = "mcp:access tools:run"
CAPS: Mapping[str, Any] = {"elicitation": {"form": {}}, "extensions": {TASKS: {}}}
"""What a task-aware client declares on every request."""
POLICY = "version: 1\nbaseline_scopes: [mcp:access]\ntools:\n" + "".join(
    f"  {tool['name']}: {{scopes: [tools:run], tasks: true}}\n" for tool in TASK_TOOLS
)


@contextlib.asynccontextmanager
async def task_stack(
    directory: Path,
    aiohttp_server: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
    *,
    upstream: TaskUpstream | None = None,
    policy: str = POLICY,
    tasks: Mapping[str, Any] | None = None,
    gateway: Mapping[str, Any] | None = None,
    issuer: DevIssuer | None = None,
    backend_url: str | None = None,
    backends: Mapping[str, Mapping[str, Any]] | None = None,
    keys: Mapping[str, str] | None = None,
    seal_key_id: str | None = None,
    inputs: Mapping[str, Any] | None = None,
) -> AsyncIterator[LiveStack]:
    """``tasks``: the ``tasks`` section (default: on, 100 ms poll interval); ``gateway``: more
    ``gateway.yaml`` keys; ``keys`` / ``seal_key_id``: the seal keys, ``inputs``: more
    ``input_requests`` keys (as for ``input_stack``)."""
    section = {"min_poll_interval_ms": 100, **(tasks or {})}
    if upstream is None and backend_url is None and backends is None:
        upstream = TaskUpstream()
    try:
        async with input_stack(
            directory,
            aiohttp_server,
            monkeypatch,
            upstream=upstream,  # type: ignore[arg-type]
            policy=policy,
            issuer=issuer,
            backend_url=backend_url,
            backends=backends,
            keys=keys,
            seal_key_id=seal_key_id,
            settings=inputs,
            extra={"tasks": section, **(gateway or {})},
        ) as stack:
            yield stack
    finally:
        if isinstance(upstream, TaskUpstream):
            await upstream.close()


async def call(
    stack: LiveStack,
    token: str,
    tool: str,
    arguments: Mapping[str, Any] | None = None,
    *,
    capabilities: Mapping[str, Any] = CAPS,
    extra: Mapping[str, Any] | None = None,
    rid: int | str = 1,
) -> tuple[int, dict[str, str], dict[str, Any]]:
    """One 2026-07-28 ``tools/call`` (by default declaring the extension)."""
    params = {"name": tool, "arguments": dict(arguments or {}), **(extra or {})}
    status, headers, text = await stack.modern(
        token, "tools/call", params, name=tool, capabilities=capabilities, rid=rid
    )
    return status, headers, json.loads(text)


async def task(
    stack: LiveStack,
    token: str,
    method: str,
    handle: str,
    *,
    responses: Mapping[str, Any] | None = None,
    capabilities: Mapping[str, Any] = CAPS,
    name: str | None = None,
    rid: int | str = 7,
) -> tuple[int, dict[str, str], bytes]:
    """One ``tasks/*`` request; ``name``: the ``Mcp-Name`` header (default: ``handle``).
    Returns the raw body (refusals are compared byte for byte)."""
    params: dict[str, Any] = {"taskId": handle}
    if method == "tasks/update":
        params["inputResponses"] = dict(responses or {})
    status, headers, text = await stack.modern(
        token,
        method,
        params,
        name=handle if name is None else name,
        capabilities=capabilities,
        rid=rid,
    )
    return status, headers, text.encode()


@contextlib.asynccontextmanager
async def listen(
    stack: LiveStack,
    token: str,
    handles: Any,
    *,
    capabilities: Mapping[str, Any] = CAPS,
    rid: int = 5,
    era: str | None = None,
) -> AsyncIterator[aiohttp.ClientResponse]:
    """A ``subscriptions/listen`` whose ``notifications.taskIds`` is ``handles`` (SEP-2663 §Task
    Status Notifications), the response left open; ``era``: another ``MCP-Protocol-Version``."""
    body = modern_body(
        "subscriptions/listen",
        {"notifications": {"taskIds": handles}},
        rid=rid,
        capabilities=capabilities,
    )
    headers = modern_headers(token, "subscriptions/listen")
    if era is not None:
        headers["MCP-Protocol-Version"] = era
    async with stack.session.post(stack.server.mcp_url, json=body, headers=headers) as response:
        yield response


def forge(stack: LiveStack, **changes: Any) -> str:
    """A handle minted with the gateway's own key for the genuine first task, but ``changes``."""
    now = int(time.time())
    claims = TaskClaims(
        backend="default",
        upstream_id="task-1",
        issuer=stack.issuer.url,
        subject="erin",
        client_id="demo-cli",
        tool="slow_compute",
        issued_at=now,
        expires_at=now + 600,
    )
    key = changes.pop("key", ("a", KEY_A))
    handles = TaskHandles(
        (SealKey(key[0], base64.b64decode(key[1])),), key[0], resource=stack.config.resource
    )
    return handles.seal(dataclasses.replace(claims, **changes))
