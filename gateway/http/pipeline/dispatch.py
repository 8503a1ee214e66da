"""Pipeline steps 15-18 for one classified message: find its method's route and run it.

Each method family is one module contributing its :class:`~gateway.http.turn.Route` objects:

- :mod:`gateway.http.methods.listing`: ``tools/list`` and (2026-07-28) ``server/discover``;
- :mod:`gateway.http.methods.handshake`: ``initialize`` and ``ping`` (legacy era only);
- :mod:`gateway.http.methods.tool_calls`: ``tools/call`` and the backend call;
- :mod:`gateway.http.methods.surface_routes`: the prompts, resources and completion methods;
- :mod:`gateway.http.subscriptions.listen_route`: ``subscriptions/listen`` (a route that streams);
- :mod:`gateway.http.methods.task_methods`: ``tasks/get``, ``tasks/update``, ``tasks/cancel``
  (with ``tasks:`` on; a ``tools/call`` that becomes a task: ``methods/task_creation``);
- :mod:`gateway.http.subscriptions.legacy_sessions`: legacy ``resources/subscribe`` /
  ``unsubscribe``.

A method no route has (or not in the message's era) is ``method_not_found``. Per-call limits
are :mod:`gateway.http.call_limits`, a batch's admission
:mod:`gateway.http.pipeline.batch_admission`. Everything returned is a serialized JSON-RPC success
body; rejections are raised as GatewayError rows carrying the message's id and era.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from gateway.config import Config
from gateway.errors import BackendFailure, GatewayError, MethodNotFound
from gateway.http.call_limits import CallLimits, release_leases
from gateway.http.condition_gate import ConditionGate
from gateway.http.drain import DrainBound
from gateway.http.guard_gate import GuardGate
from gateway.http.methods.handshake import Handshake
from gateway.http.methods.listing import Listing
from gateway.http.methods.route_parts import RouteParts
from gateway.http.methods.surface_routes import SurfaceRoutes
from gateway.http.methods.task_creation import TaskCreation, handles_for
from gateway.http.methods.task_methods import TaskMethods
from gateway.http.methods.tool_calls import ToolCalls
from gateway.http.pipeline.batch_admission import admit_batch
from gateway.http.progress import ProgressRelay
from gateway.http.subscriptions.legacy_sessions import LegacySessions
from gateway.http.subscriptions.listen_route import SubscriptionRoutes
from gateway.http.subscriptions.task_listen import TaskWatcher
from gateway.http.task_access import TaskAccess
from gateway.http.turn import Route, Turn
from gateway.observability.metrics import Metrics
from gateway.protocol.envelope import error_body
from gateway.protocol.messages import McpMessage
from gateway.seams import (
    Approvals,
    Backend,
    ConsentLinks,
    ConsentNeeded,
    DecisionPoint,
    Guardrails,
    Lease,
    Listening,
    PolicySource,
    RequestContext,
    TaskRelay,
    ToolDef,
)

__all__ = ["CORE_ONLY", "Dispatcher", "Features"]

BACKEND_FAILURE_CODE: Final = -32603


@dataclass(frozen=True, slots=True)
class Features:
    """What an endpoint serves beyond the core methods, as wiring/ configured it (None: not
    configured)."""

    listening: Listening | None = None
    """The backends' listen streams (``subscriptions/listen``; None: the method does not
    exist)."""
    decision_point: DecisionPoint | None = None
    """``policy_external``: asked after the local policy allowed."""
    tasks: TaskRelay | None = None
    """The backends' tasks (with ``tasks:`` on, the tasks extension is relayed)."""
    guardrails: Guardrails | None = None
    """The processors a rule may name (``guardrails:``)."""
    consent: ConsentLinks | None = None
    """The consent links of ``user_oauth`` backends."""
    approvals: Approvals | None = None
    """The approval desk (``approval:`` rules; None: no login surface, such calls fail closed)."""
    legacy_sessions: bool = True
    """Legacy ``resources/subscribe`` is offered (with ``listening``): off in a worker of
    ``serve --workers N``, where the kernel spreads a session's connections over processes
    that cannot see each other's sessions."""


CORE_ONLY: Final = Features()
"""The core methods only (the tests' endpoints)."""


class Dispatcher:
    """Runs one message under a :class:`Turn`; shared by every request of an endpoint."""

    def __init__(
        self,
        *,
        config: Config,
        backend: Backend,
        limits: CallLimits,
        metrics: Metrics | None = None,
        drain: DrainBound | None = None,
        policy: PolicySource | None = None,
        detach: Callable[[RequestContext], None] | None = None,
        features: Features = CORE_ONLY,
    ) -> None:
        """``policy``: the source whose reloads end streams; ``detach``: the endpoint's release
        of a request's in-flight slots (an acknowledged stream)."""
        listening, tasks = features.listening, features.tasks
        decision_point = features.decision_point
        self._backend = backend
        self._limits = limits
        conditions = ConditionGate(metrics)
        guards = GuardGate(features.guardrails, conditions)
        handles = handles_for(config) if tasks is not None else None
        self.tasks = tasks if handles is not None else None
        access = TaskAccess(handles, conditions, decision_point) if handles is not None else None
        """The task relay when tasks are on (``server/discover`` advertises the extension)."""
        parts = RouteParts(config, backend, limits, conditions, guards, metrics, decision_point)
        tools = ToolCalls(
            parts,
            drain=drain if drain is not None else DrainBound(),
            tasks=TaskCreation(config, handles, metrics=metrics) if handles else None,
            consent=features.consent,
            approvals=features.approvals,
        )
        self._consent = tools.consent
        self.subscriptions = SubscriptionRoutes(
            limits=config.limits,
            backend=backend,
            listening=listening,
            policy=policy,
            detach=detach,
            tasks=TaskWatcher(config, access) if access is not None else None,
        )
        self.sessions = LegacySessions(
            config=config,
            hub=self.subscriptions.hub,
            backend=backend,
            listening=listening if features.legacy_sessions else None,
        )
        self._routes: dict[str, Route] = {
            **Listing(parts, listening=listening, tasks=self.tasks).routes(),
            **Handshake(parts, sessions=self.sessions).routes(),
            **tools.routes(),
            **SurfaceRoutes(parts, exchanging=tools.exchanging).routes(),
            **self.subscriptions.routes(),
            **self.sessions.routes(),
        }
        if access is not None and tasks is not None:
            self._routes.update(
                TaskMethods(parts, access=access, relay=tasks, exchanging=tools.exchanging).routes()
            )
        self.exchanging = tools.exchanging
        """Backends whose credential exchanges the caller's token: only their calls carry it."""

    def tool_lookup(self, turn: Turn) -> Callable[[str], ToolDef | None]:
        """The classifier's tool lookup: only tools this caller may see exist."""
        catalog = self._backend.catalog()

        def lookup(name: str) -> ToolDef | None:
            tool = catalog.get(name)
            if tool is None or not turn.decide(name).visible:
                return None
            return tool

        return lookup

    def route(self, message: McpMessage) -> Route | None:
        """The route answering ``message``'s method in its era, if the gateway has one."""
        found = self._routes.get(message.method)
        if found is None or message.era not in found.eras:
            return None
        return found

    async def run(
        self,
        message: McpMessage,
        turn: Turn,
        *,
        relay: ProgressRelay | None,
        admitted: bool = False,
    ) -> bytes:
        """Serialize the success body for ``message`` or raise its GatewayError row.

        ``relay`` (a ``tools/call`` with a progressToken from a client accepting SSE) is handed
        to the backend as ``ToolCall.on_progress``. ``admitted``: a batch member whose
        HTTP-level checks :meth:`admit_batch` already ran (rate, concurrency, expiry).
        """
        try:
            found = self.route(message)
            if found is None:
                raise MethodNotFound()
            try:
                return await found.run(message, turn, relay, admitted)
            except ConsentNeeded as needed:  # not a tools/call: that one answers it itself
                raise await self._consent.refusal(needed, message, turn) from None
        except GatewayError as err:
            if err.request_id is None:
                err.request_id = message.id
            if err.era is None:
                err.era = message.era
            raise

    async def admit_batch(self, messages: tuple[McpMessage, ...], turn: Turn) -> list[Lease]:
        """Every HTTP-level check of a 2025-03-26 batch before any member runs
        (:mod:`gateway.http.pipeline.batch_admission`); release the leases with
        :meth:`release_leases`."""
        return await admit_batch(messages, turn, self.route, self._limits)

    @staticmethod
    async def release_leases(leases: list[Lease]) -> None:
        await release_leases(leases)

    def over_budget(self, message: McpMessage) -> bytes:
        """The stand-in for a result that does not fit the response budget."""
        found = self.route(message)
        if found is not None and found.over_budget is not None:
            return found.over_budget(message)
        return self.failure_body(message)

    @staticmethod
    def failure_body(message: McpMessage) -> bytes:
        """The smallest answer to ``message``: a ``backend_failure`` (-32603) error entry."""
        return error_body(message.id, BACKEND_FAILURE_CODE, BackendFailure.message, None)
