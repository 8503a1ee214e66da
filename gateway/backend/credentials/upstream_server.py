"""Where a ``user_oauth`` backend's authorization server is, and what it supports.

MCP 2026-07-28 basic/authorization/authorization-server-discovery.mdx, as a client:

1. **Which server.** ``credential.authorization_server`` when configured; else the upstream's
   RFC 9728 protected-resource metadata, at the path-inserted well-known URI of the backend's
   URL, then at the root (``/.well-known/oauth-protected-resource[<path>]``). Its ``resource``
   must be the backend's URL (or, at the root, its origin): metadata about another resource is
   not used (RFC 9728 §3.3). The first of its ``authorization_servers`` is taken; a configured
   server must be among them.
2. **Its metadata.** RFC 8414 (``/.well-known/oauth-authorization-server<path>``), then OpenID
   Connect Discovery (path-inserted, then appended), in that order. The document's ``issuer``
   must be exactly the server's identifier (§3.3), it must name ``authorization_endpoint`` and
   ``token_endpoint``, and list ``S256`` in ``code_challenge_methods_supported`` (the MCP
   security considerations: without it the server does not do PKCE, and the gateway refuses to
   proceed). With explicit ``authorization_endpoint`` and ``token_endpoint`` nothing is fetched.

Every URL taken from a document is ``https``, or plain ``http`` to a loopback address when the
backend has ``allow_insecure_http`` (development); without userinfo or fragment. A result is kept
for :data:`METADATA_TTL_S`; a failure is :class:`ServerUnavailable` (the caller's 503), retried at
the next use (at most every :data:`RETRY_S`). Requests go through ``gateway/outbound`` under the
caller's deadline, to a pool of their own (:data:`OAUTH_DESTINATION`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

from gateway.config import BackendConfig, canonical_uri, is_loopback_url
from gateway.jsonkit.read import JsonError, answer
from gateway.observability.logging import get_logger
from gateway.outbound.client import Outbound
from gateway.outbound.failures import OutboundError

__all__ = [
    "METADATA_TTL_S",
    "OAUTH_DESTINATION",
    "AuthorizationServer",
    "ServerDiscovery",
    "ServerUnavailable",
    "allowed_url",
]

OAUTH_DESTINATION: Final = "upstream-oauth"
"""The outbound pool of every request to the ``user_oauth`` backends' authorization servers."""
METADATA_TTL_S: Final = 3600.0
RETRY_S: Final = 5.0
MAX_DOCUMENT: Final = 65_536
_log = get_logger("gateway.backend.user_oauth")


class ServerUnavailable(Exception):
    """The authorization server could not be found or described (fixed message, logs only)."""


@dataclass(frozen=True, slots=True)
class AuthorizationServer:
    """What the gateway needs of one authorization server."""

    issuer: str
    """Its identifier: the ``iss`` its authorization responses must carry (RFC 9207)."""
    authorization_endpoint: str
    token_endpoint: str
    registration_endpoint: str | None = None
    revocation_endpoint: str | None = None
    iss_parameter: bool = False
    """``authorization_response_iss_parameter_supported``: then ``iss`` is required."""
    client_metadata_documents: bool = False
    """``client_id_metadata_document_supported``: a URL client id is accepted."""


def allowed_url(url: Any, *, insecure_ok: bool) -> bool:
    """Whether a URL a document names may be used: https, or http to loopback in development;
    never userinfo or a fragment."""
    if not isinstance(url, str) or len(url) > 2048:
        return False
    parts = urlsplit(url)
    if not parts.hostname or parts.fragment or "#" in url or "@" in parts.netloc:
        return False
    if parts.scheme == "https":
        return True
    return parts.scheme == "http" and insecure_ok and is_loopback_url(url)


class ServerDiscovery:
    """One backend's authorization server, found once and kept (module docstring)."""

    def __init__(
        self,
        settings: BackendConfig,
        outbound: Outbound,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._settings = settings
        self._cred = settings.credential
        self._outbound = outbound
        self._clock = clock
        self._insecure = settings.allow_insecure_http
        self._known: AuthorizationServer | None = None
        self._until = 0.0
        self._failed_at = -RETRY_S
        self._lock = asyncio.Lock()
        explicit = self._cred.authorization_endpoint, self._cred.token_endpoint
        if explicit[0] and explicit[1] and self._cred.authorization_server:
            self._known = AuthorizationServer(
                self._cred.authorization_server, explicit[0], explicit[1]
            )
            self._until = float("inf")

    @property
    def known(self) -> AuthorizationServer | None:
        """The server as last found (None before the first success)."""
        return self._known

    async def server(self, deadline: float) -> AuthorizationServer:
        """The server, found now if not known or stale; raises :class:`ServerUnavailable`."""
        known = self._known
        if known is not None and self._clock() < self._until:
            return known
        async with self._lock:
            known, now = self._known, self._clock()
            if known is not None and now < self._until:
                return known
            if now - self._failed_at < RETRY_S:
                if known is not None:
                    return known  # stale but usable while the server cannot be read again
                raise ServerUnavailable("authorization server not found (retrying later)")
            try:
                found = await self._discover(deadline)
            except ServerUnavailable as exc:
                self._failed_at = now
                _log.warning(
                    "upstream_server_unavailable", backend=self._settings.name, reason=str(exc)
                )
                if known is not None:
                    return known
                raise
            if known is not None and known.issuer != found.issuer:
                _log.warning(
                    "upstream_server_changed", backend=self._settings.name, issuer=found.issuer
                )
            self._known, self._until = found, now + METADATA_TTL_S
            return found

    async def _discover(self, deadline: float) -> AuthorizationServer:
        issuer = self._cred.authorization_server or await self._from_resource(deadline)
        return await self._metadata(issuer, deadline)

    async def _from_resource(self, deadline: float) -> str:
        """RFC 9728: the first authorization server the upstream names for itself."""
        url = self._settings.url
        parts = urlsplit(url)
        origin = f"{parts.scheme}://{parts.netloc}"
        path = parts.path.rstrip("/")
        candidates: list[tuple[str, tuple[str, ...]]] = [
            (f"{origin}/.well-known/oauth-protected-resource{path}", (url,))
        ]
        if path:
            candidates.append((f"{origin}/.well-known/oauth-protected-resource", (url, origin)))
        for where, resources in candidates:
            document = await self._document(where, deadline)
            if document is None:
                continue
            named = document.get("resource")
            if not isinstance(named, str) or canonical_uri(named).rstrip("/") not in {
                canonical_uri(r).rstrip("/") for r in resources
            }:
                raise ServerUnavailable("protected-resource metadata names another resource")
            servers = document.get("authorization_servers")
            if not isinstance(servers, list) or not servers:
                raise ServerUnavailable("protected-resource metadata names no server")
            first = servers[0]
            if not isinstance(first, str):
                raise ServerUnavailable("protected-resource metadata names no server")
            return first
        raise ServerUnavailable("no protected-resource metadata")

    async def _metadata(self, issuer: str, deadline: float) -> AuthorizationServer:
        """RFC 8414 §3 and OpenID Connect Discovery §4, in the order MCP gives."""
        if not allowed_url(issuer, insecure_ok=self._insecure) or urlsplit(issuer).query:
            raise ServerUnavailable("authorization server identifier is not a usable URL")
        parts = urlsplit(issuer)
        origin, path = f"{parts.scheme}://{parts.netloc}", parts.path.rstrip("/")
        wells = [f"{origin}/.well-known/oauth-authorization-server{path}"]
        wells.append(f"{origin}/.well-known/openid-configuration{path}")
        if path:
            wells.append(f"{origin}{path}/.well-known/openid-configuration")
        for where in wells:
            document = await self._document(where, deadline)
            if document is None:
                continue
            if document.get("issuer") != issuer:  # identical, no normalisation (§3.3)
                raise ServerUnavailable("metadata names another issuer")
            return self._server(issuer, document)
        raise ServerUnavailable("no authorization server metadata")

    def _server(self, issuer: str, document: dict[str, Any]) -> AuthorizationServer:
        endpoints: dict[str, str] = {}
        for name in ("authorization_endpoint", "token_endpoint"):
            value = document.get(name)
            if not allowed_url(value, insecure_ok=self._insecure):
                raise ServerUnavailable(f"metadata has no usable {name}")
            endpoints[name] = str(value)
        methods = document.get("code_challenge_methods_supported")
        if not isinstance(methods, list) or "S256" not in methods:
            raise ServerUnavailable("authorization server does not support PKCE S256")
        optional: dict[str, str] = {
            name: str(value)
            for name in ("registration_endpoint", "revocation_endpoint")
            if allowed_url(value := document.get(name), insecure_ok=self._insecure)
        }
        return AuthorizationServer(
            issuer=issuer,
            authorization_endpoint=endpoints["authorization_endpoint"],
            token_endpoint=endpoints["token_endpoint"],
            registration_endpoint=optional.get("registration_endpoint"),
            revocation_endpoint=optional.get("revocation_endpoint"),
            iss_parameter=document.get("authorization_response_iss_parameter_supported") is True,
            client_metadata_documents=(
                document.get("client_id_metadata_document_supported") is True
            ),
        )

    async def _document(self, url: str, deadline: float) -> dict[str, Any] | None:
        """A JSON object at ``url``, None for a 404 (try the next); raises for the rest."""
        timeout = deadline - time.monotonic()
        if timeout <= 0:
            raise ServerUnavailable("deadline passed")
        try:
            response = await self._outbound.request(
                OAUTH_DESTINATION,
                "GET",
                url,
                timeout_s=timeout,
                headers={"Accept": "application/json"},
                max_body=MAX_DOCUMENT,
            )
        except OutboundError as exc:
            raise ServerUnavailable(f"metadata request failed: {type(exc).__name__}") from exc
        if response.status in (404, 410):
            return None
        if response.status != 200:
            raise ServerUnavailable(f"metadata answered {response.status}")
        try:
            document = answer(response.content_type, response.body)
        except JsonError as exc:
            raise ServerUnavailable("metadata is not a JSON object") from exc
        if not isinstance(document, dict):
            raise ServerUnavailable("metadata is not a JSON object")
        return document
