"""Which trusted issuer(s) may see a bearer token: routing by the JWT's ``iss``.

:meth:`TokenRouter.route` decides before any outbound call:

* a JWS-shaped token (:func:`.jws.parse_compact`) whose payload names an ``iss`` goes to the one
  issuer configured with exactly that ``url`` (RFC 8414 §3.3 / RFC 9068 §4: identifiers compare
  character for character); an ``iss`` no entry has is 401 ``invalid_token`` at once, and a
  malformed JWS is refused the same way. So no token whose ``iss`` is readable is ever sent to
  an issuer that did not issue it;
* any other token (opaque, a JWE, a JWS without ``iss``) goes to the issuers that introspect, in
  configuration order, skipping those whose ``max_token_bytes`` it exceeds; with none, it is
  401 at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gateway.errors import InvalidToken

from .jws import CompactJws, parse_compact
from .trusted_issuer import TrustedIssuer

__all__ = ["Route", "TokenRouter"]


@dataclass(frozen=True, slots=True)
class Route:
    issuers: tuple[TrustedIssuer, ...]
    """One issuer for a JWT; the introspecting issuers, in order, for anything else."""
    jws: CompactJws | None = None
    """The decoded JWT (not verified yet) when the token was routed by its ``iss``."""

    @property
    def introspects(self) -> bool:
        """Whether resolving this route may call an issuer's introspection endpoint."""
        return self.jws is None or self.issuers[0].config.introspects


class TokenRouter:
    def __init__(self, issuers: Sequence[TrustedIssuer]) -> None:
        self._by_iss = {issuer.url: issuer for issuer in issuers}
        self._introspecting = tuple(i for i in issuers if i.config.introspects)

    def route(self, token: str) -> Route:
        """The route for ``token``; raise InvalidToken when no issuer may see it."""
        jws = parse_compact(token)  # raises InvalidToken for a malformed JWS
        if jws is not None and jws.iss is not None:
            issuer = self._by_iss.get(jws.iss)
            if issuer is None:
                raise InvalidToken(detail="iss names no configured issuer")
            return Route((issuer,), jws)
        size = len(token)
        candidates = tuple(i for i in self._introspecting if size <= i.config.max_token_bytes)
        if not candidates:
            raise InvalidToken(
                detail="not a JWT of a configured issuer, and no issuer introspects"
                if not self._introspecting
                else "token longer than every introspecting issuer's max_token_bytes"
            )
        return Route(candidates)
