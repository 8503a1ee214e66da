"""The upstream MCP server behind the service credential (implements ``gateway.seams.Backend``).

MCP 2026-07-28 server/tools.mdx §Listing Tools and §Calling Tools, client side. The catalog is
kept by :class:`~gateway.backend.catalog.refresher.CatalogRefresher` (timed refresh bounded by
``backend.catalog_refresh_s`` and the upstream's ``ttlMs``, early refresh on
``notifications/tools/list_changed``, which
:class:`~gateway.backend.listen.change_listener.ChangeListener` receives on a
``subscriptions/listen`` stream or the legacy GET stream).

``tools/call`` validates the arguments against the tool's compiled inputSchema (no upstream call
when they do not match), exchanges the caller's token where the backend's credential says so,
counts the call in the backend metrics, and leaves the request and the reading of its reply to
:class:`~gateway.backend.upstream.tool_call.UpstreamToolCall`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any

import jsonschema_rs

from gateway.backend.call_credentials import CallCredentials
from gateway.backend.call_metrics import BackendCallMetrics
from gateway.backend.catalog.lock_watch import CatalogLock
from gateway.backend.catalog.pinning import OverrideSource
from gateway.backend.catalog.refresher import CatalogRefresher
from gateway.backend.catalog.surface_catalog import SurfacePart
from gateway.backend.catalog.tool_catalog import ToolCatalog, compile_validator
from gateway.backend.credentials.assertion_keys import GatewayKeys
from gateway.backend.credentials.caller_assertion import signer_for
from gateway.backend.credentials.service_credential import TOKEN_DESTINATION, ServiceCredential
from gateway.backend.credentials.tls import build_ssl_context
from gateway.backend.credentials.upstream_server import OAUTH_DESTINATION
from gateway.backend.credentials.user_credential import UserCredential
from gateway.backend.listen.caller_listen import (
    LISTEN_DESTINATION_SUFFIX,
    CallerListen,
    Exposure,
    open_caller_listen,
)
from gateway.backend.listen.change_listener import ChangeListener
from gateway.backend.upstream.link import UpstreamLink
from gateway.backend.upstream.surface_call import UpstreamSurfaceCall
from gateway.backend.upstream.task_call import UpstreamTaskCall
from gateway.backend.upstream.tool_call import UpstreamToolCall
from gateway.backend.upstream.tool_results import INVALID_ARGUMENTS_TEXT
from gateway.config import BackendConfig, Config
from gateway.errors import InvalidRequestState
from gateway.jsonkit.write import plain_copy
from gateway.observability.logging import get_logger
from gateway.observability.metric_labels import BackendOutcome
from gateway.observability.metrics import Metrics
from gateway.outbound.client import Destination, Outbound
from gateway.protocol.results import tool_error_result
from gateway.seams import (
    CallerToken,
    ConsentNeeded,
    InputRequired,
    ListenFilter,
    ListenOffer,
    Principal,
    RequestContext,
    SurfaceReply,
    SurfaceRequest,
    TaskCreated,
    ToolCall,
    ToolDef,
)

__all__ = ["UpstreamBackend"]

_log = get_logger("gateway.backend")


class UpstreamBackend:
    """One configured upstream: its catalog, its service credential and its tool calls.

    Everything here belongs to this backend alone (era detection, legacy session, catalog
    refresh, connection pool, deadlines, credential); :class:`~.federation.FederatedBackend`
    puts several of them behind one endpoint.
    """

    def __init__(
        self,
        config: Config,
        outbound: Outbound,
        *,
        settings: BackendConfig | None = None,
        metrics: Metrics | None = None,
        clock: Callable[[], float] = time.monotonic,
        keys: GatewayKeys | None = None,
        pins: CatalogLock | None = None,
        overrides: OverrideSource | None = None,
        user: UserCredential | None = None,
    ) -> None:
        """``settings``: the backend this instance talks to (default: the configuration's
        first, for a ``backend:`` section its only one). ``keys``: the gateway's assertion
        keys (shared with the JWK Set it publishes; default: this backend's own). ``pins``:
        the catalog lock (``catalog:``) its catalog is held to; ``overrides``: the policy set
        whose tool overrides are hashed with the definitions (:class:`CatalogRefresher`).
        ``user``: a ``user_oauth`` backend's credential (:class:`CallCredentials`)."""
        self._config = config
        self._settings = settings if settings is not None else config.backends[0]
        self.name = self._settings.name
        """The backend's configured name (metrics label, logs, audit, ``/readyz``)."""
        self._outbound = outbound
        self._metrics = metrics
        self._calls = BackendCallMetrics(metrics, self.name) if metrics is not None else None
        self._clock = clock
        self._max_bytes = config.limits.max_response_bytes
        # Built once: a bad CA or key file fails startup, never a request.
        self._ssl = build_ssl_context(self._settings.tls)
        self._credentials = CallCredentials(
            self._settings, config, outbound, metrics=metrics, clock=clock, user=user
        )
        self._credential = self._credentials.service
        self._link = UpstreamLink(
            self._settings.url,
            outbound,
            self._credential,
            max_bytes=self._max_bytes,
            detect_timeout_s=self._settings.timeout_s,
            backend=self.name,
        )
        self._refresher = CatalogRefresher(
            self._link,
            self._settings,
            metrics=metrics,
            clock=clock,
            max_description_chars=config.limits.max_description_chars,
            pins=pins,
            overrides=overrides,
        )
        # An upstream notifications/tools/list_changed, on any stream, asks for a fetch.
        self._link.on_list_changed = self._refresher.request_refresh
        self._listener = ChangeListener(self._link, on_change=self._refresher.request_refresh)
        self._signer = signer_for(config, self._settings, keys, metrics)
        self._tool_call = UpstreamToolCall(
            self._link,
            self._settings,
            signer=self._signer,
            max_state_bytes=config.input_requests.max_state_bytes,
            on_stale_catalog=self.request_refresh,
        )
        self._surface_call = UpstreamSurfaceCall(
            self._link, self._settings, signer=self._signer, max_bytes=self._max_bytes
        )
        self.task_call = UpstreamTaskCall(
            self._link, self._settings, signer=self._signer, max_bytes=self._max_bytes
        )
        if metrics is not None:
            metrics.catalog.register(
                self.name, age=self._refresher.age, ready=lambda: self._refresher.ready
            )

    # --- lifecycle --------------------------------------------------------------------

    @property
    def link(self) -> UpstreamLink:
        return self._link

    @property
    def credential(self) -> ServiceCredential:
        return self._credential

    @property
    def user_credential(self) -> UserCredential | None:
        """A ``user_oauth`` backend's per-person credential (its records), else None."""
        return self._credentials.user

    @property
    def settings(self) -> BackendConfig:
        return self._settings

    @property
    def ready(self) -> bool:
        """True once the first catalog fetch succeeded (readiness)."""
        return self._refresher.ready

    @property
    def on_update(self) -> Callable[[], None] | None:
        """Called after every successful catalog fetch (the federation re-merges)."""
        return self._refresher.on_update

    @on_update.setter
    def on_update(self, callback: Callable[[], None] | None) -> None:
        self._refresher.on_update = callback

    def catalog_age(self) -> float:
        """Seconds since the last successful catalog fetch (before the first: since start)."""
        return self._refresher.age()

    @property
    def refresh_interval(self) -> float:
        """Seconds between timed catalog fetches (``catalog_refresh_s``, shortened by ``ttlMs``)."""
        return self._refresher.interval

    async def start(self) -> None:
        """Register destinations, try the first fetch, then refresh and listen in the background."""
        await self.fetch()
        self._outbound.add(
            Destination(
                self._link.destination + LISTEN_DESTINATION_SUFFIX,
                connect_timeout_s=self._settings.connect_timeout_s,
                max_connections=self._config.limits.max_subscriptions,
                ssl_context=self._ssl,
                lean=True,
            )
        )
        self._refresher.start()
        self._listener.start()

    async def fetch(self) -> bool:
        """Register the call destinations and fetch the catalog once (``start`` does this
        first; ``mcp-gateway catalog`` stops here: no background refresh, no listen stream)."""
        self._outbound.add(
            Destination(
                self._link.destination,
                connect_timeout_s=self._settings.connect_timeout_s,
                max_connections=self._settings.max_connections,
                ssl_context=self._ssl,
                lean=True,  # the hot path: gateway/outbound/http1.py
            )
        )
        if self._settings.credential.type != "bearer":
            user = self._credentials.user is not None
            name = OAUTH_DESTINATION if user else TOKEN_DESTINATION
            self._outbound.add(Destination(name, connect_timeout_s=self._config.issuer.timeout_s))
        try:
            return await self._refresher.refresh()
        except Exception:  # a bug in the first fetch must not keep this backend down for good
            _log.exception("backend_catalog_refresh_crashed", backend=self.name)
            return False

    async def close(self) -> None:
        """Stop refreshing and listening, and DELETE the legacy upstream session, if any."""
        await self._listener.close()
        await self._refresher.close()
        await self._link.close()

    def catalog(self) -> ToolCatalog:
        return self._refresher.catalog()

    def surface(self) -> SurfacePart:
        """The upstream's prompts, resources and templates (last good fetch)."""
        return self._refresher.surface()

    @property
    def refresher(self) -> CatalogRefresher:
        """Its catalog: the lock items and differences with ``catalog:`` (``pinned()``...)."""
        return self._refresher

    @property
    def offers(self) -> frozenset[str]:
        """What the upstream advertised of ``prompts``, ``resources``, ``completions`` (as of
        the last catalog fetch: a re-detection in between changes nothing until the next)."""
        return self._refresher.surface().offers

    @property
    def subscribe(self) -> bool:
        return self._refresher.surface().subscribe

    def listen_offer(self) -> ListenOffer:
        """What a caller's listen stream can get from this backend (2026-07-28 only)."""
        state = self._link.known_state
        # A user_oauth backend's streams would carry its catalog credential, nobody's own.
        if state is None or state.era != "modern" or self._credentials.user is not None:
            return ListenOffer(self.name, frozenset(), subscribe=False)
        kinds = state.list_changed | ({"tools"} if state.tools_list_changed else set())
        return ListenOffer(self.name, frozenset(kinds), state.subscribe, tasks=state.tasks)

    def listen(
        self,
        wanted: ListenFilter,
        own_uris: tuple[str, ...],
        *,
        expose: Exposure,
        ack_deadline: float,
        deadline: float,
    ) -> AbstractAsyncContextManager[CallerListen]:
        """A caller's listen stream here (:mod:`gateway.backend.listen.caller_listen`)."""
        return open_caller_listen(
            self._link,
            wanted,
            own_uris,
            expose=expose,
            ack_deadline=ack_deadline,
            deadline=deadline,
        )

    async def surface_request(
        self, request: SurfaceRequest, principal: Principal, ctx: RequestContext, deadline: float
    ) -> SurfaceReply:
        """One prompts/resources/completion request upstream
        (:mod:`gateway.backend.upstream.surface_call`)."""
        credential = await self.caller_credential(request.caller_token, principal, ctx, deadline)
        reply = await self._surface_call.request(
            request, principal, ctx, deadline, credential=credential
        )
        await self._credentials.settle(credential)
        return reply

    async def caller_credential(
        self, token: CallerToken | None, principal: Principal, ctx: RequestContext, deadline: float
    ) -> ServiceCredential | None:
        """The call's own credential (the caller's exchanged or own upstream token) where the
        backend's credential makes one, else None (the service credential); raises
        exchange_refused / exchange_unavailable, ``ConsentNeeded``, upstream_token_unavailable."""
        return await self._credentials.for_call(token, principal, ctx, deadline)

    def request_refresh(self) -> None:
        """Ask for an early catalog refresh (coalesced)."""
        self._refresher.request_refresh()

    async def refresh(self) -> bool:
        """Fetch every page and swap in the new catalog; False (last good kept) on failure."""
        return await self._refresher.refresh()

    # --- tools/call -------------------------------------------------------------------

    async def call_tool(
        self, call: ToolCall, principal: Principal, ctx: RequestContext, deadline: float
    ) -> dict[str, Any] | InputRequired | TaskCreated:
        """Call the tool upstream; every upstream fault becomes an ``isError`` result."""
        if call.resume is not None and call.resume.backend != self.name:
            # A sealed round answers the backend that asked, never another one (mrtr.mdx).
            raise InvalidRequestState("mismatch", detail="requestState bound to another backend")
        # The backend's own definition: an override changed only what the caller sees.
        own = call.tool.origin or call.tool
        # Bounded: the exposed name of a tool of this backend's catalog, anything else "other".
        label = call.tool.name if own.name in self.catalog() else "other"
        started = self._clock()
        outcome: BackendOutcome = "upstream_error"
        called = False
        try:
            # A private plain copy (fixed arguments already in, http/tool_call): jsonschema-rs
            # and the encoder want concrete dicts and lists.
            arguments = plain_copy(call.arguments)
            validator = self._validator(own)
            if validator is None or not validator.is_valid(arguments):
                outcome = "invalid_arguments"
                return tool_error_result(INVALID_ARGUMENTS_TEXT)
            if self._credentials.exchange is not None:
                outcome = "exchange_failed"
            credential = await self.caller_credential(call.caller_token, principal, ctx, deadline)
            called = True
            result, outcome = await self._tool_call.call(
                call, arguments, principal, ctx, deadline, credential=credential
            )
            await self._credentials.settle(credential)  # a person's token the upstream refused
            return result
        except ConsentNeeded:
            outcome = "consent_required"
            raise
        except asyncio.CancelledError:
            outcome = "cancelled"  # client disconnect: leaving the stream aborted the upstream
            raise
        finally:
            elapsed = self._clock() - started
            ctx.outcome = outcome
            ctx.backend_ms = elapsed * 1000 if called else 0.0
            if self._calls is not None:
                self._calls.count(label, outcome, elapsed if called else None)

    def _validator(self, tool: ToolDef) -> jsonschema_rs.Validator | None:
        """``tool``: the backend's own definition (the arguments sent are checked against the
        schema the backend declared, fixed ones included)."""
        current = self.catalog().validator(tool.name)
        if current is not None:
            return current
        # The tool left the catalog since the front door resolved it: use its own schema.
        schema = tool.definition.get("inputSchema")
        try:
            return compile_validator(schema) if isinstance(schema, Mapping) else None
        except ValueError:
            return None

    def forget_caller(self, digest: bytes) -> None:
        """The caller token with this SHA-256 digest was revoked or left the authenticator's
        cache: drop what was made for it (reusable assertions, its exchanged token)."""
        if self._signer is not None:
            self._signer.forget(digest)
        self._credentials.forget(digest)
