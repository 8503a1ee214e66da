"""RFC 7591, RFC 7662, RFC 7009 and RFC 7523 §2.2 on authlib.

DEVELOPMENT ONLY. authlib's endpoint classes (open registration, introspection, revocation)
and ``private_key_jwt`` client authentication, bound to the in-memory
:class:`~gateway.dev.issuer_store.IssuerStore` of the development authorization server (its
grants: :mod:`gateway.dev.issuer_grants`).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from authlib.oauth2.rfc7009 import RevocationEndpoint
from authlib.oauth2.rfc7523 import JWTBearerClientAssertion
from authlib.oauth2.rfc7591 import ClientRegistrationEndpoint, InvalidClientMetadataError
from authlib.oauth2.rfc7662 import IntrospectionEndpoint
from joserfc.jwk import KeySet

from gateway.dev.issuer_adapter import (
    CONFIDENTIAL_METHODS,
    TOKEN_AUTH_METHODS,
    AioJsonRequest,
    AioOAuth2Request,
)
from gateway.dev.issuer_store import DevClient, TokenRecord, is_loopback_redirect

if TYPE_CHECKING:
    from gateway.dev.issuer_server import DevAuthorizationServer

__all__ = ["Introspection", "PrivateKeyJwt", "Registration", "Revocation"]


class Registration(ClientRegistrationEndpoint):  # type: ignore[misc]
    """RFC 7591 open registration, aimed at public native clients (RFC 8252)."""

    server: DevAuthorizationServer

    def authenticate_token(self, request: AioJsonRequest) -> bool:
        return True  # open registration: this is a development issuer

    def get_server_metadata(self) -> dict[str, Any]:
        # scopes_supported is left out on purpose: the issuer assigns the client's scope itself
        # (RFC 7591 §3.2.1 lets it replace requested metadata) instead of failing registration.
        return {
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "response_types_supported": ["code"],
            "token_endpoint_auth_methods_supported": list(TOKEN_AUTH_METHODS),
        }

    def extract_client_metadata(self, request: AioJsonRequest) -> dict[str, Any]:
        if not isinstance(request.payload.data, dict):
            raise InvalidClientMetadataError("The registration body must be a JSON object.")
        metadata: dict[str, Any] = super().extract_client_metadata(request)
        uris = metadata.get("redirect_uris") or []
        grant_types = metadata.get("grant_types") or ["authorization_code"]
        if "authorization_code" in grant_types and not uris:
            raise InvalidClientMetadataError("redirect_uris is required.")
        for uri in uris:
            scheme = urlsplit(uri).scheme
            # RFC 8252 §7: loopback http, https or a private-use scheme; no other http.
            if scheme == "http" and not is_loopback_redirect(uri):
                raise InvalidClientMetadataError("http redirect URIs must be loopback.")
            if scheme in {"javascript", "data", "file"}:
                raise InvalidClientMetadataError("Unsupported redirect URI scheme.")
        if metadata.get("token_endpoint_auth_method") == "private_key_jwt" and not metadata.get(
            "jwks"
        ):
            raise InvalidClientMetadataError("private_key_jwt needs jwks.")
        return metadata

    def generate_client_info(self, request: AioJsonRequest) -> dict[str, Any]:
        info: dict[str, Any] = super().generate_client_info(request)
        if request.payload.data.get("token_endpoint_auth_method") in {"none", "private_key_jwt"}:
            # A public client gets no secret (RFC 7591 §3.2.1 "client_secret: OPTIONAL").
            info.pop("client_secret", None)
            info.pop("client_secret_expires_at", None)
        return info

    def save_client(
        self, client_info: dict[str, Any], client_metadata: dict[str, Any], request: AioJsonRequest
    ) -> DevClient:
        scopes = self.server.settings.scopes_supported
        client = DevClient(
            client_id=client_info["client_id"],
            secret=client_info.get("client_secret"),
            auth_method=client_metadata["token_endpoint_auth_method"],
            grant_types=tuple(client_metadata.get("grant_types") or ["authorization_code"]),
            scopes=scopes,
            redirect_uris=tuple(client_metadata.get("redirect_uris") or ()),
            response_types=tuple(client_metadata.get("response_types") or ["code"]),
            jwks=client_metadata.get("jwks"),
            client_name=client_metadata.get("client_name"),
            default_scopes=self.server.default_scopes,
        )
        self.server.store.clients[client.client_id] = client
        return client

    def generate_client_registration_info(
        self, client: DevClient, request: AioJsonRequest
    ) -> dict[str, Any]:
        return {"scope": " ".join(client.scopes)}


class Introspection(IntrospectionEndpoint):  # type: ignore[misc]
    CLIENT_AUTH_METHODS = list(CONFIDENTIAL_METHODS)  # noqa: RUF012

    server: DevAuthorizationServer

    def authenticate_endpoint_client(self, request: AioOAuth2Request) -> DevClient:
        client: DevClient = super().authenticate_endpoint_client(request)
        store = self.server.store
        store.introspection_calls += 1
        by_client = store.introspection_calls_by_client
        by_client[client.client_id] = by_client.get(client.client_id, 0) + 1
        return client

    def query_token(self, token_string: str, token_type_hint: str | None) -> TokenRecord | None:
        return self.server.store.tokens.get(token_string)

    def check_permission(
        self, token: TokenRecord, client: DevClient, request: AioOAuth2Request
    ) -> bool:
        return client.can_introspect or token.client_id == client.client_id

    def introspect_token(self, token: TokenRecord) -> dict[str, Any]:
        # RFC 7662 §2.2 members; refresh tokens carry no audience (they are not for resources).
        offset = self.server.store.clock_offset_s
        if token.claims is not None:
            # Keycloak's shape: the token's own claims (typ, azp, realm_access, an ID token's
            # nonce...) plus active, client_id and username.
            return {
                **token.claims,
                "active": True,
                "client_id": token.client_id,
                "username": token.claims.get("preferred_username", token.sub),
            }
        payload: dict[str, Any] = {
            "active": True,
            "scope": token.scope,
            "client_id": token.client_id,
            "sub": token.sub,
            "username": token.sub,
            "iss": self.server.settings.issuer,
            "exp": token.expires_at + offset,
            "iat": token.issued_at + offset,
            "nbf": token.issued_at + offset,
            "token_type": "Bearer" if token.kind == "access_token" else "refresh_token",
        }
        if token.jkt is not None and token.kind == "access_token":
            payload["token_type"] = "DPoP"  # RFC 9449 §6.2
            payload["cnf"] = {"jkt": token.jkt}
        if token.kind == "access_token" and token.audience:
            payload["aud"] = token.audience[0] if len(token.audience) == 1 else list(token.audience)
        if token.act is not None:
            payload["act"] = token.act  # RFC 8693 §4.1 (an exchanged token)
        return payload


class Revocation(RevocationEndpoint):  # type: ignore[misc]
    CLIENT_AUTH_METHODS = list(TOKEN_AUTH_METHODS)  # noqa: RUF012

    server: DevAuthorizationServer

    def query_token(self, token_string: str, token_type_hint: str | None) -> TokenRecord | None:
        return self.server.store.tokens.get(token_string)

    def revoke_token(self, token: TokenRecord, request: AioOAuth2Request) -> None:
        self.server.revoke_record(token)


class PrivateKeyJwt(JWTBearerClientAssertion):  # type: ignore[misc]
    """RFC 7523 §2.2 client authentication with a key from the client's registered JWKS."""

    CLIENT_AUTH_METHOD = "private_key_jwt"

    def __init__(self, server: DevAuthorizationServer) -> None:
        super().__init__(validate_jti=True, leeway=30)
        self._server = server

    def get_audiences(self) -> list[str]:
        # RFC 7523 §3 item 3: the AS's issuer or the endpoint the assertion is sent to.
        settings = self._server.settings
        only = self._server.store.assertion_audience
        if only == "issuer":
            return [settings.issuer]
        if only is not None:
            return [settings.endpoints[only]]
        return [settings.issuer, f"{settings.issuer}/", *settings.endpoints.values()]

    def validate_jti(self, claims: dict[str, Any], jti: str) -> bool:
        expires = float(claims.get("exp", time.time() + 600))
        return self._server.store.remember_jti(f"{claims['sub']}:{jti}", expires)

    def resolve_client_public_key(self, client: DevClient) -> KeySet:
        return KeySet.import_key_set(client.jwks or {"keys": []})  # type: ignore[arg-type]
