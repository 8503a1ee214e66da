"""The gateway as an OpenID Connect relying party of one trusted issuer (``login:``).

Authorization code flow with PKCE (OIDC Core 1.0 §3.1, RFC 7636 ``S256``), as a confidential
client authenticated by the one client authentication of :mod:`gateway.outbound.client_auth`:

* **Metadata.** The issuer's (RFC 8414 / OIDC Discovery, :func:`gateway.auth.issuer_metadata
  .discover`, read as a JWT-validating entry reads it: its ``jwks_uri`` is needed here whatever
  the entry's ``tokens``) at start, retried with back-off while it fails, refreshed every
  ``metadata_refresh_s``. The ``authorization_endpoint`` (the browser goes there) must be https;
  the ``token_endpoint`` (it receives the client's credentials) must be on the issuer's origin
  unless ``login.token_endpoint`` names it.
* **Start.** The browser is sent to the authorization endpoint with ``response_type=code``, the
  scopes, a fresh ``state`` and ``nonce`` and the PKCE challenge (authlib builds the URL and the
  challenge); the verifier stays in this browser's sealed sign-in cookie.
* **Answer.** RFC 9207 §2.4 first: an ``iss`` parameter must be the issuer's ``url``, and one
  must be present when the metadata says ``authorization_response_iss_parameter_supported``
  (a mix-up is refused before any code is redeemed); then an ``error`` answer is a failed
  sign-in; then the code is redeemed at the token endpoint (``redirect_uri`` and
  ``code_verifier`` with it) and the ID token validated (:mod:`.id_token`). The access token the
  issuer may return is dropped unread.

The ``state`` check and its single use are the surface's (:mod:`.signin`), before this runs.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from typing import Final

from authlib.oauth2.rfc6749.parameters import prepare_grant_uri
from authlib.oauth2.rfc7636 import create_s256_code_challenge

from gateway.auth.introspection import configured_client_auth, oauth_error_code
from gateway.auth.issuer_metadata import DiscoveryFailed, IssuerMetadata, check_endpoint, discover
from gateway.auth.jwks import JwksCache
from gateway.background import Background
from gateway.config import IssuerConfig, LoginConfig
from gateway.errors import LoginBadRequest, LoginFailed, LoginIssuerMismatch, LoginUnavailable
from gateway.jsonkit.read import JsonError, answer, peer_limits
from gateway.login.cookies import Method, SignIn
from gateway.login.id_token import validate_id_token
from gateway.login.person import BrowserIdentity
from gateway.observability.logging import get_logger
from gateway.outbound.client import Destination, Outbound
from gateway.outbound.client_auth import post_oauth_form
from gateway.outbound.failures import OutboundError
from gateway.retry import refresh_forever

__all__ = ["DESTINATION", "MAX_TOKEN_RESPONSE_BYTES", "RelyingParty"]

DESTINATION: Final = "login"
"""The outbound pool of the surface's requests (metadata, key sets, the token endpoint)."""
MAX_TOKEN_RESPONSE_BYTES: Final = 65_536
RETRY_AFTER_S: Final = 5
MAX_RETRY_S: Final = 60.0
_LIMITS: Final = peer_limits(8)
_log = get_logger("gateway.login")


class RelyingParty:
    """Signs a browser in at ``issuer`` (module docstring)."""

    method: Method = "oidc"

    def __init__(
        self,
        login: LoginConfig,
        issuer: IssuerConfig,
        outbound: Outbound,
        *,
        redirect_uri: str,
        clock: Callable[[], float] = time.time,
        retry_s: float = 1.0,
    ) -> None:
        if login.client_id is None:
            raise ValueError("login.client_id is required for the relying party")
        self._login = login
        self._issuer = issuer
        self._outbound = outbound
        self._client_id: str = login.client_id
        self._redirect_uri = redirect_uri
        self._clock = clock
        self._retry_s = retry_s
        self._auth = configured_client_auth(login.client_id, login, name="login", clock=clock)
        self.keep_claims: tuple[str, ...] = ()
        """ID token claims kept in the session (``approvals.approver_claims``)."""
        # Read as a JWT-validating entry: the ID tokens' keys are needed whatever ``tokens``.
        self._as_jwt = dataclasses.replace(issuer, tokens="jwt")
        self._jwks = JwksCache(self._as_jwt, outbound, destination=DESTINATION, retry_s=retry_s)
        self.metadata: IssuerMetadata | None = None
        self._authorize: str | None = None
        self._token: str | None = None
        self.last_error: str | None = None
        self._refresher = Background(f"login-metadata-refresh:{issuer.url}")

    @property
    def ready(self) -> bool:
        return self._authorize is not None and self._token is not None and self._jwks.ready

    @property
    def failure(self) -> str | None:
        return self.last_error or self._jwks.last_error

    async def start(self) -> None:
        """Discover (never raises: an unreachable issuer is retried in the background), then
        fetch the key set."""
        self._outbound.add(Destination(DESTINATION, connect_timeout_s=self._issuer.timeout_s))
        ok = await self._discover()
        self._refresher.start(lambda: self._refresh_loop(ok))
        await self._jwks.start()

    async def close(self) -> None:
        await self._refresher.close()
        await self._jwks.close()

    async def _discover(self) -> bool:
        try:
            metadata = await discover(self._outbound, self._as_jwt, destination=DESTINATION)
            authorize = check_endpoint(
                metadata.authorization_endpoint,
                self._issuer,
                name="authorization_endpoint",
                same_origin_only=False,
            )
            token = self._login.token_endpoint or check_endpoint(
                metadata.token_endpoint, self._issuer, name="token_endpoint"
            )
        except DiscoveryFailed as failed:
            self.last_error = str(failed)
            _log.error("login.discovery_failed", issuer=self._issuer.url, reason=str(failed))
            return False
        if metadata.jwks_uri is not None:
            self._jwks.set_uri(metadata.jwks_uri)
        if metadata != self.metadata:
            _log.info(
                "login.metadata_loaded",
                issuer=self._issuer.url,
                source=metadata.source,
                iss_parameter=metadata.iss_parameter,
            )
        self.metadata, self._authorize, self._token = metadata, authorize, token
        self.last_error = None
        return True

    async def _refresh_loop(self, ok: bool) -> None:
        await refresh_forever(
            self._discover,
            every_s=self._issuer.metadata_refresh_s,
            first_retry_s=self._retry_s,
            max_retry_s=MAX_RETRY_S,
            succeeded=ok,
            crashed=lambda: _log.exception("login.discovery_crashed", issuer=self._issuer.url),
        )

    # --- a sign-in -------------------------------------------------------------------------

    def authorization_url(self, signin: SignIn) -> str:
        """Where the browser goes to sign in; raises LoginUnavailable before discovery."""
        if self._authorize is None or not self._jwks.ready:
            raise LoginUnavailable(retry_after=RETRY_AFTER_S, detail="issuer not ready")
        url: str = prepare_grant_uri(
            self._authorize,
            self._client_id,
            "code",
            redirect_uri=self._redirect_uri,
            scope=" ".join(self._login.scopes),
            state=signin.state,
            nonce=signin.nonce,
            code_challenge=create_s256_code_challenge(signin.verifier),
            code_challenge_method="S256",
        )
        return url

    async def identity(self, params: Mapping[str, str], signin: SignIn) -> BrowserIdentity:
        """Who the authorization response ``params`` proves is in the browser (module
        docstring); ``signin`` is this browser's, its ``state`` already checked."""
        metadata = self.metadata
        iss = params.get("iss")
        if iss is not None and iss != self._issuer.url:
            raise LoginIssuerMismatch(detail="iss is another issuer's")
        if iss is None and metadata is not None and metadata.iss_parameter:
            raise LoginIssuerMismatch(detail="iss missing though the issuer advertises it")
        if "error" in params:
            raise LoginFailed(detail=f"issuer answered {_bounded(params['error'])}")
        code = params.get("code")
        if not code:
            raise LoginBadRequest(detail="authorization response without code")
        id_token = await self._redeem(code, signin.verifier)
        return await validate_id_token(
            id_token,
            self._jwks,
            self._issuer,
            client_id=self._client_id,
            nonce=signin.nonce,
            now=self._clock(),
            max_age_s=self._login.login_ttl_s,
            keep=self.keep_claims,
        )

    async def _redeem(self, code: str, verifier: str) -> str:
        """The ID token the token endpoint gives for ``code`` (RFC 6749 §4.1.3, RFC 7636 §4.5)."""
        endpoint = self._token
        if endpoint is None:
            raise LoginUnavailable(retry_after=RETRY_AFTER_S, detail="issuer not ready")
        form = [
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", self._redirect_uri),
            ("code_verifier", verifier),
        ]
        try:
            response = await post_oauth_form(
                self._outbound,
                DESTINATION,
                endpoint,
                form,
                auth=self._auth,
                audience=self._issuer.url,  # private_key_jwt: the issuer identifier (rfc7523bis)
                timeout_s=self._issuer.timeout_s,
                max_body=MAX_TOKEN_RESPONSE_BYTES,
                span="mcp_gateway.login_token",
            )
        except OutboundError:
            raise LoginUnavailable(retry_after=RETRY_AFTER_S, detail="token endpoint") from None
        if response.status in (400, 401, 403):
            error = oauth_error_code(response.body)
            if error == "invalid_client" or response.status != 400:
                # The operator's problem: the gateway's own client is refused.
                _log.error(
                    "login.client_rejected",
                    issuer=self._issuer.url,
                    status=response.status,
                    error=error,
                )
            raise LoginFailed(detail=f"token endpoint refused the code: {error}")
        if response.status != 200:
            raise LoginUnavailable(retry_after=RETRY_AFTER_S, detail="token endpoint status")
        try:
            doc = answer(response.content_type, response.body, _LIMITS)
        except JsonError:
            raise LoginUnavailable(retry_after=RETRY_AFTER_S, detail="token answer") from None
        id_token = doc.get("id_token")
        if not isinstance(id_token, str) or not id_token:
            raise LoginFailed(detail="token answer without id_token")
        return id_token


def _bounded(value: str) -> str:
    """An issuer's ``error`` code for the log: RFC 6749 codes are short ``[a-z_]`` words."""
    return value if len(value) <= 64 and value.replace("_", "").isalpha() else "other"
