"""An external verifier instead of the relying party (``login.verifier``; issue 45, as AWS
AgentCore's session binding): the operator's own service proves who is in the browser.

The protocol (docs/user-authorization.md#an-external-verifier):

1. The gateway sends the browser (303) to ``verifier.url`` with the query parameters
   ``response_type=login_assertion``, ``redirect_uri`` (``<origin><prefix>/verifier/callback``),
   ``state`` and ``nonce`` (fresh random values, bound to this browser by its sealed sign-in
   cookie) and ``audience`` (the gateway's ``resource``). Nothing else, nothing secret.
2. The verifier authenticates the person however it likes (its own SSO session, a step-up),
   then sends the browser (a redirect: a ``GET``) to ``redirect_uri`` with ``state`` unchanged
   and ``assertion``: a compact JWS signed with a key of its JWK Set (``verifier.jwks_uri``),
   header ``typ: login-assertion+jwt`` (explicit typing, RFC 8725 §3.11: no other JWT its key
   signs can pass for one), claims ``iss`` (``verifier.issuer``), ``aud`` (the ``audience``
   sent), ``iat``, ``exp`` (at most :data:`MAX_LIFETIME_S` after ``iat``), ``nonce`` (the one
   sent) and ``sub_id``, an RFC 9493 subject identifier of format ``iss_sub``: the person's
   trusted issuer (one of ``issuers:``) and subject, exactly as that issuer entry derives it for
   MCP callers. On failure it sends ``error`` (an RFC 6749 code) and ``state`` instead.
3. The gateway checks ``state`` (this browser's, first use), then the assertion: signature and
   header by the auth layer's checks, the claims above, ``iat`` no older than the sign-in may
   take. The assertion is bound to this browser's nonce and used once, so it is no bearer
   credential on its own; still, it carries no secret beyond the person's identifiers.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, Final
from urllib.parse import urlencode

from authlib.oauth2.claims import JWTClaims
from joserfc.errors import JoseError

from gateway.auth.claims import MAX_IDENTITY_CHARS
from gateway.auth.jwks import JwksCache
from gateway.config import IssuerConfig, LoginVerifierConfig
from gateway.errors import LoginBadRequest, LoginFailed
from gateway.login.cookies import Method, SignIn
from gateway.login.id_token import parse_signed
from gateway.login.person import BrowserIdentity
from gateway.login.relying_party import DESTINATION
from gateway.outbound.client import Destination, Outbound

__all__ = [
    "ASSERTION_TYP",
    "MAX_ASSERTION_BYTES",
    "MAX_LIFETIME_S",
    "RESPONSE_TYPE",
    "ExternalVerifier",
]

RESPONSE_TYPE: Final = "login_assertion"
ASSERTION_TYP: Final = "application/login-assertion+jwt"
"""The assertion's ``typ`` (``login-assertion+jwt``, normalised as a media type)."""
MAX_LIFETIME_S: Final = 300
MAX_ASSERTION_BYTES: Final = 8192


class ExternalVerifier:
    """The gateway's side of the protocol in the module docstring."""

    method: Method = "verifier"

    def __init__(
        self,
        config: LoginVerifierConfig,
        issuers: tuple[IssuerConfig, ...],
        outbound: Outbound,
        *,
        redirect_uri: str,
        audience: str,
        max_age_s: int,
        clock: Callable[[], float] = time.time,
        retry_s: float = 1.0,
    ) -> None:
        self._config = config
        self._issuers = frozenset(issuer.url for issuer in issuers)
        self._skew = max((issuer.clock_skew_s for issuer in issuers), default=30)
        self._outbound = outbound
        self._redirect_uri = redirect_uri
        self._audience = audience
        self._max_age_s = max_age_s
        self._clock = clock
        # Its key set is fetched, vetted and refreshed as a JWT-validating issuer's.
        keys = IssuerConfig(
            url=config.issuer,
            tokens="jwt",
            jwks_uri=config.jwks_uri,
            algorithms=config.algorithms,
            timeout_s=config.timeout_s,
            allow_insecure_http=config.allow_insecure_http,
        )
        self._jwks = JwksCache(keys, outbound, destination=DESTINATION, retry_s=retry_s)

    @property
    def ready(self) -> bool:
        return self._jwks.ready

    @property
    def failure(self) -> str | None:
        return self._jwks.last_error

    async def start(self) -> None:
        self._outbound.add(Destination(DESTINATION, connect_timeout_s=self._config.timeout_s))
        await self._jwks.start()

    async def close(self) -> None:
        await self._jwks.close()

    def authorization_url(self, signin: SignIn) -> str:
        query = urlencode(
            {
                "response_type": RESPONSE_TYPE,
                "redirect_uri": self._redirect_uri,
                "state": signin.state,
                "nonce": signin.nonce,
                "audience": self._audience,
            }
        )
        return f"{self._config.url}?{query}"

    async def identity(self, params: Mapping[str, str], signin: SignIn) -> BrowserIdentity:
        if "error" in params:
            raise LoginFailed(detail="the verifier answered an error")
        assertion = params.get("assertion")
        if not assertion:
            raise LoginBadRequest(detail="verifier answer without assertion")
        jws = await parse_signed(
            assertion,
            self._jwks,
            algorithms=frozenset(self._config.algorithms),
            typs=frozenset({ASSERTION_TYP}),
            max_bytes=MAX_ASSERTION_BYTES,
        )
        claims = JWTClaims(
            jws.claims,
            jws.header,
            options={
                "iss": {"essential": True, "value": self._config.issuer},
                "aud": {"essential": True, "value": self._audience},
                "exp": {"essential": True},
                "iat": {"essential": True},
                "nonce": {"essential": True, "value": signin.nonce},
            },
        )
        now = self._clock()
        try:
            claims.validate(now=int(now), leeway=self._skew)
        except JoseError as refused:
            raise LoginFailed(detail=f"assertion claims: {refused.error}") from None
        issued, expires = claims["iat"], claims["exp"]
        if expires - issued > MAX_LIFETIME_S or issued < now - self._max_age_s - self._skew:
            raise LoginFailed(detail="assertion lifetime or age out of bounds")
        return self._subject(claims.get("sub_id"))

    def _subject(self, sub_id: Any) -> BrowserIdentity:
        """RFC 9493 §3.2.3 ``iss_sub``, of a trusted issuer, with a bounded subject."""
        if not isinstance(sub_id, dict) or sub_id.get("format") != "iss_sub":
            raise LoginFailed(detail="assertion sub_id is not an iss_sub identifier")
        iss, sub = sub_id.get("iss"), sub_id.get("sub")
        if iss not in self._issuers:
            raise LoginFailed(detail="assertion names an issuer that is not trusted")
        if not isinstance(sub, str) or not sub or len(sub) > MAX_IDENTITY_CHARS:
            raise LoginFailed(detail="assertion sub_id has no usable sub")
        return BrowserIdentity(str(iss), sub)
