"""The production gateway with relaying of 2026-07-28 input rounds configured, for tests.

``async with input_stack(tmp_path, aiohttp_server, monkeypatch) as stack`` is a
:func:`~tests.support.live_stack.live_stack` (real development issuer, real upstream, production
wiring) whose upstream is an :class:`~tests.support.input_upstream.InputUpstream`, whose
``gateway.yaml`` has an ``input_requests`` section with the given seal keys (as ``{env: ...}``
references) and whose audit trail goes to ``stack_dir/audit.jsonl``. :func:`call` sends one raw
2026-07-28 ``tools/call`` the way the spec text describes (basic/patterns/mrtr.mdx), retry
members included.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from gateway.config import SealKey
from gateway.dev.dev_issuer import DevIssuer
from gateway.protocol.sealed_state import Claims, Sealer
from tests.support.input_upstream import INPUT_TOOLS, InputUpstream
from tests.support.live_stack import LiveStack, ServerFactory, live_stack

__all__ = [
    "ALL_CAPS",
    "KEY_A",
    "KEY_B",
    "POLICY",
    "SCOPES",
    "SERVICE_CREDENTIAL",
    "call",
    "forge",
    "input_stack",
]

KEY_A = base64.b64encode(os.urandom(32)).decode()
KEY_B = base64.b64encode(os.urandom(32)).decode()
SCOPES = "mcp:access tools:echo tools:input"
SERVICE_CREDENTIAL: Mapping[str, Any] = {"type": "bearer", "token": {"env": "LIVE_STACK_SERVICE"}}
"""The credential ``live_stack`` gives its upstreams (for ``backends:`` entries)."""
ALL_CAPS: Mapping[str, Any] = {
    "elicitation": {"form": {}, "url": {}},
    "sampling": {"tools": {}},
    "roots": {},
}
POLICY = "version: 1\nbaseline_scopes: [mcp:access]\ntools:\n  echo: {scopes: [tools:echo]}\n" + (
    "".join(f"  {tool['name']}: {{scopes: [tools:input]}}\n" for tool in INPUT_TOOLS)
)


@contextlib.asynccontextmanager
async def input_stack(
    directory: Path,
    aiohttp_server: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
    *,
    keys: Mapping[str, str] | None = None,
    seal_key_id: str | None = None,
    settings: Mapping[str, Any] | None = None,
    upstream: InputUpstream | None = None,
    issuer: DevIssuer | None = None,
    backend_url: str | None = None,
    policy: str = POLICY,
    enabled: bool = True,
    backends: Mapping[str, Mapping[str, Any]] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> AsyncIterator[LiveStack]:
    """``keys``: key id -> base64 key (default ``{"a": KEY_A}``); ``settings``: more
    ``input_requests`` keys; ``enabled=False`` leaves the section out entirely; ``backends``:
    a ``backends:`` section (name -> settings) instead of the one upstream; ``extra``: more
    ``gateway.yaml`` keys."""
    os.makedirs(directory, exist_ok=True)
    section: dict[str, Any] = {"seal_keys": []}
    for key_id, key in (keys or {"a": KEY_A}).items():
        env = f"INPUT_STACK_KEY_{key_id.upper().replace('-', '_')}"
        monkeypatch.setenv(env, key)
        section["seal_keys"].append({"id": key_id, "key": {"env": env}})
    if seal_key_id is not None:
        section["seal_key_id"] = seal_key_id
    section.update(settings or {})
    gateway: dict[str, Any] = {
        "audit": {"sink": "file", "path": str(directory / "audit.jsonl")},
        "policy_poll_s": 0,
    }
    if enabled:
        gateway["input_requests"] = section
    gateway.update(extra or {})
    if upstream is None and backend_url is None and backends is None:
        upstream = InputUpstream()
    async with live_stack(
        directory,
        aiohttp_server,
        monkeypatch,
        upstream=upstream,
        policy=policy,
        gateway=gateway,
        issuer=issuer,
        backend_url=backend_url,
        backends=backends,
    ) as stack:
        yield stack


async def call(
    stack: LiveStack,
    token: str,
    tool: str,
    arguments: Mapping[str, Any] | None = None,
    *,
    state: Any = None,
    responses: Any = None,
    capabilities: Mapping[str, Any] | None = None,
    rid: int | str = 1,
    extra: Mapping[str, Any] | None = None,
) -> tuple[int, dict[str, str], dict[str, Any]]:
    """One modern ``tools/call``; ``state`` / ``responses`` are sent when not None."""
    params: dict[str, Any] = {"name": tool, "arguments": dict(arguments or {})}
    if state is not None:
        params["requestState"] = state
    if responses is not None:
        params["inputResponses"] = responses
    params.update(extra or {})
    status, headers, text = await stack.modern(
        token,
        "tools/call",
        params,
        name=tool,
        capabilities=ALL_CAPS if capabilities is None else capabilities,
        rid=rid,
    )
    return status, headers, json.loads(text)


def forge(stack: LiveStack, claims: Claims, *, key_id: str = "a", key: str = KEY_A) -> str:
    """A state sealed with the production :class:`Sealer` (any key, any claims) for ``stack``."""
    settings = stack.config.input_requests
    sealer = Sealer(
        (SealKey(key_id, base64.b64decode(key)),),
        key_id,
        resource=stack.config.resource,
        max_state_bytes=settings.max_state_bytes,
    )
    return sealer.seal(claims)
