"""RFC 6749 §4.1/§4.4/§6, RFC 7636 and OIDC Core ID tokens on authlib.

DEVELOPMENT ONLY. authlib's grant classes, bound to the in-memory
:class:`~gateway.dev.issuer_store.IssuerStore` of the development authorization server (its
endpoint classes: :mod:`gateway.dev.issuer_authlib_endpoints`).

Deliberate choices: PKCE is mandatory and ``S256`` only (OAuth 2.1 §4.1.1, RFC 9700 §2.1.1); refresh
tokens rotate and a replayed one revokes its whole grant (RFC 9700 §4.14.2); a replayed
authorization code revokes the tokens issued from it (RFC 6749 §4.1.2); ``resource`` (RFC 8707)
becomes the token audience.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from authlib.oauth2.rfc6749 import (
    AuthorizationCodeGrant,
    ClientCredentialsGrant,
    InvalidRequestError,
    InvalidScopeError,
    RefreshTokenGrant,
)
from authlib.oauth2.rfc7636 import CodeChallenge

from gateway.dev.issuer_adapter import (
    CONFIDENTIAL_METHODS,
    TOKEN_AUTH_METHODS,
    AioOAuth2Request,
    InvalidTargetError,
)
from gateway.dev.issuer_store import (
    AuthCode,
    DevClient,
    DevUser,
    TokenRecord,
)

if TYPE_CHECKING:
    from gateway.dev.issuer_server import DevAuthorizationServer

__all__ = [
    "ID_TOKEN_TTL_S",
    "AuthorizationCode",
    "ClientCredentials",
    "IdTokens",
    "RefreshToken",
    "S256Only",
]


def _scope_list(scope: str | None) -> list[str]:
    return scope.split() if scope else []


# --- grants -----------------------------------------------------------------------------------


class S256Only(CodeChallenge):  # type: ignore[misc]
    """RFC 7636 with ``S256`` only, and a challenge required on every authorization request."""

    DEFAULT_CODE_CHALLENGE_METHOD = "S256"
    SUPPORTED_CODE_CHALLENGE_METHOD = ["S256"]  # noqa: RUF012 - authlib's class attribute

    def validate_code_challenge(self, grant: Any, redirect_uri: str) -> None:
        data = grant.request.payload.data
        # OAuth 2.1 §4.1.1: PKCE is required; "plain" (the RFC 7636 default) is refused.
        if not data.get("code_challenge"):
            raise InvalidRequestError("Missing 'code_challenge'")
        if data.get("code_challenge_method") != "S256":
            raise InvalidRequestError("Unsupported 'code_challenge_method'; use S256")
        super().validate_code_challenge(grant, redirect_uri)


class AuthorizationCode(AuthorizationCodeGrant):  # type: ignore[misc]
    TOKEN_ENDPOINT_AUTH_METHODS = list(TOKEN_AUTH_METHODS)  # noqa: RUF012

    server: DevAuthorizationServer

    def validate_authorization_request(self) -> str:
        redirect_uri: str = super().validate_authorization_request()
        try:
            self.request.resources = self.server.check_resources(
                self.request.payload.datalist.get("resource", [])
            )
        except InvalidTargetError as error:
            error.redirect_uri = redirect_uri
            raise
        return redirect_uri

    def save_authorization_code(self, code: str, request: AioOAuth2Request) -> None:
        data = request.payload.data
        user: DevUser = request.user
        self.server.store.codes[code] = AuthCode(
            code=code,
            client_id=request.client.client_id,
            redirect_uri=request.payload.redirect_uri,
            scope=user.scope if user.scope is not None else request.scope,
            sub=user.sub,
            code_challenge=data.get("code_challenge"),
            code_challenge_method=data.get("code_challenge_method"),
            resources=request.resources,
            expires_at=time.time() + self.server.settings.code_ttl_s,
            family=self.server.store.new_family(),
            nonce=data.get("nonce"),
            auth_time=int(time.time()),
        )

    def query_authorization_code(self, code: str, client: DevClient) -> AuthCode | None:
        record = self.server.store.codes.get(code)
        if record is None or record.client_id != client.client_id:
            return None
        return self.server.store.single_use(record, replayed=record.used)

    def delete_authorization_code(self, authorization_code: AuthCode) -> None:
        authorization_code.used = True

    def authenticate_user(self, authorization_code: AuthCode) -> DevUser:
        return DevUser(authorization_code.sub)

    def validate_token_request(self) -> None:
        super().validate_token_request()
        code: AuthCode = self.request.authorization_code
        self.request.resources = self.server.narrow_resources(
            self.request.payload.datalist.get("resource", []), code.resources
        )
        self.request.family = code.family


ID_TOKEN_TTL_S = 600


class IdTokens:
    """OIDC Core §3.1.3.3: the code grant's token answer carries an ID token when the code was
    granted with the ``openid`` scope (§3.1.2.1): ``iss``, ``sub`` (the person who signed in),
    ``aud`` and ``azp`` (the client), ``iat``, ``exp``, ``auth_time`` and the request's
    ``nonce``, signed with the issuer's current key, ``typ: JWT``. An authlib grant extension."""

    def __init__(self, server: DevAuthorizationServer) -> None:
        self._server = server

    def __call__(self, grant: AuthorizationCodeGrant) -> None:
        grant.register_hook("after_create_token_response", self._add)

    def _add(self, grant: AuthorizationCodeGrant, response: tuple[int, Any, Any]) -> None:
        _, token, _ = response
        code: AuthCode = grant.request.authorization_code
        if not isinstance(token, dict) or "openid" not in _scope_list(code.scope):
            return
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": self._server.settings.issuer,
            "sub": code.sub,
            "aud": code.client_id,
            "azp": code.client_id,
            "iat": now,
            "exp": now + ID_TOKEN_TTL_S,
            "auth_time": code.auth_time,
        }
        if code.nonce is not None:
            claims["nonce"] = code.nonce
        claims.update(self._server.person_claims.get(code.sub, {}))
        for name, value in self._server.id_token_claims.items():  # test knob; None removes
            if value is None:
                claims.pop(name, None)
            else:
                claims[name] = value
        forge = self._server.id_token_forger  # test knob: a token signed some other way
        token["id_token"] = (forge or self._server.sign_id_token)(claims)


class RefreshToken(RefreshTokenGrant):  # type: ignore[misc]
    TOKEN_ENDPOINT_AUTH_METHODS = list(TOKEN_AUTH_METHODS)  # noqa: RUF012
    INCLUDE_NEW_REFRESH_TOKEN = True  # rotation (RFC 9700 §4.14.2)

    server: DevAuthorizationServer

    def authenticate_refresh_token(self, refresh_token: str) -> TokenRecord | None:
        record = self.server.store.tokens.get(refresh_token)
        if record is None or record.kind != "refresh_token":
            return None
        return self.server.store.single_use(record, replayed=record.revoked)

    def authenticate_user(self, refresh_token: TokenRecord) -> DevUser:
        return DevUser(refresh_token.sub)

    def revoke_old_credential(self, refresh_token: TokenRecord) -> None:
        refresh_token.revoked = True

    def validate_token_request(self) -> None:
        super().validate_token_request()
        record: TokenRecord = self.request.refresh_token
        self.request.resources = self.server.narrow_resources(
            self.request.payload.datalist.get("resource", []), record.audience
        )
        self.request.family = record.family


class ClientCredentials(ClientCredentialsGrant):  # type: ignore[misc]
    TOKEN_ENDPOINT_AUTH_METHODS = list(CONFIDENTIAL_METHODS)  # noqa: RUF012

    server: DevAuthorizationServer

    def validate_token_request(self) -> None:
        super().validate_token_request()
        client: DevClient = self.request.client
        requested = _scope_list(self.request.payload.scope)
        if any(s not in client.scopes for s in requested):
            raise InvalidScopeError()
        self.request.scope = " ".join(requested) if requested else client.get_allowed_scope(None)
        self.request.resources = self.server.check_resources(
            self.request.payload.datalist.get("resource", [])
        )
        self.request.family = self.server.store.new_family()

    def create_token_response(self) -> tuple[int, dict[str, Any], list[tuple[str, str]]]:
        token = self.generate_token(scope=self.request.scope, include_refresh_token=False)
        self.save_token(token)
        return 200, token, self.TOKEN_RESPONSE_HEADER
