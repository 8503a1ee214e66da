"""MCP era detection toward one upstream (2026-07-28 basic/versioning.mdx §Era detection).

:meth:`EraDetector.detect`: a 2026-07-28 ``server/discover`` first; a result listing
``2026-07-28``, or a recognised modern error (-32020/-32021/-32022 naming 2026-07-28), marks the
upstream modern. Any other answer falls back to ``initialize`` with 2025-11-25, then 2025-06-18,
then 2025-03-26, followed by ``notifications/initialized`` (:meth:`EraDetector.initialize`,
also used to re-create an expired legacy session). What it found is a :class:`LinkState`, kept by
:class:`~gateway.backend.upstream.link.UpstreamLink` until a failure asks to detect again.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from gateway import __version__
from gateway.backend.upstream.rpc import Reply, UpstreamFault, encode_json
from gateway.errors import JsonRpcId
from gateway.observability.logging import get_logger
from gateway.protocol.tasks_extension import declares_tasks
from gateway.protocol.versions import LEGACY, MODERN
from gateway.seams import Era

__all__ = [
    "CLIENT_INFO",
    "LEGACY_VERSIONS",
    "MODERN_VERSION",
    "EraDetector",
    "LinkState",
    "Send",
    "modern_meta",
]

MODERN_VERSION: Final = MODERN
LEGACY_VERSIONS: Final = LEGACY
"""Tried in this order by ``initialize``; a counter-offer is accepted if it is in this list."""
CLIENT_INFO: Final = {"name": "mcp-resource-gateway", "version": __version__}
_MODERN_ERRORS: Final = frozenset({-32020, -32021, -32022})
_MAX_SESSION_ID: Final = 1024
# Faults that say nothing about the upstream's era: detection stops instead of falling back.
_NOT_AN_ERA_ANSWER: Final = frozenset(
    {"timeout", "connection", "credential", "unauthorized", "too_large", "redirect"}
)

_log = get_logger("gateway.backend.upstream")


@dataclass(frozen=True, slots=True)
class LinkState:
    """What era detection found; replaced (never mutated) on re-detection."""

    era: Era
    version: str
    session_id: str | None = None
    generation: int = 0
    tools_list_changed: bool = False
    """The upstream advertised ``capabilities.tools.listChanged: true`` (discover/initialize)."""
    offers: frozenset[str] = frozenset()
    """Which of ``prompts``, ``resources``, ``completions`` the upstream advertised."""
    subscribe: bool = False
    """The upstream advertised ``capabilities.resources.subscribe: true``."""
    list_changed: frozenset[str] = frozenset()
    """Of ``prompts``, ``resources``: the kinds whose ``listChanged: true`` it advertised (tools:
    :attr:`tools_list_changed`)."""
    tasks: bool = False
    """A 2026-07-28 upstream listed the tasks extension (``io.modelcontextprotocol/tasks``) in
    ``capabilities.extensions`` (never on the legacy revisions, where it is not defined)."""


def modern_meta(
    progress_token: str | None = None, capabilities: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """2026-07-28 basic/index.mdx §_meta: the keys every modern request carries.

    ``capabilities`` is what the gateway declares for this request: on a ``tools/call`` the
    client's schema-known capabilities (:func:`gateway.protocol.capabilities.known_capabilities`),
    else none (the gateway's own ``server/discover`` and ``tools/list`` need none).
    """
    meta: dict[str, Any] = {
        "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
        "io.modelcontextprotocol/clientCapabilities": dict(capabilities or {}),
        "io.modelcontextprotocol/clientInfo": dict(CLIENT_INFO),
    }
    if progress_token is not None:
        meta["progressToken"] = progress_token
    return meta


Send = Callable[[bytes, dict[str, str], JsonRpcId | None, float], Awaitable[Reply]]
"""``(body, headers, request id, deadline) -> reply``: one request with the link's credential,
retried once on 401."""


class EraDetector:
    """Finds the era one upstream speaks, through the link's ``send``."""

    def __init__(
        self,
        send: Send,
        *,
        next_id: Callable[[], int],
        headers: Callable[[LinkState, str], dict[str, str]],
        base_headers: Mapping[str, str],
        timeout_s: float,
        backend: str,
    ) -> None:
        self._send = send
        self._next_id = next_id
        self._headers = headers
        self._base_headers = base_headers
        self._timeout_s = timeout_s
        self._backend = backend
        self._generation = itertools.count(1)

    async def detect(self, deadline: float) -> LinkState:
        """``server/discover``, else the ``initialize`` ladder (bounded by ``timeout_s``)."""
        deadline = min(deadline, time.monotonic() + self._timeout_s)
        probe = LinkState("modern", MODERN_VERSION)
        request_id = self._next_id()
        body = encode_json(
            {
                "jsonrpc": "2.0",
                "id": request_id,
                "method": "server/discover",
                "params": {"_meta": modern_meta()},
            }
        )
        try:
            reply = await self._send(
                body, self._headers(probe, "server/discover"), request_id, deadline
            )
        except UpstreamFault as fault:
            # An upstream that is down or refuses our credential is not "legacy".
            if fault.kind in _NOT_AN_ERA_ANSWER:
                raise
            reply = None
        if reply is not None and _is_modern(reply):
            state = LinkState(
                "modern",
                MODERN_VERSION,
                generation=next(self._generation),
                tools_list_changed=_lists_changes(reply.message),
                offers=_offers(reply.message),
                subscribe=_subscribes(reply.message),
                list_changed=_surface_changes(reply.message),
                tasks=declares_tasks(_capabilities(reply.message)),
            )
            _log.info(
                "backend_era_detected", backend=self._backend, era="modern", version=MODERN_VERSION
            )
            return state
        return await self.initialize(deadline)

    async def initialize(self, deadline: float) -> LinkState:
        """The legacy handshake, newest version first; a session id it mints is kept."""
        for offered in LEGACY_VERSIONS:
            request_id = self._next_id()
            body = encode_json(
                {
                    "jsonrpc": "2.0",
                    "id": request_id,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": offered,
                        "capabilities": {},
                        "clientInfo": dict(CLIENT_INFO),
                    },
                }
            )
            # The initialize request itself carries no MCP-Protocol-Version (sent only after).
            headers = dict(self._base_headers)
            try:
                reply = await self._send(body, headers, request_id, deadline)
            except UpstreamFault as fault:
                if fault.kind in _NOT_AN_ERA_ANSWER:
                    raise
                continue
            result = reply.message.get("result") if reply.message is not None else None
            if not isinstance(result, dict):
                continue
            version = result.get("protocolVersion")
            if version not in LEGACY_VERSIONS:
                continue  # a counter-offer we cannot speak; try the next version
            session_id = reply.session_id
            if session_id is not None and not _valid_session_id(session_id):
                raise UpstreamFault("garbled")
            state = LinkState(
                "legacy",
                str(version),
                session_id,
                next(self._generation),
                tools_list_changed=_lists_changes(reply.message),
                offers=_offers(reply.message),
                subscribe=_subscribes(reply.message),
                list_changed=_surface_changes(reply.message),
            )
            await self._send(
                encode_json({"jsonrpc": "2.0", "method": "notifications/initialized"}),
                self._headers(state, "notifications/initialized"),
                None,
                deadline,
            )
            _log.info(
                "backend_era_detected",
                backend=self._backend,
                era="legacy",
                version=version,
                session=session_id is not None,
            )
            return state
        raise UpstreamFault("incompatible")


def _is_modern(reply: Reply) -> bool:
    message = reply.message
    if message is None:
        return False
    result = message.get("result")
    if isinstance(result, dict):
        versions = result.get("supportedVersions")
        return isinstance(versions, list) and MODERN_VERSION in versions
    error = message.get("error")
    if isinstance(error, dict) and error.get("code") in _MODERN_ERRORS:
        data = error.get("data")
        supported = data.get("supported") if isinstance(data, dict) else None
        # A modern error that still lists 2026-07-28 means "modern, retry the request".
        return error.get("code") != -32022 or (
            isinstance(supported, list) and MODERN_VERSION in supported
        )
    return False


def _lists_changes(message: Mapping[str, Any] | None) -> bool:
    result = message.get("result") if message is not None else None
    capabilities = result.get("capabilities") if isinstance(result, dict) else None
    tools = capabilities.get("tools") if isinstance(capabilities, dict) else None
    return isinstance(tools, dict) and tools.get("listChanged") is True


SURFACE_CAPABILITIES: Final = ("prompts", "resources", "completions")


def _capabilities(message: Mapping[str, Any] | None) -> Mapping[str, Any]:
    result = message.get("result") if message is not None else None
    capabilities = result.get("capabilities") if isinstance(result, dict) else None
    return capabilities if isinstance(capabilities, dict) else {}


def _offers(message: Mapping[str, Any] | None) -> frozenset[str]:
    """The surface capabilities the upstream declared (an object value each, per the schema)."""
    capabilities = _capabilities(message)
    return frozenset(k for k in SURFACE_CAPABILITIES if isinstance(capabilities.get(k), dict))


def _subscribes(message: Mapping[str, Any] | None) -> bool:
    resources = _capabilities(message).get("resources")
    return isinstance(resources, dict) and resources.get("subscribe") is True


def _surface_changes(message: Mapping[str, Any] | None) -> frozenset[str]:
    capabilities = _capabilities(message)
    return frozenset(
        kind
        for kind in ("prompts", "resources")
        if isinstance(capabilities.get(kind), dict)
        and capabilities[kind].get("listChanged") is True
    )


def _valid_session_id(value: str) -> bool:
    # 2025-06-18 transports.mdx §Session Management: visible ASCII 0x21-0x7E only.
    return 0 < len(value) <= _MAX_SESSION_ID and all(0x21 <= ord(c) <= 0x7E for c in value)
