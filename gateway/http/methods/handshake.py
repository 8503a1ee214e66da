"""The legacy era's lifecycle methods, answered by the gateway itself: ``initialize``, ``ping``.

MCP 2025-06-18 basic/lifecycle.mdx and basic/utilities/ping.mdx; the 2026-07-28 revision has
neither (``server/discover`` replaces the handshake: :mod:`gateway.http.methods.listing`).

``initialize`` answers with an ``Mcp-Session-Id`` only when this caller could subscribe to a
resource or hear a ``list_changed`` on the session's GET stream; the capabilities then say so
(``resources.subscribe``, ``*.listChanged``), and otherwise stay false: never a capability the
gateway would refuse (:mod:`gateway.http.subscriptions.legacy_sessions`).
"""

from __future__ import annotations

from typing import Final

from gateway.http.methods.route_parts import RouteParts
from gateway.http.methods.surface_lists import surface_capabilities
from gateway.http.progress import ProgressRelay
from gateway.http.subscriptions.legacy_sessions import SESSION_HEADER, LegacySessions
from gateway.http.turn import Route, Turn, bounded_success, check_expiry
from gateway.protocol.messages import McpMessage
from gateway.protocol.results import initialize_result, ping_result
from gateway.seams import Era

__all__ = ["Handshake"]

LEGACY_ONLY: Final[frozenset[Era]] = frozenset({"legacy"})


class Handshake:
    """The routes of ``initialize`` and ``ping``."""

    def __init__(self, parts: RouteParts, *, sessions: LegacySessions | None = None) -> None:
        config = parts.config
        self._backend = parts.backend
        self._sessions = sessions
        self._server = config.server
        self._cap = config.limits.max_response_bytes

    def routes(self) -> dict[str, Route]:
        return {
            "initialize": Route(self._initialize, eras=LEGACY_ONLY),
            "ping": Route(self._ping, eras=LEGACY_ONLY),
        }

    async def _initialize(
        self, message: McpMessage, turn: Turn, relay: ProgressRelay | None, admitted: bool
    ) -> bytes:
        check_expiry(turn, admitted)
        requested = message.params.get("protocolVersion")
        result = initialize_result(
            requested if isinstance(requested, str) else message.version,
            server=self._server,
            instructions=self._server.instructions,
            surface=surface_capabilities(turn, self._backend.surface()),
        )
        if self._sessions is not None:
            granted = self._sessions.capabilities(turn.policy, turn.principal)
            if granted:
                capabilities = result["capabilities"]
                for kind, flags in granted.items():
                    if kind in capabilities:
                        capabilities[kind] = {**capabilities[kind], **flags}
                turn.response_headers = {SESSION_HEADER: self._sessions.mint(turn.principal)}
        return bounded_success(message, result, self._cap)

    async def _ping(
        self, message: McpMessage, turn: Turn, relay: ProgressRelay | None, admitted: bool
    ) -> bytes:
        check_expiry(turn, admitted)
        return bounded_success(message, ping_result(), self._cap)
