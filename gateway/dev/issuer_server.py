"""RFC 6749 §3 / RFC 8707 §2: the development issuer's authlib ``AuthorizationServer``.

DEVELOPMENT ONLY. Wires authlib's grants and endpoints (:mod:`gateway.dev.issuer_grants`) to the
in-memory store, issues opaque or (with a ``jwt_signer``) RFC 9068 JWT access tokens, turns
authlib's ``(status, body, headers)`` into aiohttp responses and checks RFC 8707 ``resource``
values.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web
from authlib.oauth2.rfc6749 import AuthorizationServer, InvalidScopeError

from gateway.dev.issuer_adapter import (
    OIDC_SCOPES,
    AioJsonRequest,
    AioOAuth2Request,
    InvalidTargetError,
    IssuerSettings,
    ParsedRequest,
)
from gateway.dev.issuer_authlib_endpoints import (
    Introspection,
    PrivateKeyJwt,
    Registration,
    Revocation,
)
from gateway.dev.issuer_exchange import ExchangeFaults, ExchangePolicy, TokenExchange
from gateway.dev.issuer_grants import (
    AuthorizationCode,
    ClientCredentials,
    IdTokens,
    RefreshToken,
    S256Only,
)
from gateway.dev.issuer_keys import access_token_claims
from gateway.dev.issuer_store import DevClient, DevUser, IssuerStore, TokenRecord

__all__ = ["DevAuthorizationServer"]


def _no_signer(claims: dict[str, Any]) -> str:
    raise RuntimeError("the issuer has not installed its signer")


class DevAuthorizationServer(AuthorizationServer):  # type: ignore[misc]
    """authlib's AuthorizationServer bound to aiohttp and the in-memory store."""

    def __init__(
        self, settings: IssuerSettings, store: IssuerStore, default_scopes: tuple[str, ...]
    ) -> None:
        super().__init__(scopes_supported=list(settings.scopes_supported))
        self.settings = settings
        self.store = store
        self.default_scopes = default_scopes
        self.jwt_signer: Callable[[dict[str, Any]], str] | None = None
        """Set: access tokens are JWTs signed by it (refresh tokens stay opaque)."""
        self.sign_exchanged: Callable[[dict[str, Any]], str] = _no_signer
        """Signs an exchanged token requested as a JWT (set by the issuer to its key set)."""
        self.sign_id_token: Callable[[dict[str, Any]], str] = _no_signer
        """Signs an OpenID Connect ID token (set by the issuer to its key set)."""
        self.id_token_claims: dict[str, Any] = {}
        """Test knob: claims every ID token gets instead of its own (None: left out)."""
        self.person_claims: dict[str, dict[str, Any]] = {}
        """Claims the ID tokens of one person (by ``sub``) get: their groups (approver sets)."""
        self.id_token_header: dict[str, Any] = {}
        """Test knob: the ID token's JOSE header changed (None: left out)."""
        self.id_token_forger: Callable[[dict[str, Any]], str] | None = None
        """Test knob: makes the ID token from its claims instead of the issuer's key."""
        self.exchange_policy = ExchangePolicy()
        self.exchange_faults = ExchangeFaults()
        self.register_token_generator("default", self._generate_token)
        self.register_grant(AuthorizationCode, [S256Only(required=True), IdTokens(self)])
        self.register_grant(RefreshToken)
        self.register_grant(ClientCredentials)
        self.register_grant(TokenExchange)
        self.register_endpoint(Registration)
        self.register_endpoint(Introspection)
        self.register_endpoint(Revocation)
        self.register_client_auth_method("private_key_jwt", PrivateKeyJwt(self))

    # --- framework adapter (what authlib's Flask integration provides) ---------------------

    def query_client(self, client_id: str) -> DevClient | None:
        return self.store.clients.get(client_id)

    def create_oauth2_request(self, request: ParsedRequest | AioOAuth2Request) -> AioOAuth2Request:
        if isinstance(request, AioOAuth2Request):
            return request
        # authlib refuses non-https URIs except loopback; a forced non-loopback dev issuer
        # passes its own issuer URL, which the operator chose explicitly.
        return AioOAuth2Request(request, request.url)

    def validate_requested_scope(self, scope: str | None) -> None:
        """The issuer's scopes, and OpenID Connect's (a sign-in asks for ``openid``)."""
        requested = set(scope.split()) if scope else set()
        if not requested <= {*self.settings.scopes_supported, *OIDC_SCOPES}:
            raise InvalidScopeError()

    def create_json_request(self, request: ParsedRequest) -> AioJsonRequest:
        return AioJsonRequest(request)

    def handle_response(
        self, status: int, body: Any, headers: Sequence[tuple[str, str]]
    ) -> web.Response:
        text = body if isinstance(body, str) else json.dumps(body)
        response = web.Response(status=status, text=text)
        for name, value in headers:
            response.headers[name] = value
        if isinstance(body, dict):
            response.headers["Content-Type"] = "application/json"
            response.headers.setdefault("Cache-Control", "no-store")
        return response

    def send_signal(self, name: str, *args: Any, **kwargs: Any) -> None:
        return None

    # --- tokens ----------------------------------------------------------------------------

    def _generate_token(  # noqa: PLR0917 - authlib calls token generators with keywords
        self,
        grant_type: str,
        client: DevClient,
        user: DevUser | None = None,
        scope: str | None = None,
        expires_in: int | None = None,
        include_refresh_token: bool = True,
    ) -> dict[str, Any]:
        token: dict[str, Any] = {
            "token_type": "Bearer",
            "access_token": secrets.token_urlsafe(32),
            "expires_in": expires_in or self.settings.access_token_ttl_s,
            # RFC 6749 §5.1: scope is REQUIRED when it differs from the request; always send it.
            "scope": scope or "",
        }
        if include_refresh_token:
            token["refresh_token"] = secrets.token_urlsafe(48)
        return token

    def save_token(self, token: dict[str, Any], request: AioOAuth2Request) -> None:
        now = int(time.time())
        self.store.purge(now)
        client: DevClient = request.client
        sub = request.user.sub if request.user is not None else client.client_id
        family = getattr(request, "family", None) or self.store.new_family()
        # RFC 9449 §5: a request with a valid DPoP proof gets a token bound to its key.
        jkt: str | None = getattr(request, "dpop_jkt", None)
        if jkt is not None:
            token["token_type"] = "DPoP"
        common = {
            "client_id": client.client_id,
            "sub": sub,
            "scope": token.get("scope", ""),
            "issued_at": now,
            "family": family,
        }
        if self.jwt_signer is not None:
            # authlib returns this same dict to the client: the JWT replaces the opaque value.
            token["access_token"] = self.jwt_signer(
                access_token_claims(
                    issuer=self.settings.issuer,
                    sub=sub,
                    client_id=client.client_id,
                    scope=token.get("scope", ""),
                    audience=request.resources,
                    issued_at=now,
                    expires_at=now + int(token["expires_in"]),
                    jkt=jkt,
                )
            )
        self.store.tokens[token["access_token"]] = TokenRecord(
            value=token["access_token"],
            kind="access_token",
            audience=request.resources,
            expires_at=now + int(token["expires_in"]),
            jkt=jkt,
            **common,
        )
        if "refresh_token" in token:
            self.store.tokens[token["refresh_token"]] = TokenRecord(
                value=token["refresh_token"],
                kind="refresh_token",
                audience=request.resources,
                expires_at=now + self.settings.refresh_token_ttl_s,
                **common,
            )

    def revoke_record(self, record: TokenRecord) -> None:
        record.revoked = True
        if record.kind == "refresh_token":
            # RFC 7009 §2.1: revoking a refresh token also invalidates its access tokens.
            self.store.revoke_family(record.family)
        for child in self.store.tokens.values():
            if child.parent == record.value:  # tokens exchanged for it (RFC 8693) go too
                self.revoke_record(child)

    # --- RFC 8707 resources ----------------------------------------------------------------

    def check_resources(self, values: Sequence[str]) -> tuple[str, ...]:
        """RFC 8707 §2: absolute URIs without fragment; in the allowlist when one is set."""
        for value in values:
            parts = urlsplit(value)
            if not parts.scheme or not parts.netloc or "#" in value:
                raise InvalidTargetError("The resource must be an absolute URI.")
            if self.settings.resources and value not in self.settings.resources:
                raise InvalidTargetError("The resource is not served by this issuer.")
        return tuple(dict.fromkeys(values))

    def narrow_resources(self, values: Sequence[str], granted: tuple[str, ...]) -> tuple[str, ...]:
        """RFC 8707 §2.2: a token request may only narrow the resources of the grant."""
        if not values:
            return granted
        checked = self.check_resources(values)
        if any(value not in granted for value in checked):
            raise InvalidTargetError("The resource was not part of the authorization grant.")
        return checked
