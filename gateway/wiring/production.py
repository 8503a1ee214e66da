"""Builds the production :class:`~gateway.app.Services` from a validated :class:`Config`.

The one place concrete classes meet the Protocols of :mod:`gateway.seams`: the resource server
(auth/), the policy reloader (policy/), the upstream backend (backend/), the external decision
point when ``policy_external:`` is set (pdp/), the processors of ``guardrails:`` when set
(guardrails/), the limiters of
``state:`` (state/ and limits/: per replica, or shared in Redis), the observer
(observability/) and the MCP endpoint (http/). Startup dependencies
(issuer metadata, the first catalog fetch) run as background tasks that flip their readiness
checks; the listeners bind first so ``/healthz`` and ``/metrics`` answer during startup.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from aiohttp import web

import gateway
from gateway.app import Services
from gateway.app.request_id import assign_request_id
from gateway.auth.resource_server import ResourceServer
from gateway.backend.catalog.lock_watch import CatalogLock
from gateway.backend.catalog.tool_catalog import compile_validator
from gateway.backend.credentials.assertion_keys import GatewayKeys
from gateway.backend.credentials.service_credential import make_credential
from gateway.backend.federated_listen import FederatedListening
from gateway.backend.federation import FederatedBackend
from gateway.backend.upstream.surface_results import prompt_result, read_result
from gateway.backend.upstream.tool_results import sanitize_result
from gateway.backend.upstream_backend import UpstreamBackend
from gateway.config import Config
from gateway.config.sections import TRACING_PACKAGES
from gateway.errors import ConfigError
from gateway.guardrails.chain import ContentChecks, GuardrailChain
from gateway.guardrails.processor import Processor
from gateway.http.admission import client_ip
from gateway.http.pipeline.dispatch import Features
from gateway.http.pipeline.endpoint import McpEndpoint
from gateway.http.pipeline.routes import add_mcp_routes, ops_jwks
from gateway.login.build import build_surface
from gateway.observability.access import GatewayObserver
from gateway.observability.audit import AuditSink
from gateway.observability.logging import get_logger
from gateway.observability.metrics import Metrics
from gateway.outbound.client import Outbound
from gateway.pdp.authzen import AuthZenDecisionPoint
from gateway.policy.policy_set import PolicySet
from gateway.wiring.approval_desk import build_approval_desk
from gateway.wiring.policy_files import policy_source, reload_on_sighup, watch_catalog_fit
from gateway.wiring.shared_state import build_shared_state
from gateway.wiring.user_connections import build_user_connections

if TYPE_CHECKING:
    from gateway.observability.otel import Tracing

__all__ = ["build_services"]

log = get_logger("gateway.wiring")


def build_services(
    config: Config, *, metrics: Metrics | None = None, legacy_sessions: bool = True
) -> Services:
    """Assemble every production component for ``config``.

    ``legacy_sessions``: offer legacy ``resources/subscribe`` (off in a worker of
    ``serve --workers N``: gateway/http/subscriptions/legacy_sessions.py).

    Raises :class:`~gateway.errors.ConfigError` when the policy set is invalid (the gateway
    never starts on a half-valid policy) and ``OSError`` when the audit file cannot be opened.
    """
    metrics = metrics or Metrics(gateway.__version__)
    outbound = Outbound(user_agent=f"mcp-resource-gateway/{gateway.__version__}")
    # state.backend: memory -> this replica's own limiters; redis -> shared by every replica.
    # A revocation evicts the token from every cache of the authenticator (built just below).
    # (late-bound on purpose: the authenticator does not exist yet)
    state = build_shared_state(config, lambda d: forget(d), metrics)  # noqa: PLW0108

    def forget(key: bytes) -> None:
        # ``key`` is a revocation key. The authenticator drops every cached spelling of the
        # token, and each drop takes what the backends made for that spelling (reusable
        # assertions, exchanged tokens: on_token_dropped below); an opaque token's key is its
        # digest, which the backends are told directly as well.
        authenticator.forget(key)
        backend.forget_caller(key)
        endpoint.revoked(key)  # and its open streams end

    limiter = state.limiter
    swapped: list[Callable[[PolicySet], None]] = []
    """Told of each new policy set, in the reload's thread before ``reload()`` returns."""
    policy = policy_source(config, metrics, swapped)
    metrics.set_policy_version(policy.current().version)
    authenticator = ResourceServer(
        config,
        outbound,
        metrics=metrics,
        limiter=limiter,
        baseline_scopes=lambda: policy.current().baseline_scopes,
        revocations=state.revocations,
        shared_cache=state.token_cache,
        dpop_replays=state.dpop_replays,
    )
    # One UpstreamBackend per configured backend (its own pool, session, catalog, credential),
    # behind one federation: a single `backend:` is a federation of one.
    keys = GatewayKeys.from_config(config)  # assertion keys: signed by backends, published
    audit = AuditSink.from_config(config.audit)
    pins = _catalog_lock(config, metrics, audit)
    # login: the browser login surface (pages under its prefix), built only when configured.
    trusted = config.trusted_proxies

    def client_address(request: web.Request) -> str:
        """The client's address as the MCP endpoint reads it (behind trusted proxies)."""
        return client_ip(request.remote, request.headers.getall("X-Forwarded-For", []), trusted)

    login = build_surface(
        config,
        outbound,
        state.browser,
        audit=audit,
        metrics=metrics,
        request_id=lambda request: assign_request_id(request, trusted),
        limiter=limiter,
        client_ip=client_address,
    )
    # user_oauth backends: their token store, credentials, connect pages and consent links.
    users = build_user_connections(
        config,
        outbound,
        state,
        login,
        authenticator=authenticator,
        audit=audit,
        metrics=metrics,
        client_ip=client_address,
    )
    # approval: rules: the records, the desk and its pages (none without the login surface).
    approvals = build_approval_desk(config, outbound, state, login, audit=audit, metrics=metrics)
    backend = FederatedBackend(
        [
            UpstreamBackend(
                config,
                outbound,
                settings=settings,
                metrics=metrics,
                keys=keys,
                pins=pins,
                # The lock hashes tools with their override (a reload pushes the new set:
                # backend.use_policy below).
                overrides=policy.current() if pins is not None else None,
                user=users.users.get(settings.name) if users is not None else None,
            )
            for settings in config.backends
        ],
        readiness=config.backend_readiness,
        metrics=metrics,
        max_blob_bytes=config.limits.max_response_bytes,
        policy=policy.current(),  # its tools rules' override: (use_policy after a reload)
        max_description_chars=config.limits.max_description_chars,
    )
    swapped.append(backend.use_policy)
    # An exchanged token (and a reusable assertion) never outlives its caller token's entry.
    authenticator.on_token_dropped(backend.forget_caller)
    metrics.set_max_in_flight(config.limits.max_in_flight)
    observer = GatewayObserver(
        metrics=metrics,
        logging_config=config.logging,
        audit=audit,
        # The endpoint records in_flight/requests_total/duration itself (it sees rejections
        # before a context exists); the observer writes the access line and the audit event.
        record_request_metrics=False,
    )
    tracing = _tracing(config, metrics)
    # policy_external: built only when configured; without it the routes never ask anyone.
    pdp = (
        AuthZenDecisionPoint(config.policy_external, config.resource, outbound, metrics=metrics)
        if config.policy_external is not None
        else None
    )
    # guardrails: built only when configured; a rule may name only what is configured.
    guardrails = _guardrails(config, outbound, metrics)
    endpoint = McpEndpoint(
        config=config,
        authenticator=authenticator,
        policy=policy,
        backend=backend,
        limiter=limiter,
        leases=state.leases,
        observer=observer,
        metrics=metrics,
        request_id=lambda request: assign_request_id(request, config.trusted_proxies),
        tracing=tracing,
        features=Features(
            listening=FederatedListening(backend),
            decision_point=pdp,
            guardrails=guardrails,
            legacy_sessions=legacy_sessions,
            tasks=backend if config.tasks.enabled else None,
            consent=users.links if users is not None else None,
            approvals=approvals,
        ),
    )
    services = Services(
        metrics=metrics,
        authenticator=authenticator,
        policy=policy,
        backend=backend,
        limiter=limiter,
        observer=observer,
        outbound=outbound,
        state_report=state.report,
        backend_report=backend.report,
        issuer_report=authenticator.report,
        revoke=state.revocations.revoke,
        adopt_revocation=state.revocations.adopt,
        reload_policy=policy.reload,
        audit=audit,
        jwks=ops_jwks(keys.jwks if keys.enabled else None, audit.checkpoint_jwk),
    )
    services.login = login
    services.upstream_tokens = users

    def install_routes(app: web.Application) -> None:
        add_mcp_routes(
            app,
            endpoint,
            config=config,
            prm_document=authenticator.protected_resource_metadata,
            jwks_document=keys.jwks if keys.enabled and config.identity_jwks.public else None,
        )
        if login is not None:
            login.install(app)

    services.install_routes = install_routes
    services.add_readiness_check("issuer", lambda: authenticator.ready)
    services.add_readiness_check("backend_catalog", lambda: backend.ready)
    if state.store is not None:
        # A first answer from Redis (or the end of the startup window) before any request.
        services.add_readiness_check("state_store", lambda: state.settled)
    services.background.extend(
        [
            authenticator.start,
            backend.start,
            state.run,
            lambda: watch_catalog_fit(policy, backend),
            lambda: policy.run(config.policy_poll_s),
            lambda: reload_on_sighup(policy, pins),
        ]
    )
    if pins is not None and config.catalog is not None:
        poll_s = config.catalog.poll_s
        services.background.append(lambda: pins.run(poll_s))
    services.drain.append(endpoint.drain)
    services.cleanups.extend([backend.close, authenticator.close, state.close, _async(audit.close)])
    if pdp is not None:
        services.cleanups.append(pdp.close)
    if users is not None:
        services.background.append(users.run)
    if login is not None:
        services.background.append(login.start)
        services.cleanups.append(login.close)
    if tracing is not None:
        tracing.start()
        # Last: the spans of the drained requests are exported (bounded by otlp.timeout_s).
        services.cleanups.append(lambda: asyncio.to_thread(tracing.close))
    return services


def _catalog_lock(config: Config, metrics: Metrics, audit: AuditSink) -> CatalogLock | None:
    """The lock of ``catalog:`` (None without the section: nothing is compared). Raises
    :class:`ConfigError` (``file:line:col``) when the lock file is missing or invalid."""
    if config.catalog is None:
        return None
    return CatalogLock(
        config.catalog.lock, config.catalog.on_change, metrics=metrics, audit=audit.emit
    )


def _guardrails(config: Config, outbound: Outbound, metrics: Metrics) -> GuardrailChain | None:
    """The processors of ``guardrails:`` (None without the section: nothing is ever asked),
    each with its service credential (built as a backend's), and the backend layer's checks of
    what an upstream sends, which a processor's change passes too."""
    if not config.guardrails:
        return None
    processors = {
        settings.name: Processor(
            settings,
            outbound,
            credential=None
            if settings.credential is None
            else make_credential(
                settings.credential, config, outbound, backend=f"guardrail:{settings.name}"
            ),
            metrics=metrics,
        )
        for settings in config.guardrails
    }
    checks = ContentChecks(
        tool_result=sanitize_result,
        prompt_result=prompt_result,
        resource_result=functools.partial(
            read_result, max_blob_bytes=config.limits.max_response_bytes
        ),
        compile_schema=compile_validator,
    )
    return GuardrailChain(processors, checks, metrics=metrics)


def _tracing(config: Config, metrics: Metrics) -> Tracing | None:
    """The OpenTelemetry export (``tracing:``); without the section the SDK is never imported."""
    if config.tracing is None:
        return None
    try:
        from gateway.observability.otel import Tracing  # noqa: PLC0415 - the otel extra
    except ImportError as exc:
        raise ConfigError([f"tracing: {TRACING_PACKAGES}"]) from exc
    return Tracing(config.tracing, metrics=metrics)


def _async(function: Callable[[], None]) -> Callable[[], Awaitable[None]]:
    async def run() -> None:
        function()

    return run
