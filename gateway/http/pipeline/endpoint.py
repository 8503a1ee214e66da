"""The MCP endpoint: pipeline steps 2-18 of docs/architecture.md, in that order.

One :class:`McpEndpoint` instance is the aiohttp handler for every method on the MCP path. It
admits the request (method, origin, pre-auth rate, authentication, baseline scopes, principal
rate, in-flight cap, media types, bounded body), decodes and classifies it with
:mod:`gateway.protocol`, then hands it to :mod:`gateway.http.pipeline.answer` (steps 15-18), which
applies the per-method and per-tool policy from the request's one policy snapshot, re-checks token
expiry, dispatches, and answers with a bounded ``application/json`` body (or an SSE stream once a
tool reports progress); the endpoint records every request (metrics, observer) and renders every
rejection. Every rejection is a :class:`~gateway.errors.GatewayError` rendered by
:func:`gateway.http.error_response.render_error`; nothing else writes an error.

Decisions documented in docs/errors.md:

- a per-tool ``max_concurrency`` overflow is ``429 rate_limited`` with ``Retry-After: 1``
  (a per-subject quota, like ``rate_limit``; shared by replicas with ``state.backend: redis``);
- an oversized ``tools/call`` result becomes a tool result with ``isError: true`` and a fixed text
  (HTTP 200), any other oversized result is ``backend_failure``;
- a body that has not arrived before the request deadline is ``408 request_timeout``; a tool call
  still running at the deadline (plus a short grace for the backend's own timeout to answer)
  becomes a tool error result.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import time
from collections.abc import Callable
from typing import Final

from aiohttp import web

from gateway.config import Config
from gateway.errors import (
    GatewayError,
    InsufficientScope,
    InvalidToken,
    MethodNotAllowed,
    NoCredentials,
    OverCapacity,
    RateLimited,
)
from gateway.http.admission import (
    accepts,
    check_content_encoding,
    check_content_type,
    check_origin,
)
from gateway.http.call_limits import CONCURRENCY_RETRY_S, CallLimits
from gateway.http.drain import DrainBound
from gateway.http.error_response import internal_error, render_error
from gateway.http.pipeline.answer import EMPTY_HEADERS, answer_batch, answer_single
from gateway.http.pipeline.cors import Cors
from gateway.http.pipeline.dispatch import CORE_ONLY, Dispatcher, Features
from gateway.http.pipeline.request_record import PROXY_WARNING_INTERVAL_S, RequestRecord
from gateway.http.pipeline.traced import adopt_meta
from gateway.http.subscriptions.legacy_sessions import SESSION_HEADER
from gateway.http.subscriptions.legacy_stream import serve_session
from gateway.http.turn import Turn
from gateway.limits.keys import client_key, principal_key
from gateway.limits.memory import Slots
from gateway.observability import spans
from gateway.observability.metrics import Metrics
from gateway.observability.spans import RequestTracer
from gateway.protocol.classify import classify
from gateway.protocol.jsonstrict import decode
from gateway.seams import (
    Authenticator,
    AuthRequest,
    Backend,
    CallerToken,
    ConcurrencyLimiter,
    Observer,
    Policy,
    PolicySource,
    Principal,
    RateLimiter,
    RequestContext,
)

__all__ = ["PROXY_WARNING_INTERVAL_S", "McpEndpoint"]


DETACHED: Final = "detached"
"""``ctx.extra`` key: the request's slots were released early (:meth:`McpEndpoint._detach`)."""
TOKEN_CHECK_SPAN: Final = "mcp_gateway.token_check"  # noqa: S105 - a span name
_SESSION_METHODS: Final = frozenset({"GET", "DELETE"})


class McpEndpoint:
    """The MCP path's handler: register :meth:`handle` for every method.

    ``request_id`` reads the id the application's request-id middleware stored (the wiring
    passes ``lambda r: r.get(REQUEST_ID)``); without one a random id is generated per request.
    ``metrics`` makes the endpoint record ``in_flight``, ``requests_total``,
    ``request_duration_seconds`` and ``rate_limited_total{scope="ip"|"principal"}`` itself (an
    observer must then not count them again). A request whose client goes away is recorded
    with status 499 and never answered.
    """

    def __init__(
        self,
        *,
        config: Config,
        authenticator: Authenticator,
        policy: PolicySource,
        backend: Backend,
        limiter: RateLimiter,
        leases: ConcurrencyLimiter | None = None,
        observer: Observer | None = None,
        metrics: Metrics | None = None,
        request_id: Callable[[web.Request], str | None] | None = None,
        tracing: RequestTracer | None = None,
        features: Features = CORE_ONLY,
    ) -> None:
        """``features``: what is served beyond the core methods, as configured."""
        self._config = config
        self._auth = authenticator
        self._policy = policy
        self._observer = observer
        self._metrics = metrics
        self._tracing = tracing
        """``tracing:`` configured: the request's spans (gateway/observability/otel.py)."""
        limits = config.limits
        self._pre_auth = limits.pre_auth_rate
        self._principal_rate = limits.principal_rate
        self._max_in_flight = limits.max_in_flight
        self._body_cap = limits.max_body_bytes
        self._json_limits = limits.json
        self._deadline_s = limits.request_deadline_s
        # allowed_origins plus the resource's own origin (issue 11 item 1); CORS reads the same.
        self._origins = config.trusted_origins
        self._cors = Cors(config) if config.cors.enabled else None
        self._in_flight = 0
        self._principal_in_flight = limits.principal_in_flight
        self._ip_in_flight = limits.ip_in_flight
        self._principal_slots = Slots()
        self._ip_slots = Slots()
        self._record = RequestRecord(
            trusted=config.trusted_proxies,
            metrics=metrics,
            observer=observer,
            request_id=request_id,
            tracing=tracing,
        )
        self._drain = DrainBound()
        self._limits = CallLimits(limiter=limiter, leases=leases, metrics=metrics)
        self._sessions = (
            features.listening is not None
            and features.legacy_sessions
            and config.protocol.legacy_subscriptions
        )
        """Legacy subscription sessions are possible: a session's GET/DELETE is authenticated."""
        self._dispatcher = Dispatcher(
            config=config,
            backend=backend,
            limits=self._limits,
            metrics=metrics,
            drain=self._drain,
            policy=policy,
            detach=self._detach,
            features=dataclasses.replace(features, legacy_sessions=self._sessions),
        )

    def drain(self, deadline: float) -> None:
        """A graceful stop began: every request in flight must be answered by ``deadline``
        (``time.monotonic()``): a body still arriving then is ``503 draining``, a tool call still
        running the fixed timeout tool error (see :mod:`gateway.http.drain`)."""
        self._drain.begin(deadline)
        self._dispatcher.subscriptions.hub.drain()  # listen streams end gracefully now
        self._dispatcher.sessions.drain()  # and legacy sessions with their GET streams

    def revoked(self, token: bytes) -> None:
        """The token with this revocation key was revoked (here, or pushed from another
        replica): every stream running on it ends now (listen and legacy GET streams)."""
        self._dispatcher.subscriptions.hub.revoked(token)

    @property
    def subscriptions(self) -> int:
        """Open streams: ``subscriptions/listen`` and legacy sessions' GET streams."""
        return len(self._dispatcher.subscriptions.hub)

    @property
    def legacy_sessions(self) -> int:
        """Legacy subscription sessions held by this replica."""
        return len(self._dispatcher.sessions)

    def _detach(self, ctx: RequestContext) -> None:
        """An acknowledged listen stream stops counting as in flight (it is not work in
        progress): its IP, principal and replica slots are released now, once."""
        if DETACHED in ctx.extra:
            return
        ctx.extra[DETACHED] = True
        self._ip_slots.release(client_key(ctx.client_ip))
        if ctx.principal is not None:
            self._principal_slots.release(f"sub:{principal_key(ctx.principal)}")
        self._in_flight -= 1
        if self._metrics is not None:
            self._metrics.in_flight.dec()

    @property
    def in_flight(self) -> int:
        """Requests currently past the in-flight gate (pipeline step 10)."""
        return self._in_flight

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """The aiohttp handler (aiohttp wants a coroutine function, not a callable object)."""
        started = time.monotonic()
        ctx = self._record.context(request, started)
        if self._observer is not None:
            self._observer.request_started(ctx)
        try:
            response = await self._pipeline(request, ctx, started)
        except GatewayError as err:
            response = self._reject(err, ctx)
        except asyncio.CancelledError:
            # The client went away mid-call (handler_cancellation): nobody is left to answer.
            # Recorded as 499, the de-facto "client closed request" status.
            ctx.status = 499
            if ctx.method == "tools/call" and ctx.outcome is None:
                ctx.outcome = "cancelled"
            self._record.finish(ctx, started)
            raise
        except (ConnectionResetError, asyncio.IncompleteReadError):
            # The connection died mid-body (client gone, or aiohttp dropped a malformed chunked
            # body). There is no one to answer; return quietly instead of a logged traceback.
            ctx.status = 499
            self._record.finish(ctx, started)
            return web.Response(status=400, headers=EMPTY_HEADERS)
        except Exception as exc:
            fallback = internal_error(exc, request_id=ctx.request_id)
            fallback.request_id = ctx.jsonrpc_id  # answer the request's id when it was decoded
            response = self._reject(fallback, ctx)
        if ctx.status == 0:
            ctx.status = response.status
        self._record.finish(ctx, started)
        return response

    # --- steps 2-14: admission, decoding, classification -----------------------------------

    async def _pipeline(
        self, request: web.Request, ctx: RequestContext, started: float
    ) -> web.StreamResponse:
        # Step 2: before auth, so a GET probe never triggers an OAuth dance (digest §3.5).
        if request.method != "POST":
            cors = self._cors
            if cors is not None and cors.is_preflight(request):
                return cors.preflight(request)  # a browser's CORS preflight (http/pipeline/cors.py)
            # A legacy session's GET stream or DELETE goes on through authentication; any other
            # (a sessionless GET probe included) is 405 here (http/subscriptions/legacy_stream.py).
            if not (
                self._sessions
                and request.method in _SESSION_METHODS
                and SESSION_HEADER in request.headers
            ):
                raise MethodNotAllowed()
        headers = request.headers
        check_origin(headers.get("Origin"), self._origins)  # step 3
        ip_key = client_key(ctx.client_ip)
        # Step 4: per client IP, before authentication: the in-flight share, then the rate.
        if not self._ip_slots.try_acquire(ip_key, self._ip_in_flight):
            self._limits.count_limited("ip_concurrency")
            raise RateLimited(retry_after=CONCURRENCY_RETRY_S)
        try:
            if self._pre_auth is not None:
                rate = self._pre_auth
                await self._limits.enforce_rate(f"ip:{ip_key}", rate.count, rate.per_s, "ip")
            return await self._authenticated(request, ctx, started)
        finally:
            if DETACHED not in ctx.extra:
                self._ip_slots.release(ip_key)

    async def _authenticated(
        self, request: web.Request, ctx: RequestContext, started: float
    ) -> web.StreamResponse:
        headers = request.headers
        # One policy snapshot per request: a reload mid-request does not change its rules.
        policy = self._policy.current()
        auth_request = AuthRequest(
            authorization=tuple(headers.getall("Authorization", ())),
            query_keys=frozenset(request.query.keys()),
            client_ip=ctx.client_ip,
            dpop=tuple(headers.getall("DPoP", ())),
            method=request.method,
        )
        with spans.child(TOKEN_CHECK_SPAN):
            principal = await self._auth.authenticate(auth_request)  # steps 5-7
        ctx.principal = principal
        # Only a backend that exchanges the caller's token (RFC 8693) ever gets it, wrapped.
        caller = self._auth.caller_token(auth_request) if self._dispatcher.exchanging else None
        baseline = policy.baseline_scopes
        if not principal.scopes.issuperset(baseline):  # step 8
            missing = tuple(scope for scope in baseline if scope not in principal.scopes)
            raise InsufficientScope(scopes=tuple(baseline), missing=missing)
        subject_key = f"sub:{principal_key(principal)}"
        if self._principal_rate is not None:  # step 9
            rate = self._principal_rate
            await self._limits.enforce_rate(subject_key, rate.count, rate.per_s, "principal")
        # Step 10, before the body is read: the caller's share of the slots (a quota: 429),
        # then the replica's (capacity: 503).
        if not self._principal_slots.try_acquire(subject_key, self._principal_in_flight):
            self._limits.count_limited("principal_concurrency")
            raise RateLimited(retry_after=CONCURRENCY_RETRY_S)
        try:
            if self._in_flight >= self._max_in_flight:
                raise OverCapacity(retry_after=1)
            self._in_flight += 1
            if self._metrics is not None:
                self._metrics.in_flight.inc()
            try:
                token_key = functools.partial(self._auth.revocation_key, auth_request)
                return await self._admitted(
                    request, ctx, started, policy, principal, caller=caller, token_key=token_key
                )
            finally:
                if DETACHED not in ctx.extra:
                    self._in_flight -= 1
                    if self._metrics is not None:
                        self._metrics.in_flight.dec()
        finally:
            if DETACHED not in ctx.extra:
                self._principal_slots.release(subject_key)

    async def _admitted(
        self,
        request: web.Request,
        ctx: RequestContext,
        started: float,
        policy: Policy,
        principal: Principal,
        *,
        caller: CallerToken | None,
        token_key: Callable[[], bytes],
    ) -> web.StreamResponse:
        headers = request.headers
        deadline = started + self._deadline_s
        turn = Turn(
            request, ctx, policy, principal, deadline, accepts_sse=True, token_key=token_key
        )
        if request.method != "POST":  # a session's GET or DELETE: no body
            return await serve_session(
                self._dispatcher.sessions, turn, source=self._policy, detach=self._detach
            )
        accept = accepts(headers.getall("Accept", ()))  # step 11
        check_content_type(headers.get("Content-Type"))
        check_content_encoding(headers.getall("Content-Encoding", ()))
        body = await self._drain.read_body(request, self._body_cap, deadline)
        ctx.bytes_in = len(body)
        message = decode(body, self._json_limits)  # step 12
        turn.accepts_sse = accept.sse
        turn.caller_token = caller
        # Steps 13-14; the lookup hides tools the caller may not see (no existence leak).
        classified = classify(headers, message, self._dispatcher.tool_lookup(turn))
        if not isinstance(classified, tuple) and classified.era == "modern":
            adopt_meta(self._tracing, classified.params.get("_meta"), ctx)  # SEP-414
        if isinstance(classified, tuple):
            return await answer_batch(
                self._dispatcher, classified, turn, self._config.limits.max_response_bytes
            )
        return await answer_single(self._dispatcher, classified, turn)

    # --- context, errors, observation -------------------------------------------------------

    def _reject(self, err: GatewayError, ctx: RequestContext) -> web.Response:
        if err.era is None and ctx.era is not None:
            err.era = ctx.era
        # Scopes go out as the caller's issuer spells them (its scope_map reversed); without a
        # principal (refused before or at authentication) as the first issuer does.
        if isinstance(err, InsufficientScope):
            err.scopes = self._auth.outward_scopes(err.scopes, ctx.principal)
            err.missing = self._auth.outward_scopes(err.missing, ctx.principal)
        elif isinstance(err, NoCredentials | InvalidToken) and not err.scopes:
            # The body names what the challenge's scope= names: the policy's baseline.
            baseline = self._policy.current().baseline_scopes
            err.scopes = self._auth.outward_scopes(baseline, ctx.principal)
        challenge = self._auth.challenge(err) if err.challenge else None
        response = render_error(err, challenge=challenge)
        ctx.status = response.status
        ctx.jsonrpc_code = err.wire_code
        ctx.error_row = err.row
        ctx.bytes_out = len(response.body) if isinstance(response.body, bytes) else 0
        return response
