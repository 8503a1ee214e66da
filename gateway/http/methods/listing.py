"""The listing methods: ``tools/list`` and (2026-07-28) ``server/discover``, answered here.

Both carry the policy's per-method scopes (403 step-up). ``tools/list`` shows only the tools
the caller may call (MCP 2026-07-28 server/tools.mdx §Capabilities: the list MAY vary by
authorization), or with the policy's ``listing: step_up`` also the ones it could call with more
scopes; a hidden tool never appears, nor one whose rule has a condition that does not read the
call's arguments and is false for this caller (:mod:`gateway.http.condition_gate`).
``server/discover`` (server/discover.mdx) describes the gateway and whether it has tools (and
prompts, resources, completions for this caller:
:func:`gateway.http.methods.surface_lists.surface_capabilities`), with ``listChanged`` and
``resources.subscribe`` true exactly when this caller's ``subscriptions/listen`` would get them
(:func:`gateway.http.subscriptions.subscription_plan.listen_capabilities`), and the tasks extension
(``capabilities.extensions``) when ``tasks:`` is on and some backend advertises it.
"""

from __future__ import annotations

from gateway.http.methods.route_parts import RouteParts
from gateway.http.methods.surface_lists import surface_capabilities
from gateway.http.progress import ProgressRelay
from gateway.http.subscriptions.subscription_plan import listen_capabilities
from gateway.http.turn import (
    Route,
    Turn,
    bounded_success,
    check_expiry,
    require_method_scopes,
)
from gateway.protocol.messages import McpMessage
from gateway.protocol.results import ListPage, discover_result, tools_list_result
from gateway.seams import Listening, TaskRelay, listed

__all__ = ["Listing"]


class Listing:
    """The routes of the listing methods."""

    def __init__(
        self,
        parts: RouteParts,
        *,
        listening: Listening | None = None,
        tasks: TaskRelay | None = None,
    ) -> None:
        """``tasks``: the task relay when ``tasks:`` is on (the extension is advertised while
        some backend advertises it)."""
        config = parts.config
        self._tasks = tasks
        self._conditions = parts.conditions
        self._config = config
        self._backend = parts.backend
        self._listening = listening
        self._server = config.server
        self._cap = config.limits.max_response_bytes

    def routes(self) -> dict[str, Route]:
        return {
            "tools/list": Route(self._tools_list, admit=_admit_method),
            "server/discover": Route(
                self._discover, eras=frozenset({"modern"}), admit=_admit_method
            ),
        }

    async def _tools_list(
        self, message: McpMessage, turn: Turn, relay: ProgressRelay | None, admitted: bool
    ) -> bytes:
        require_method_scopes(turn, message.method)
        catalog = self._backend.catalog()
        listing = turn.policy.listing
        # A rule's conditions that do not read the arguments are decided here: one that is
        # false hides the tool (step-up would not help); the others wait for the call.
        tools = [
            tool
            for tool in catalog
            if listed(turn.decide(tool.name), listing)
            and self._conditions.listed(turn, tool.question)
        ]
        check_expiry(turn, admitted)
        # caching.mdx: no longer than the configured bound, nor than the catalog is
        # expected to stay as it is (federation: the shortest refresh interval).
        ttl_ms = self._config.protocol.tools_list_ttl_ms
        if catalog.ttl_ms is not None:
            ttl_ms = min(ttl_ms, catalog.ttl_ms)
        page = ListPage.asked(message, self._config.protocol.page_size, ttl_ms, self._server)
        result = tools_list_result(tools, page)
        return bounded_success(message, result, self._cap)

    async def _discover(
        self, message: McpMessage, turn: Turn, relay: ProgressRelay | None, admitted: bool
    ) -> bytes:
        require_method_scopes(turn, message.method)
        check_expiry(turn, admitted)
        result = discover_result(
            server=self._server,
            has_tools=len(self._backend.catalog()) > 0,
            ttl_ms=self._config.protocol.discover_ttl_ms,
            instructions=self._server.instructions,
            surface=surface_capabilities(turn, self._backend.surface()),
            listen=listen_capabilities(
                turn.policy, turn.principal, self._listening, self._backend, turn.ctx.client_ip
            ),
            tasks=self._tasks is not None and bool(self._tasks.task_backends()),
        )
        return bounded_success(message, result, self._cap)


def _admit_method(message: McpMessage, turn: Turn) -> None:
    require_method_scopes(turn, message.method)
