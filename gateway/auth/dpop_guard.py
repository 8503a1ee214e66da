"""DPoP at the resource server (RFC 9449 §7): which requests need a proof, and the checks that
depend on the token's issuer, its binding and shared state.

:class:`DpopGuard` is used by :class:`~gateway.auth.resource_server.ResourceServer` in two steps:

1. :meth:`~DpopGuard.credentials`, before any cache lookup or issuer call: the token and, for
   the ``DPoP`` scheme, the proof checked by :func:`.dpop.check_proof` against every algorithm
   and the widest ``iat`` window any issuer allows. A bad proof is refused here (401
   ``invalid_dpop_proof``), so it costs no issuer anything and never marks the token refused;
2. :meth:`~DpopGuard.admit`, once the token's principal is known (cached or just checked), in
   order: a bound token with the ``Bearer`` scheme is ``dpop_token_as_bearer`` (the downgrade of
   §7.2); a bearer token of an issuer with ``dpop: required`` is ``dpop_required``; an unbound
   token with the ``DPoP`` scheme is ``invalid_token``; then that issuer's own ``algorithms`` and
   ``iat_window_s``, its ``nonce`` (:mod:`.dpop_nonce`: ``use_dpop_nonce`` with a fresh
   ``DPoP-Nonce``; for a token not cached yet already before any issuer call when every issuer
   it may come from needs one, :meth:`~DpopGuard.check_nonce_early`), the key's thumbprint
   against ``cnf.jkt``, and last the ``jti``: the first use of (thumbprint, ``jti``) within the
   window is recorded in the ``state:`` store
   (:class:`gateway.seams.DpopReplays`, shared by the replicas with Redis), every later one is a
   replay. The accepted principal's ``auth_method`` gains ``+dpop``.

Every refusal is counted in ``dpop_refusals_total{reason}`` and logged with its reason by the
resource server; the proof itself is never logged.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections.abc import Callable, Sequence
from typing import Final, TypeVar

from gateway.config import Config, DpopConfig
from gateway.errors import (
    DpopRequired,
    DpopTokenAsBearer,
    GatewayError,
    InvalidDpopProof,
    InvalidToken,
    UseDpopNonce,
)
from gateway.observability.metric_labels import DPOP_REFUSALS
from gateway.observability.metrics import Metrics
from gateway.seams import AuthMethod, AuthRequest, DpopReplays, Principal, PrincipalFacts

from .bearer import extract_credentials
from .cache import token_digest
from .dpop import Proof, ath_of, check_binding, check_proof, normalise_htu
from .dpop_nonce import NonceKeys

__all__ = ["DpopGuard"]

_BOUND: Final[dict[AuthMethod, AuthMethod]] = {
    "introspection": "introspection+dpop",
    "jwt": "jwt+dpop",
    "jwt+introspection": "jwt+introspection+dpop",
}
_OFF: Final = DpopConfig()
_E = TypeVar("_E", bound=GatewayError)


class DpopGuard:
    def __init__(
        self,
        config: Config,
        replays: DpopReplays | None,
        *,
        metrics: Metrics | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._by_issuer = {issuer.url: issuer.dpop for issuer in config.issuers}
        enabled = [d for d in self._by_issuer.values() if d.enabled]
        self.enabled = bool(enabled)
        """Whether any issuer accepts DPoP-bound tokens (else the ``DPoP`` scheme is unknown)."""
        self.accepts_bearer = any(d.mode != "required" for d in self._by_issuer.values())
        """Whether any issuer accepts bearer tokens (the ``Bearer`` challenge is sent)."""
        self.algorithms = tuple(dict.fromkeys(a for d in enabled for a in d.algorithms))
        self._window = max((d.iat_window_s for d in enabled), default=0)
        htu = normalise_htu(config.resource)
        if self.enabled and htu is None:
            raise ValueError("resource is not a URL a DPoP proof can name (htu)")
        self._htu = htu or ""
        self._replays = replays
        self._clock = clock
        # One bound copy per principal the issuers' caches can hold at once.
        cached = sum(issuer.cache.max_entries for issuer in config.issuers if issuer.dpop.enabled)
        self._bound: PrincipalFacts[Principal] = PrincipalFacts(max(1, cached))
        """Each DPoP-bound principal's copy with its ``+dpop`` method."""
        self._nonces: NonceKeys | None = None
        if any(d.nonce for d in enabled):
            sealing = config.input_requests.seal_key_id
            keys = sorted(config.input_requests.seal_keys, key=lambda k: k.id != sealing)
            self._nonces = NonceKeys([k.key for k in keys], config.resource, clock=clock)
        self._refusals = (
            {r: metrics.dpop_refusals_total.labels(reason=r) for r in DPOP_REFUSALS}
            if metrics is not None
            else {}
        )

    def credentials(
        self, request: AuthRequest, *, max_bytes: int
    ) -> tuple[str, bytes, Proof | None]:
        """(token, its digest (:func:`.cache.token_digest`), the proof for the ``DPoP`` scheme
        or None); raise the bearer rows (see :mod:`.bearer`) or InvalidDpopProof."""
        is_dpop, token = extract_credentials(request, max_bytes=max_bytes, dpop=self.enabled)
        digest = token_digest(token)[0]
        if not is_dpop:
            return token, digest, None
        try:
            proof = check_proof(
                request.dpop,
                ath=ath_of(digest),
                method=request.method,
                htu=self._htu,
                algorithms=self.algorithms,
                iat_window_s=self._window,
                now=self._clock(),
            )
        except InvalidDpopProof as exc:
            raise self._count(exc, exc.reason) from None
        return token, digest, proof

    def nonce(self, issuer: str) -> str | None:
        """A fresh nonce when ``issuer``'s proofs need one (for ``DPoP-Nonce``)."""
        dpop = self._by_issuer.get(issuer, _OFF)
        if not dpop.nonce or self._nonces is None:
            return None
        return self._nonces.current(dpop.nonce_rotation_s)

    def check_nonce_early(self, proof: Proof, issuers: Sequence[str]) -> None:
        """Before any issuer call for an uncached token: when every issuer it may come from
        (its ``iss``, or every introspecting issuer) needs a nonce, a proof without one valid for
        any of them is answered ``use_dpop_nonce`` now (:meth:`admit` checks it again with the
        token's own issuer)."""
        self._check_nonce(proof, [self._by_issuer.get(url, _OFF) for url in issuers])

    def _check_nonce(self, proof: Proof, configs: Sequence[DpopConfig]) -> None:
        """``use_dpop_nonce`` unless some issuer of ``configs`` needs no nonce or the proof's is
        valid for one of them."""
        nonces = self._nonces
        if nonces is None or not configs or not all(c.nonce for c in configs):
            return
        nonce = proof.nonce
        if nonce is None or not any(nonces.valid(nonce, c.nonce_rotation_s) for c in configs):
            fresh = nonces.current(configs[0].nonce_rotation_s)
            detail = "no nonce" if nonce is None else "old or foreign nonce"
            raise self._count(UseDpopNonce(nonce=fresh, detail=detail), "nonce")

    async def admit(self, principal: Principal, proof: Proof | None) -> Principal:
        """The principal for this request, or raise the refusal (module docstring, step 2)."""
        dpop = self._by_issuer.get(principal.issuer, _OFF)
        if proof is None:
            if principal.binding is not None:
                raise self._count(
                    DpopTokenAsBearer(detail="DPoP-bound token as Bearer"), "as_bearer"
                )
            if dpop.mode == "required":
                raise self._count(
                    DpopRequired(detail="bearer token and dpop: required"), "required"
                )
            return principal
        if principal.binding is None:
            raise self._count(InvalidToken(detail="DPoP scheme with an unbound token"), "unbound")
        if proof.alg not in dpop.algorithms:
            raise self._refuse("alg", "alg not allowed for this issuer's DPoP proofs")
        now = self._clock()
        if abs(now - proof.iat) > dpop.iat_window_s:
            raise self._refuse("iat", "iat outside this issuer's window")
        self._check_nonce(proof, (dpop,))
        try:
            check_binding(proof, principal.binding)
        except InvalidDpopProof as exc:
            raise self._count(exc, exc.reason) from None
        if self._replays is not None:
            # Keyed by what the proof's key signed (its thumbprint and jti), never the bytes.
            key = hashlib.sha256(f"{proof.jkt}\x00{proof.jti}".encode()).digest()
            if not await self._replays.first_use(key, proof.iat + dpop.iat_window_s + 1):
                raise self._refuse("replay", "proof jti seen before (replay)")
        # Made once per cached principal, so what is derived from the bound copy (the policy
        # conditions' token context) is made once too, not on every request.
        return self._bound.of(principal, _bound_copy)

    def _refuse(self, reason: str, detail: str) -> InvalidDpopProof:
        return self._count(InvalidDpopProof(reason=reason, detail=detail), reason)

    def _count(self, error: _E, reason: str) -> _E:
        counter = self._refusals.get(reason)
        if counter is not None:
            counter.inc()
        return error


def _bound_copy(principal: Principal) -> Principal:
    """The principal of a request whose DPoP proof matched its token's binding."""
    method = _BOUND.get(principal.auth_method, principal.auth_method)
    return dataclasses.replace(principal, auth_method=method)
