"""The login surface from ``login:`` (called by ``gateway/wiring.py``, and by tests)."""

from __future__ import annotations

import time
from collections.abc import Callable

from aiohttp import web

from gateway.config import Config
from gateway.config.login import login_issuer
from gateway.login.actions import ActionRecords
from gateway.login.address_budget import SurfaceAdmission
from gateway.login.cookies import Cookies
from gateway.login.login_events import LoginAudit
from gateway.login.login_surface import LoginSurface, Prover
from gateway.login.relying_party import RelyingParty
from gateway.login.verifier import ExternalVerifier
from gateway.observability.audit import AuditSink
from gateway.observability.metrics import Metrics
from gateway.outbound.client import Outbound
from gateway.seams import RateLimiter
from gateway.state.browser_records import BrowserState

__all__ = ["build_surface"]


def build_surface(
    config: Config,
    outbound: Outbound,
    store: BrowserState,
    *,
    audit: AuditSink | None,
    metrics: Metrics | None,
    request_id: Callable[[web.Request], str],
    limiter: RateLimiter,
    client_ip: Callable[[web.Request], str],
    clock: Callable[[], float] = time.time,
) -> LoginSurface | None:
    """None without ``login:``. Raises ``ValueError`` for a key the relying party cannot use
    (a private key that does not parse). ``limiter`` and ``client_ip``: the replica's rate
    limiter and the client's address as the MCP endpoint reads it (``login.pre_auth_rate``)."""
    login = config.login
    if login is None:
        return None
    prefix, origin = login.path_prefix, config.public_origin
    callback = f"{origin}{prefix}/callback"
    prover: Prover
    if login.verifier is not None:
        prover = ExternalVerifier(
            login.verifier,
            config.issuers,
            outbound,
            redirect_uri=callback,
            audience=config.resource,
            max_age_s=login.login_ttl_s,
            clock=clock,
        )
    else:
        issuer = login_issuer(login, config.issuers)
        if issuer is None:  # the loader refuses this; a Config built by hand may not
            raise ValueError("login.issuer is not one of the trusted issuers")
        party = RelyingParty(login, issuer, outbound, redirect_uri=callback, clock=clock)
        party.keep_claims = config.approvals.approver_claims  # approver sets (docs/policy.md)
        prover = party
    inputs = config.input_requests
    cookies = Cookies(inputs.seal_keys, inputs.seal_key_id, resource=config.resource, clock=clock)
    events = LoginAudit(audit, metrics, config.logging, clock=clock)
    actions = ActionRecords(store, base_url=origin + prefix, audit=events, clock=clock)
    rate = login.pre_auth_rate
    admission = SurfaceAdmission(limiter, rate, client_ip, metrics) if rate is not None else None
    return LoginSurface(
        prefix=prefix,
        origin=origin,
        prover=prover,
        cookies=cookies,
        store=store,
        actions=actions,
        audit=events,
        session_ttl_s=login.session_ttl_s,
        signin_ttl_s=login.login_ttl_s,
        request_id=request_id,
        admission=admission,
        clock=clock,
    )
