"""RFC 8693 token exchange: the backend gets an issuer-minted token for the caller, not ours.

``credential.type: token_exchange``. For every ``tools/call`` the caller's token (a
:class:`~gateway.seams.CallerToken`, the only path by which it leaves the front door) is
exchanged at the issuer's token endpoint for a token whose audience is the backend (§2.1:
``subject_token``, ``subject_token_type`` access_token, ``audience`` and/or RFC 8707
``resource``, ``scope``, ``requested_token_type``, and with ``actor: service`` the gateway's
own client-credentials token as ``actor_token``). The caller's token goes only to that token
endpoint; the exchanged token only to this backend.

* **Which token endpoint**: ``credential.token_endpoint``, else the one of the issuer that
  issued the caller's token (``Principal.issuer``: its ``token_endpoint``, else RFC 8414 / OIDC
  discovery), so a caller's token never reaches another issuer. ``credential.issuer`` limits
  the backend to one issuer's callers (others: ``exchange_refused``, ``issuer_not_accepted``).
* **Cache**: one exchanged token per (SHA-256 of the caller's token, backend), reused until
  ``expires_in`` minus ``refresh_margin_s`` (at most half the lifetime) and never past the
  caller's own ``exp``; at most :data:`MAX_EXCHANGED` per backend (LRU). Concurrent calls of one
  caller share one exchange (single-flight). An entry is dropped with the caller's token: on a
  revocation at the gateway, and whenever the caller's token leaves the authenticator's cache
  (so an exchanged token is never used longer than the caller's token is verified). An upstream
  401 drops it and exchanges once more.
* **Failures** never fall back to the service credential or the caller's token: an issuer
  refusal (HTTP 400/401/403 with an RFC 6749 §5.2 error naming the grant, client, target,
  scope or access) is ``exchange_refused`` (403); an unreachable, slow or garbled token endpoint,
  or one that refuses the gateway's own client authentication, is ``exchange_unavailable``
  (503, ``Retry-After``).
* **Catalog traffic** (``server/discover``, ``tools/list``, change streams) has no caller: it
  carries the client-credentials token of the same client at the same endpoint (the ``actor``
  token), as a ``client_credentials`` backend would.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from gateway import b64url
from gateway.backend.credentials.service_credential import (
    ClientCredentials,
    CredentialError,
    ServiceCredential,
    TokenClient,
    discover_token_endpoint,
    parse_token_response,
)
from gateway.bounded import BoundedMap
from gateway.config import ACCESS_TOKEN_TYPE, TOKEN_EXCHANGE_GRANT, Config, CredentialConfig
from gateway.errors import EXCHANGE_REFUSALS, ExchangeRefused, ExchangeUnavailable, InternalError
from gateway.flights import SingleFlight
from gateway.jsonkit.read import JsonError, answer, loads_object
from gateway.observability.logging import get_logger
from gateway.observability.metrics import Metrics
from gateway.outbound.client import Outbound
from gateway.outbound.failures import OutboundError
from gateway.seams import CallerToken, Principal, RequestContext

__all__ = ["EXCHANGE_RETRY_AFTER_S", "MAX_EXCHANGED", "Exchanged", "TokenExchange"]

MAX_EXCHANGED: Final = 10_000
"""Exchanged tokens kept per backend (LRU): one per active caller token."""
EXCHANGE_RETRY_AFTER_S: Final = 5
_MAX_RESPONSE: Final = 65_536
_JWT_TYPE: Final = "urn:ietf:params:oauth:token-type:jwt"
_BEARER_TYPES: Final = frozenset({ACCESS_TOKEN_TYPE, _JWT_TYPE})
"""``issued_token_type`` values usable as a bearer access token."""
_FINGERPRINT_HEX: Final = 12
_MAX_ACTOR: Final = 256

_log = get_logger("gateway.backend.exchange")


@dataclass(frozen=True, slots=True)
class Exchanged:
    """One exchanged token and what the audit trail says about it."""

    token: str
    fingerprint: str
    """SHA-256 prefix, like the caller's ``token_fp``: correlates with the backend's logs."""
    actor: str | None
    """``act.sub`` of the exchanged token when it is a JWT, else the actor the gateway sent."""
    fresh_until: float
    """``time.monotonic()`` instant until which it is reused."""
    exchanged: bool = True
    """False when served from the cache."""


_Outcome = Exchanged | ExchangeRefused | ExchangeUnavailable


class TokenExchange:
    """One backend's token-exchange credential (see the module docstring).

    Also a :class:`~gateway.backend.credentials.service_credential.ServiceCredential`
    (``token``/``invalidate``) for the backend's traffic that has no caller."""

    def __init__(
        self,
        credential: CredentialConfig,
        config: Config,
        outbound: Outbound,
        *,
        backend: str,
        metrics: Metrics | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        if credential.client_id is None:
            raise CredentialError("token_exchange needs a client_id")
        self._cred = credential
        self._config = config
        self._outbound = outbound
        self._backend = backend
        self._clock = clock
        self._wall = wall
        self._issuers = {issuer.url: issuer for issuer in config.issuers}
        home = self._issuers.get(credential.issuer or "", config.issuer)
        self._home = home.url
        # The gateway's own token per issuer: catalog traffic (home issuer) and actor tokens.
        self._service: dict[str, ClientCredentials] = {
            home.url: ClientCredentials(
                credential, config, outbound, clock=clock, backend=backend, issuer=home
            )
        }
        self._tokens = TokenClient(outbound, credential)
        self._endpoints: dict[str, str] = {}
        self._cache: BoundedMap[bytes, Exchanged] = BoundedMap(MAX_EXCHANGED)
        """Expiring at each token's ``fresh_until``."""
        self._flights: SingleFlight[_Outcome] = SingleFlight()
        self._counters = (
            {
                result: metrics.token_exchanges_total.labels(backend=backend, result=result)
                for result in ("ok", "refused", "unavailable")
            }
            if metrics is not None
            else {}
        )
        self.exchanges = 0
        """Exchange requests sent so far (tests)."""

    # --- the backend's own traffic (no caller) ----------------------------------------------

    async def token(self, deadline: float) -> str:
        return await self._service[self._home].token(deadline)

    def invalidate(self, token: str) -> bool:
        return self._service[self._home].invalidate(token)

    # --- per call ---------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._cache)

    async def exchanged(
        self, caller: CallerToken, principal: Principal, deadline: float
    ) -> Exchanged:
        """The token for this caller at this backend: cached, or exchanged now (one flight per
        caller token). Raises :class:`ExchangeRefused` or :class:`ExchangeUnavailable`."""
        key = caller.digest
        found = self._cache.get(key, self._clock())
        if found is not None:
            return dataclasses.replace(found, exchanged=False)
        if self._cred.issuer is not None and principal.issuer != self._cred.issuer:
            self._count("refused")
            raise ExchangeRefused(data={"reason": "issuer_not_accepted"})
        flight = self._flights.joining(key)
        if flight is None:
            flight = self._flights.start(key, lambda: self._exchange(caller, principal, deadline))
        # Shielded: a caller that goes away does not cancel the exchange the others wait for.
        outcome = await asyncio.shield(flight)
        if isinstance(outcome, Exchanged):
            return outcome
        raise type(outcome)(data=outcome.data, retry_after=outcome.retry_after)

    async def for_call(
        self,
        caller: CallerToken | None,
        principal: Principal,
        ctx: RequestContext,
        deadline: float,
    ) -> ServiceCredential:
        """The credential of one ``tools/call``: the caller's exchanged token (exchanged now
        when not cached, so a refusal is raised before anything goes upstream), recorded for the
        audit trail in ``ctx.extra["exchange"]``. An upstream 401 exchanges once more."""
        if caller is None:
            # The front door hands the caller's token to every call of an exchanging backend;
            # without it there is nothing to exchange and no fallback (fail closed).
            _log.error("token_exchange_without_caller_token", backend=self._backend)
            raise InternalError()
        first = await self.exchanged(caller, principal, deadline)
        ctx.extra["exchange"] = {
            "backend": self._backend,
            "token_fp": first.fingerprint,
            "act": first.actor,
            "exchanged": first.exchanged,
        }
        return _CallCredential(self, caller, principal, first)

    def discard(self, caller: CallerToken, token: str) -> None:
        """The backend refused ``token`` (401): exchange again next time."""
        found = self._cache.peek(caller.digest)
        if found is not None and found.token == token:
            self._cache.pop(caller.digest)

    def forget(self, digest: bytes) -> None:
        """The caller's token was revoked or left the authenticator's cache."""
        self._cache.pop(digest)

    # --- the exchange -----------------------------------------------------------------------

    async def _exchange(
        self, caller: CallerToken, principal: Principal, deadline: float
    ) -> _Outcome:
        try:
            endpoint = await self._endpoint(principal.issuer, deadline)
            form = await self._form(caller, principal, deadline)
        except CredentialError as exc:
            _log.warning("token_exchange_failed", backend=self._backend, reason=str(exc))
            return self._unavailable()
        issuer = self._issuers.get(principal.issuer, self._config.issuer)
        started = self._clock()
        self.exchanges += 1
        try:
            response = await self._tokens.post(
                endpoint,
                form,
                issuer.timeout_s,
                deadline,
                max_body=_MAX_RESPONSE,
                span="mcp_gateway.token_exchange",
            )
        except OutboundError as exc:
            _log.warning("token_exchange_failed", backend=self._backend, reason=type(exc).__name__)
            return self._unavailable()
        try:
            # RFC 6749 §5.1/§5.2: the answer and the refusal alike are a JSON object.
            payload: Any = answer(response.content_type, response.body)
        except JsonError:
            payload = None
        if response.status != 200:
            return self._refusal(response.status, payload)
        try:
            token, lifetime = parse_token_response(payload)
            issued = payload.get("issued_token_type")  # RFC 8693 §2.2.1: REQUIRED
            if issued not in _BEARER_TYPES:
                raise CredentialError("issued_token_type is not an access token")
        except CredentialError as exc:
            _log.warning("token_exchange_failed", backend=self._backend, reason=str(exc))
            return self._unavailable()
        if token == caller.reveal():  # an issuer that echoes the subject token: never forward it
            _log.warning("token_exchange_failed", backend=self._backend, reason="echoed")
            return self._unavailable()
        margin = min(float(self._cred.refresh_margin_s), lifetime / 2)
        # Never past the caller's own exp (wall clock), converted to this clock.
        caller_left = principal.expires_at - self._wall()
        fresh_until = started + min(lifetime - margin, caller_left)
        digest = hashlib.sha256(token.encode("ascii")).hexdigest()
        sent_actor = self._cred.client_id if self._cred.actor == "service" else None
        result = Exchanged(
            token, digest[:_FINGERPRINT_HEX], _actor_of(token) or sent_actor, fresh_until
        )
        self._count("ok")
        _log.info(
            "token_exchanged",
            backend=self._backend,
            caller_fp=principal.fingerprint,
            token_fp=result.fingerprint,
            expires_in=lifetime,
            issued_token_type=issued,
        )
        if fresh_until > self._clock():
            self._cache.put(caller.digest, result, fresh_until)
        return result

    async def _endpoint(self, issuer_url: str, deadline: float) -> str:
        if self._cred.token_endpoint is not None:
            return self._cred.token_endpoint
        known = self._endpoints.get(issuer_url)
        if known is not None:
            return known
        issuer = self._issuers.get(issuer_url)
        if issuer is None:  # a principal of an issuer not configured: cannot happen, fail closed
            raise CredentialError("the caller's issuer is not configured")
        endpoint = issuer.token_endpoint or await discover_token_endpoint(
            self._outbound, issuer, deadline
        )
        self._endpoints[issuer_url] = endpoint
        return endpoint

    async def _form(
        self, caller: CallerToken, principal: Principal, deadline: float
    ) -> list[tuple[str, str]]:
        cred = self._cred
        form = [
            ("grant_type", TOKEN_EXCHANGE_GRANT),
            ("subject_token", caller.reveal()),
            ("subject_token_type", ACCESS_TOKEN_TYPE),
            ("requested_token_type", cred.requested_token_type),
        ]
        if cred.resource:
            form.append(("resource", cred.resource))  # RFC 8707 §2
        if cred.audience:
            form.append(("audience", cred.audience))
        if cred.scope:
            form.append(("scope", cred.scope))
        if cred.actor == "service":
            actor = await self._actor(principal.issuer).token(deadline)
            form += [("actor_token", actor), ("actor_token_type", ACCESS_TOKEN_TYPE)]
        return form

    def _actor(self, issuer_url: str) -> ClientCredentials:
        found = self._service.get(issuer_url)
        if found is None:
            issuer = self._issuers.get(issuer_url, self._config.issuer)
            found = self._service[issuer_url] = ClientCredentials(
                self._cred,
                self._config,
                self._outbound,
                clock=self._clock,
                backend=self._backend,
                issuer=issuer,
            )
        return found

    def _refusal(self, status: int, payload: Any) -> _Outcome:
        error = payload.get("error") if isinstance(payload, dict) else None
        if status in (400, 401, 403) and error in EXCHANGE_REFUSALS:
            self._count("refused")
            _log.info("token_exchange_refused", backend=self._backend, error=error, status=status)
            return ExchangeRefused(data={"reason": error})
        # invalid_client, invalid_request, unsupported_grant_type, 5xx, ...: the gateway's own
        # configuration or the issuer is at fault, not the caller.
        code = error if isinstance(error, str) and len(error) <= 64 else None
        _log.warning("token_exchange_failed", backend=self._backend, status=status, error=code)
        return self._unavailable()

    def _unavailable(self) -> ExchangeUnavailable:
        self._count("unavailable")
        return ExchangeUnavailable(retry_after=EXCHANGE_RETRY_AFTER_S)

    def _count(self, result: str) -> None:
        counter = self._counters.get(result)
        if counter is not None:
            counter.inc()


def _actor_of(token: str) -> str | None:
    """``act.sub`` of a JWT the token endpoint just handed us (for the audit trail only; the
    backend verifies the token, the gateway does not)."""
    parts = token.split(".")
    if len(parts) != 3 or len(parts[1]) > 16_384:
        return None
    decoded = b64url.decode(parts[1])
    if decoded is None:
        return None
    try:
        claims = loads_object(decoded[0])
    except JsonError:
        return None
    act = claims.get("act")
    actor = act.get("sub") if isinstance(act, dict) else None
    return actor if isinstance(actor, str) and 0 < len(actor) <= _MAX_ACTOR else None


class _CallCredential:
    """:class:`~gateway.backend.credentials.service_credential.ServiceCredential` of one call: its
    exchanged token; after an upstream 401, one fresh exchange."""

    __slots__ = ("_caller", "_exchange", "_next", "_principal")

    def __init__(
        self, exchange: TokenExchange, caller: CallerToken, principal: Principal, first: Exchanged
    ) -> None:
        self._exchange = exchange
        self._caller = caller
        self._principal = principal
        self._next: Exchanged | None = first

    async def token(self, deadline: float) -> str:
        found, self._next = self._next, None
        if found is None:
            found = await self._exchange.exchanged(self._caller, self._principal, deadline)
        return found.token

    def invalidate(self, token: str) -> bool:
        self._exchange.discard(self._caller, token)
        return True
