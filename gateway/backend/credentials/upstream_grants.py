"""The gateway as an OAuth client of a ``user_oauth`` backend's authorization server.

MCP 2026-07-28 basic/authorization (index.mdx, client-registration.mdx), client side, for one
backend (:class:`UpstreamClient`):

* **Which client.** The pre-registered ``client_id`` (authenticated as
  :mod:`gateway.outbound.client_auth` does every client: secret or ``private_key_jwt``), used at
  the configured ``authorization_server`` only; else the gateway's client metadata document
  (its URL is the client id, a public client) where the server says
  ``client_id_metadata_document_supported``; else a dynamic registration (RFC 7591, deprecated)
  as a public ``web`` client with the one redirect URI, kept per server on this replica. A grant
  remembers the client id it was made for, and is refreshed by that client only.
* **The authorization request** (:meth:`UpstreamClient.authorization_url`): code flow with PKCE
  ``S256``, ``state``, the scopes, RFC 8707 ``resource`` (the upstream's canonical URI, unless
  ``omit_resource``), ``prompt`` and the configured extra parameters.
* **The token requests** (:meth:`UpstreamClient.redeem`, :meth:`UpstreamClient.refresh`): the
  code with its ``redirect_uri`` and ``code_verifier``, or the refresh token, each with the
  same ``resource`` (RFC 8707 §2.2: a refresh names the resource of the grant). The answer is an
  RFC 6749 §5.1 bearer token; a refusal (§5.2, or a 200 carrying ``error``, as GitHub answers)
  is :class:`GrantRefused` with its error code; anything else :class:`GrantUnavailable`.

Nothing here is logged but error codes and statuses: never a token, a code or a verifier.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import urlencode

from gateway import b64url
from gateway.backend.credentials.service_credential import (
    CredentialError,
    build_client_auth,
    parse_token_response,
    time_left,
)
from gateway.backend.credentials.upstream_server import (
    OAUTH_DESTINATION,
    AuthorizationServer,
    ServerUnavailable,
)
from gateway.config import BackendConfig
from gateway.jsonkit.read import JsonError, answer
from gateway.jsonkit.write import compact
from gateway.observability.logging import get_logger
from gateway.outbound.client import Outbound
from gateway.outbound.client_auth import ClientAuthentication, post_oauth_form
from gateway.outbound.failures import OutboundError

__all__ = [
    "UNBOUNDED_S",
    "GrantRefused",
    "GrantUnavailable",
    "Granted",
    "UpstreamClient",
    "pkce_challenge",
]

MAX_TOKEN_RESPONSE: Final = 65_536
UNBOUNDED_S: Final = 365 * 86_400.0
"""The lifetime taken for an access token whose answer names none (the record's idle expiry,
at most ``user_oauth.max_idle_days``, ends it sooner)."""
TOKEN_TIMEOUT_S: Final = 10.0
"""Longest wait for one token request (a refresh lease outlives it)."""
_ERROR_CODE: Final = re.compile(r"[a-z_]{1,64}")
_log = get_logger("gateway.backend.user_oauth")


class GrantRefused(Exception):
    """The server refused the grant (``invalid_grant``: expired, revoked, another client's
    code, a reused refresh token); ``error`` is its RFC 6749 §5.2 code (bounded)."""

    def __init__(self, error: str) -> None:
        super().__init__(error)
        self.error = error


class GrantUnavailable(Exception):
    """The token endpoint could not be asked or answered something unusable (fixed message)."""


@dataclass(frozen=True, slots=True)
class Granted:
    """A token response."""

    access_token: str = field(repr=False)
    refresh_token: str | None = field(repr=False)
    expires_in: float
    """Seconds; :data:`UNBOUNDED_S` when the answer named no lifetime (a token that does not
    expire, as a classic GitHub OAuth app's: the upstream's 401 says when it is refused)."""
    scope: str | None
    """``scope`` of the answer, if it said (RFC 6749 §5.1: when it differs from the request)."""


def pkce_challenge(verifier: str) -> str:
    """RFC 7636 §4.2 ``S256``: base64url(SHA-256(verifier))."""
    return b64url.encode(hashlib.sha256(verifier.encode("ascii")).digest())


class UpstreamClient:
    """One backend's OAuth client side (module docstring)."""

    def __init__(
        self,
        settings: BackendConfig,
        outbound: Outbound,
        *,
        redirect_uri: str,
        client_document: str,
        client_name: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``client_document``: the URL of the gateway's client metadata document (its client
        id where a server accepts one)."""
        self._settings = settings
        self._cred = settings.credential
        self._outbound = outbound
        self.redirect_uri = redirect_uri
        self._document = client_document
        self._client_name = client_name
        self._clock = clock
        self._auth: ClientAuthentication | None = (
            build_client_auth(self._cred) if self._cred.client_id is not None else None
        )
        self._registered: dict[str, str] = {}
        """Dynamically registered client ids, per server issuer (this replica's)."""
        self._lock = asyncio.Lock()
        self.resource = None if self._cred.omit_resource else (self._cred.resource or settings.url)
        """RFC 8707 ``resource`` of every request (None: ``omit_resource``)."""

    @property
    def backend(self) -> str:
        return self._settings.name

    # --- which client -------------------------------------------------------------------

    async def client_id(self, server: AuthorizationServer, deadline: float) -> str:
        """The gateway's client id at ``server`` (module docstring); raises
        :class:`ServerUnavailable` when there is none to use."""
        if self._cred.client_id is not None:
            if server.issuer != self._cred.authorization_server:
                # client-registration.mdx §Authorization Server Binding: never elsewhere.
                raise ServerUnavailable("the pre-registered client belongs to another server")
            return self._cred.client_id
        if server.client_metadata_documents:
            return self._document
        known = self._registered.get(server.issuer)
        if known is not None:
            return known
        if server.registration_endpoint is None:
            raise ServerUnavailable("the server takes no client metadata document or registration")
        async with self._lock:
            known = self._registered.get(server.issuer)
            if known is None:
                known = self._registered[server.issuer] = await self._register(server, deadline)
            return known

    async def _register(self, server: AuthorizationServer, deadline: float) -> str:
        """RFC 7591 §3.1: a public web client with the one redirect URI."""
        assert server.registration_endpoint is not None
        metadata = {
            "client_name": self._client_name,
            "redirect_uris": [self.redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
            "application_type": "web",  # client-registration.mdx: MUST say which
        }
        try:
            response = await self._outbound.request(
                OAUTH_DESTINATION,
                "POST",
                server.registration_endpoint,
                timeout_s=_timeout(deadline),
                body=compact(metadata),
                headers={"Content-Type": "application/json", "Accept": "application/json"},
                max_body=MAX_TOKEN_RESPONSE,
            )
            document = answer(response.content_type, response.body)
        except (OutboundError, JsonError) as exc:
            raise ServerUnavailable("dynamic registration failed") from exc
        client_id = document.get("client_id")
        if response.status not in (200, 201) or not isinstance(client_id, str) or not client_id:
            raise ServerUnavailable(f"dynamic registration refused ({response.status})")
        _log.info("upstream_client_registered", backend=self.backend, server=server.issuer)
        return client_id

    # --- the authorization request --------------------------------------------------------

    def authorization_url(
        self,
        server: AuthorizationServer,
        client_id: str,
        *,
        state: str,
        verifier: str,
        scope: str,
    ) -> str:
        params: list[tuple[str, str]] = [
            ("response_type", "code"),
            ("client_id", client_id),
            ("redirect_uri", self.redirect_uri),
            ("state", state),
            ("code_challenge", pkce_challenge(verifier)),
            ("code_challenge_method", "S256"),
        ]
        if scope:
            params.append(("scope", scope))
        if self.resource is not None:
            params.append(("resource", self.resource))
        if self._cred.prompt is not None:
            params.append(("prompt", self._cred.prompt))
        params.extend(self._cred.extra_authorize_params)
        separator = "&" if "?" in server.authorization_endpoint else "?"
        return server.authorization_endpoint + separator + urlencode(params)

    # --- token requests ---------------------------------------------------------------------

    async def redeem(
        self,
        server: AuthorizationServer,
        client_id: str,
        code: str,
        verifier: str,
        deadline: float,
    ) -> Granted:
        form = [
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", self.redirect_uri),
            ("code_verifier", verifier),
        ]
        return await self._token(server, client_id, form, deadline)

    async def refresh(
        self, server: AuthorizationServer, client_id: str, refresh_token: str, deadline: float
    ) -> Granted:
        form = [("grant_type", "refresh_token"), ("refresh_token", refresh_token)]
        return await self._token(server, client_id, form, deadline)

    async def revoke(
        self, server: AuthorizationServer, client_id: str, token: str, deadline: float
    ) -> bool:
        """RFC 7009, best effort (a disconnect): whether the server took it."""
        if server.revocation_endpoint is None:
            return False
        form = [("token", token), ("token_type_hint", "refresh_token")]
        try:
            status, _ = await self._post(server.revocation_endpoint, client_id, form, deadline)
        except GrantUnavailable:
            return False
        return status == 200

    async def _token(
        self,
        server: AuthorizationServer,
        client_id: str,
        form: list[tuple[str, str]],
        deadline: float,
    ) -> Granted:
        if self.resource is not None:
            form.append(("resource", self.resource))  # RFC 8707 §2.2, on every token request
        status, payload = await self._post(server.token_endpoint, client_id, form, deadline)
        error = payload.get("error") if isinstance(payload, dict) else None
        if error is not None or status != 200:
            code = error if isinstance(error, str) and _ERROR_CODE.fullmatch(error) else "other"
            _log.info("upstream_token_refused", backend=self.backend, status=status, error=code)
            if status in (200, 400, 401) and error is not None:
                raise GrantRefused(code)
            raise GrantUnavailable(f"token endpoint answered {status}")
        try:
            access, lifetime = parse_token_response(payload)
        except CredentialError as exc:
            raise GrantUnavailable(str(exc)) from None
        refresh = payload.get("refresh_token")
        scope = payload.get("scope")
        return Granted(
            access_token=access,
            refresh_token=refresh if isinstance(refresh, str) and refresh else None,
            expires_in=lifetime if "expires_in" in payload else UNBOUNDED_S,
            scope=scope if isinstance(scope, str) else None,
        )

    async def _post(
        self, url: str, client_id: str, form: list[tuple[str, str]], deadline: float
    ) -> tuple[int, Any]:
        auth = self._auth if client_id == self._cred.client_id else None
        if auth is None:
            form = [*form, ("client_id", client_id)]  # a public client (RFC 6749 §3.2.1)
        try:
            response = await post_oauth_form(
                self._outbound,
                OAUTH_DESTINATION,
                url,
                form,
                auth=auth,
                audience=url,  # RFC 7523 §3: aud = the endpoint
                timeout_s=_timeout(deadline),
                max_body=MAX_TOKEN_RESPONSE,
                span="mcp_gateway.upstream_token",
            )
        except OutboundError as exc:
            _log.warning("upstream_token_failed", backend=self.backend, error=type(exc).__name__)
            raise GrantUnavailable("token endpoint unreachable") from exc
        try:
            payload: Any = answer(response.content_type, response.body)
        except JsonError:
            payload = None
        if payload is None and response.status == 200:
            raise GrantUnavailable("token endpoint answered no JSON")
        return response.status, payload


def _timeout(deadline: float) -> float:
    return time_left(TOKEN_TIMEOUT_S, deadline)
