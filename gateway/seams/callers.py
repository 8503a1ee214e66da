"""Who is calling: the principal, the token it came with, and the Protocols that prove,
revoke and cache it (``gateway/auth``, ``gateway/state``)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Generic, Literal, Protocol, TypeVar, get_args, runtime_checkable

from gateway.bounded import BoundedMap
from gateway.errors import GatewayError

__all__ = [
    "AUTH_METHODS",
    "NO_CLAIMS",
    "AuthMethod",
    "AuthRequest",
    "Authenticator",
    "CachedPrincipal",
    "CallerToken",
    "DpopReplays",
    "Principal",
    "PrincipalFacts",
    "Revocations",
    "SharedTokenCache",
    "find_claim",
    "frozen_claims",
]

F = TypeVar("F")

AuthMethod = Literal[
    "introspection",
    "jwt",
    "jwt+introspection",
    "introspection+dpop",
    "jwt+dpop",
    "jwt+introspection+dpop",
]
"""How a principal's token was checked (``issuer.tokens``, and ``+dpop`` when the request
carried a valid DPoP proof for a bound token, RFC 9449): a bounded metrics label and an audit
field, nothing else downstream may depend on it."""


AUTH_METHODS: tuple[AuthMethod, ...] = get_args(AuthMethod)
"""Every :data:`AuthMethod`, read from the ``Literal`` so the two cannot drift."""


# --- identity -------------------------------------------------------------------------------


NO_CLAIMS: Mapping[str, Any] = MappingProxyType({})
"""``Principal.claims`` of a principal built without a token (tests, ``policy explain``)."""


def _no_claims() -> Mapping[str, Any]:
    return NO_CLAIMS


def frozen_claims(claims: Mapping[str, Any]) -> Mapping[str, Any]:
    """A read-only copy of a validated token's claims for ``Principal.claims`` (shallow: the
    values are the JSON the issuer sent, never written to afterwards)."""
    return MappingProxyType(dict(claims)) if claims else NO_CLAIMS


def find_claim(claims: Mapping[str, Any], name: str) -> tuple[bool, Any]:
    """``(found, value)`` of the claim ``name``: as written, else a dotted path into nested
    objects (``realm_access.roles``). What an operator's list of claims to send elsewhere names
    (``policy_external.subject_properties``, ``guardrails.<name>.claims``)."""
    if name in claims:
        return True, claims[name]
    value: Any = claims
    for part in name.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return False, None
        value = value[part]
    return True, value


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling, as established by introspection or local JWT validation. Never holds
    the token itself."""

    subject: str
    client_id: str | None
    scopes: frozenset[str]
    expires_at: float
    """Unix time (``exp``) as the issuer said it."""
    issuer: str
    fingerprint: str
    """Short, non-reversible token fingerprint (safe for logs)."""
    skew_s: float = 0.0
    """``issuer.clock_skew_s``: how long past ``exp`` the token is still accepted."""
    auth_method: AuthMethod = "introspection"
    actor: str | None = None
    """``act.sub`` of a delegated token (RFC 8693 §4.1): who acts for the subject, if anyone."""
    binding: str | None = None
    """The key the token is bound to (RFC 9449 ``cnf.jkt``: the RFC 7638 thumbprint), None for
    a bearer token. A bound principal is served only to a request whose DPoP proof is signed
    by that key (``gateway/auth``); it is part of every cached or shared copy."""
    claims: Mapping[str, Any] = field(default_factory=_no_claims, compare=False, repr=False)
    """The validated token's claims, read-only (:func:`frozen_claims`): the verified JWT's
    payload, or the introspection answer's members without ``active``; for
    ``jwt+introspection`` the JWT's. Absent keys are absent. The base of policy conditions
    (issue 25). Never logged (``repr=False``: they name people), never sent to a backend; the
    shared token cache carries them (:mod:`gateway.state.token_cache`)."""

    @property
    def valid_until(self) -> float:
        """The one effective expiry (``exp + clock_skew_s``): the claim check, the re-check
        before dispatch and the cache lifetime all use it."""
        return self.expires_at + self.skew_s

    def expired(self, now: float | None = None) -> bool:
        return (time.time() if now is None else now) >= self.valid_until


class PrincipalFacts(Generic[F]):
    """What one layer derives from a principal once and keeps for it: the policy's CEL context
    of its token facts (:mod:`gateway.policy.conditions`), the DPoP guard's copy of it with its
    ``+dpop`` method (:mod:`gateway.auth.dpop_guard`). One owner per kind of fact, typed and
    bounded: the ``max_entries`` principals most recently asked about keep theirs, the least
    recently used gives its fact up first (it is derived again when asked).

    Keyed by the principal object: the auth layer caches it (one per token and replica), so a
    fact is derived once per token, not per request; a copy (``dataclasses.replace``) is another
    principal with facts of its own. An entry holds its principal, so no other object takes the
    principal's ``id`` while the entry lives.
    """

    __slots__ = ("_facts",)

    def __init__(self, max_entries: int) -> None:
        self._facts: BoundedMap[int, tuple[Principal, F]] = BoundedMap(max_entries)

    def of(self, principal: Principal, derive: Callable[[Principal], F]) -> F:
        """The principal's fact, derived now (by ``derive``) if it has none."""
        found = self._facts.get(id(principal))
        if found is not None:
            return found[1]
        fact = derive(principal)
        self._facts.put(id(principal), (principal, fact))
        return fact

    def __contains__(self, principal: object) -> bool:
        return id(principal) in self._facts

    def __len__(self) -> int:
        return len(self._facts)

    @property
    def max_entries(self) -> int:
        return self._facts.max_entries


@dataclass(frozen=True, slots=True)
class AuthRequest:
    """What the authenticator may look at: header values and query keys, nothing else."""

    authorization: tuple[str, ...]
    """Every ``Authorization`` header line, in order (more than one is a malformed request)."""
    query_keys: frozenset[str]
    client_ip: str
    dpop: tuple[str, ...] = ()
    """Every ``DPoP`` header line, in order (RFC 9449 §4.3: exactly one is a proof)."""
    method: str = "POST"
    """The request's method (a proof's ``htm``)."""


class CallerToken:
    """The caller's bearer token, for the one consumer allowed to send it on: the RFC 8693
    token-exchange credential of a backend (``credential.type: token_exchange``), which sends it
    to its issuer's token endpoint and nowhere else.

    Built by :meth:`Authenticator.caller_token` only when a backend exchanges tokens, and carried
    on :attr:`ToolCall.caller_token` only for calls to such a backend. ``repr``/``str`` never show
    the value, and it cannot be pickled or copied into another process by accident.
    """

    __slots__ = ("_value", "digest")

    def __init__(self, value: str, digest: bytes) -> None:
        self._value = value
        self.digest = digest
        """SHA-256 of the token: the key of everything derived from it (exchanged tokens)."""

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "CallerToken(***)"

    __str__ = __repr__

    def __reduce__(self) -> Any:
        raise TypeError("a CallerToken is not serialisable")


@runtime_checkable
class Authenticator(Protocol):
    """**Protocol:** the OAuth resource server (``gateway/auth``)."""

    async def authenticate(self, request: AuthRequest) -> Principal:
        """Return the principal or raise TokenInQuery / NoCredentials / InvalidToken /
        IssuerUnavailable / RateLimited. Baseline scopes are the pipeline's check (they live in
        the policy), not the authenticator's."""
        ...

    def challenge(self, error: GatewayError) -> str | None:
        """The ``WWW-Authenticate`` value for ``error`` (None when the row has no challenge)."""
        ...

    def caller_token(self, request: AuthRequest) -> CallerToken:
        """The bearer token of a request :meth:`authenticate` accepted (for token exchange)."""
        ...

    def revocation_key(self, request: AuthRequest) -> bytes:
        """The revocation key of the token of a request :meth:`authenticate` accepted: what a
        revocation names (:class:`Revocations`), under which a stream that outlives its request
        is ended when the token is revoked. Raises InvalidToken when this replica has learnt of
        that revocation since the token was accepted (the request waited meanwhile)."""
        ...

    def outward_scopes(self, scopes: Sequence[str], principal: Principal | None) -> tuple[str, ...]:
        """``scopes`` (the policy's names) as the issuer of ``principal``'s token spells them
        (the reverse of its ``scope_map``); without a principal, as the first issuer does (the
        one clients discover). For every scope the gateway names to a client."""
        ...


class Revocations(Protocol):
    """**Protocol:** tokens revoked at the gateway, by revocation key (``gateway/state``): 32
    bytes naming what the issuer signed (``gateway/state/revocation_key.py``), the same for
    every spelling of one token, never the SHA-256 of the token's bytes alone."""

    async def revoked(self, digest: bytes) -> bool:
        """Whether the token with this revocation key is revoked. Raises RevocationUnavailable
        when it cannot tell and must fail closed. Asked before a token that was not cached is
        accepted; a revocation also evicts every spelling of the token from every cache
        (``forget``), and a cache hit asks :meth:`revoked_locally`."""
        ...

    def revoked_locally(self, digest: bytes) -> bool:
        """Whether this replica already knows the key is revoked (memory only, no I/O): asked
        on every cache hit and before any issuer call, so a revoked token costs the issuer
        nothing."""
        ...


class DpopReplays(Protocol):
    """**Protocol:** DPoP proofs already used (RFC 9449 §11.1), shared by replicas with Redis
    (``gateway/state``). Keyed by what the proof's key signed (its thumbprint and ``jti``)."""

    async def first_use(self, key: bytes, until: float) -> bool:
        """Record ``key`` until the Unix time ``until``; False when it was recorded before (a
        replay). Raises DpopReplayUnavailable when it cannot tell and must fail closed."""
        ...


@dataclass(frozen=True, slots=True)
class CachedPrincipal:
    principal: Principal
    fresh_until: float
    """Unix time until which the introspection result may be used without asking again."""


class SharedTokenCache(Protocol):
    """**Protocol:** introspection results shared by replicas, keyed by the token's SHA-256.

    Store faults never raise: a failed lookup is a miss, a failed claim lets this replica
    introspect itself, a failed write is dropped (the cache is an optimisation).
    """

    async def get(self, digest: bytes) -> CachedPrincipal | None: ...

    async def claim(self, digest: bytes, hold_s: float) -> bool:
        """True: this replica introspects (then :meth:`put` or :meth:`release`); False:
        another replica is introspecting this token right now (:meth:`wait` for it)."""
        ...

    async def wait(self, digest: bytes, timeout_s: float) -> CachedPrincipal | None:
        """The other replica's result, or None when it gave up or ``timeout_s`` passed."""
        ...

    async def put(self, digest: bytes, entry: CachedPrincipal) -> None:
        """Share an accepted token until ``entry.fresh_until`` and release the claim."""
        ...

    async def release(self, digest: bytes) -> None: ...
