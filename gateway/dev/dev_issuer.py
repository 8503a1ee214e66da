"""RFC 8414 / OAuth 2.1: a development authorization server on aiohttp (DEVELOPMENT ONLY).

:class:`DevIssuer` serves, on its own loopback port:

- ``/.well-known/oauth-authorization-server`` (RFC 8414) and ``/.well-known/openid-configuration``
  (the same document; MCP clients may try either), with ``issuer`` = the base URL exactly;
- ``/authorize``: authorization code + PKCE S256, auto-approve or a one-click consent page, with
  ``iss`` on every redirect back to the client (RFC 9207 §2); an OpenID Connect sign-in (scope
  ``openid``) gets an ID token with the code's answer, and a sign-in page choosing among
  :attr:`DevIssuer.users` when there are several;
- ``/token``: ``authorization_code``, ``refresh_token`` (rotating), ``client_credentials``, and
  RFC 8693 token exchange for the clients :attr:`DevIssuer.exchange_policy` allows
  (:mod:`gateway.dev.issuer_exchange`);
- ``/register``: RFC 7591 dynamic registration for public native clients (RFC 8252 loopback
  redirects, any port);
- ``/introspect`` (RFC 7662) and ``/revoke`` (RFC 7009), with ``client_secret_basic``,
  ``client_secret_post`` or ``private_key_jwt`` (RFC 7523) client authentication;
- ``/jwks``: its JWK Set (RFC 7517), advertised as ``jwks_uri``, with rotation for tests
  (:attr:`DevIssuer.keys`: add a key, sign with it, remove the old one);
- ``/dev/tokens``: mints a token for a running demo; loopback peers with the admin secret only.

Access tokens are opaque (``secrets.token_urlsafe``) or, with ``token_format="jwt"``, RFC 9068 JWT
access tokens (``typ: at+jwt``, signed with the current key); the ``resource`` parameter
(RFC 8707) becomes the token's ``aud``. ``introspection=False`` removes the introspection
endpoint, as an issuer like Microsoft Entra ID has none. Everything is in memory. It refuses to
bind a non-loopback address unless ``allow_non_loopback=True``.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Sequence
from typing import Any, Literal

from aiohttp import web
from authlib.oauth2.rfc8414 import AuthorizationServerMetadata
from authlib.oauth2.rfc9207 import AuthorizationServerMetadata as IssMetadata

from gateway.config import TOKEN_EXCHANGE_GRANT
from gateway.dev.dpop_proofs import TokenEndpointProofs
from gateway.dev.issuer_adapter import (
    TOKEN_AUTH_METHODS,
    IssuerSettings,
)
from gateway.dev.issuer_consent import AuthorizationHandlers
from gateway.dev.issuer_endpoints import EndpointHandlers
from gateway.dev.issuer_keys import DevKeySet, JwksPublisher, access_token_claims
from gateway.dev.issuer_server import DevAuthorizationServer
from gateway.dev.issuer_store import DevClient, IssuerStore, TokenRecord
from gateway.dev.loopback import LoopbackServer, check_bind_host

__all__ = ["DevIssuer"]

_GRANT_TYPES = ("authorization_code", "refresh_token", "client_credentials", TOKEN_EXCHANGE_GRANT)
MAX_BODY = 65_536
"""Request bodies above this are refused by aiohttp with 413."""


class DevIssuer(AuthorizationHandlers, EndpointHandlers, LoopbackServer):
    """A development OAuth 2.1 authorization server. Start it, read :attr:`url`, stop it."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        resources: Sequence[str] = (),
        scopes: Sequence[str] = ("mcp:access", "notes:read", "notes:write", "admin"),
        allow_non_loopback: bool = False,
        access_token_ttl_s: int = 3600,
        refresh_token_ttl_s: int = 14 * 86400,
        code_ttl_s: int = 60,
        consent: Literal["auto", "page"] = "auto",
        user_sub: str = "demo-user",
        users: Sequence[str] = (),
        choose_user: bool = False,
        grant_scopes: Sequence[str] = (),
        default_scopes: Sequence[str] = (),
        admin_secret: str | None = None,
        token_format: Literal["opaque", "jwt"] = "opaque",  # noqa: S107 - not a secret
        introspection: bool = True,
    ) -> None:
        """``resources``: RFC 8707 allowlist (empty = any absolute URI); the first is the audience
        of tokens :meth:`mint_token` issues without one. ``grant_scopes`` are added
        to every authorization-code grant (the auto-approving resource owner grants them; RFC 6749
        §3.3 lets an AS issue another scope than requested), so a client that asks only for the
        advertised baseline scope still reaches tools. ``default_scopes`` apply when a request
        omits ``scope``. ``token_format``: opaque or RFC 9068 JWT access tokens;
        ``introspection=False``: no introspection endpoint (Entra ID has none). ``choose_user``:
        every authorization code grant asks who among ``users`` signs in. ``users``: who
        may sign in at an OpenID Connect sign-in (default: ``user_sub`` alone); with several, the
        sign-in page lets the person pick one (cross-user tests; a second instance is another
        authorization server with people of its own)."""
        check_bind_host(host, allow_non_loopback)
        self.host = host
        self.port = port
        self._allow_non_loopback = allow_non_loopback
        self.consent = consent
        self.user_sub = user_sub
        self.users = tuple(dict.fromkeys(users or (user_sub,)))
        self.choose_user = choose_user
        """Every authorization (not only an OpenID Connect sign-in) asks who is signing in
        among :attr:`users` (an upstream service with people of its own, for ``user_oauth``)."""
        self.grant_scopes = tuple(grant_scopes)
        self.admin_secret = admin_secret or secrets.token_urlsafe(24)
        """Guards ``/dev/tokens``; printed (or written to the demo's state file) at startup."""
        self.store = IssuerStore()
        self._settings = IssuerSettings(
            issuer="",
            resources=tuple(resources),
            scopes_supported=tuple(scopes),
            access_token_ttl_s=access_token_ttl_s,
            refresh_token_ttl_s=refresh_token_ttl_s,
            code_ttl_s=code_ttl_s,
            introspection=introspection,
        )
        self.token_format = token_format
        self.keys = DevKeySet()
        """The signing keys; tests rotate them (``add``, ``use``, ``remove``)."""
        self.jwks = JwksPublisher(self.keys)
        """``/jwks`` and its test knobs (``status``, ``body``, ``max_age_s``, ``calls``)."""
        self._default_scopes = tuple(default_scopes)
        self.server = DevAuthorizationServer(self._settings, self.store, self._default_scopes)
        self.dpop_proofs = TokenEndpointProofs()
        """RFC 9449 §5: a token request with a DPoP proof gets a token bound to its key."""
        if token_format == "jwt":
            self.server.jwt_signer = self.sign_jwt
        self.server.sign_exchanged = self.sign_jwt
        self.server.sign_id_token = lambda claims: self.keys.sign(
            claims, header={"typ": "JWT", **self.server.id_token_header}
        )
        self.id_token_claims = self.server.id_token_claims
        """Test knob: claims every ID token gets instead of its own (None: left out)."""
        self.id_token_header = self.server.id_token_header
        self.person_claims = self.server.person_claims
        """Claims one person's ID tokens get (``sub`` -> claims): their groups, for example."""
        """Test knob: the ID token's header changed (``typ``, ``kid``; None: left out)."""
        self.exchange_policy = self.server.exchange_policy
        """RFC 8693: which clients may exchange tokens for which targets (tests and the demo)."""
        self.exchange_faults = self.server.exchange_faults
        """Test knobs of the token-exchange grant (outage, garbage, refusal, lifetime, calls)."""
        self.introspection_status: int | None = None
        """Test knob: answer introspection with this HTTP status instead (simulates an outage)."""
        self.jwt_introspection_error: str | None = None
        """Test knob: answer an authenticated introspection of a JWT-shaped token that is not one
        of ours with HTTP 400 ``{"error": <this>}``, as node oidc-provider does for id_tokens,
        JWT access tokens it does not introspect and forged JWTs (``unsupported_token_type`` or
        ``invalid_token``). None (default): RFC 7662 ``{"active": false}``."""

    # --- lifecycle -------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The issuer identifier: the base URL, exactly as in the metadata's ``issuer``."""
        return self.base_url

    @property
    def metadata_url(self) -> str:
        return f"{self.url}/.well-known/oauth-authorization-server"

    @property
    def introspection_calls(self) -> int:
        return self.store.introspection_calls

    def _app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_get("/.well-known/oauth-authorization-server", self._metadata)
        app.router.add_get("/.well-known/openid-configuration", self._metadata)
        app.router.add_route("GET", "/authorize", self._authorize)
        app.router.add_route("POST", "/authorize", self._consent_submit)
        app.router.add_post("/token", self._token)
        app.router.add_post("/register", self._register)
        if self._settings.introspection:
            app.router.add_post("/introspect", self._introspect)
        app.router.add_get("/jwks", self.jwks.handle)
        app.router.add_post("/revoke", self._revoke)
        app.router.add_post("/dev/tokens", self._mint_endpoint)
        return app

    async def start(self) -> None:
        await super().start()
        if self.url.startswith("http://") and self._allow_non_loopback:
            # authlib refuses plain http except loopback; the operator forced this explicitly.
            os.environ["AUTHLIB_INSECURE_TRANSPORT"] = "1"
        self._settings = IssuerSettings(
            issuer=self.url,
            resources=self._settings.resources,
            scopes_supported=self._settings.scopes_supported,
            access_token_ttl_s=self._settings.access_token_ttl_s,
            refresh_token_ttl_s=self._settings.refresh_token_ttl_s,
            code_ttl_s=self._settings.code_ttl_s,
            introspection=self._settings.introspection,
        )
        self.server.settings = self._settings
        # Fail at startup, not in a client, if the discovery document is not RFC 8414-valid.
        AuthorizationServerMetadata(self.metadata()).validate(metadata_classes=[IssMetadata])

    # --- programmatic API ------------------------------------------------------------------

    def register_client(
        self,
        client_id: str,
        secret: str | None = None,
        *,
        grant_types: Sequence[str] = ("client_credentials",),
        scopes: Sequence[str] = (),
        auth_method: str = "client_secret_basic",
        jwks: dict[str, Any] | None = None,
        redirect_uris: Sequence[str] = (),
        can_introspect: bool = False,
    ) -> DevClient:
        """Register a client directly (e.g. the gateway's introspection client)."""
        if auth_method not in TOKEN_AUTH_METHODS:
            raise ValueError(f"auth_method must be one of {TOKEN_AUTH_METHODS}")
        if auth_method in {"client_secret_basic", "client_secret_post"} and not secret:
            raise ValueError("a client_secret_* client needs a secret")
        if auth_method == "private_key_jwt" and not jwks:
            raise ValueError("a private_key_jwt client needs jwks (its public keys)")
        client = DevClient(
            client_id=client_id,
            secret=secret,
            auth_method=auth_method,
            grant_types=tuple(grant_types),
            scopes=tuple(scopes) or self._settings.scopes_supported,
            redirect_uris=tuple(redirect_uris),
            jwks=jwks,
            default_scopes=self._default_scopes,
            can_introspect=can_introspect,
        )
        self.store.clients[client_id] = client
        return client

    def mint_token(
        self,
        *,
        sub: str,
        client_id: str = "demo-cli",
        scopes: Sequence[str] | str,
        audience: Sequence[str] | str | None = None,
        ttl_s: int | None = None,
        jkt: str | None = None,
    ) -> str:
        """Issue an access token directly, as if a grant had just completed; ``jkt`` binds it
        to that DPoP key (RFC 9449 §6: ``cnf.jkt`` in the JWT and the introspection answer)."""
        scope_list = scopes.split() if isinstance(scopes, str) else list(scopes)
        audiences = (audience,) if isinstance(audience, str) else tuple(audience or ())
        if audience is None and self._settings.resources:
            audiences = self._settings.resources[:1]  # the first is the issuer's main resource
        now = int(time.time())
        self.store.purge(now)
        expires_at = now + (ttl_s if ttl_s is not None else self._settings.access_token_ttl_s)
        scope = " ".join(scope_list)
        if self.token_format == "jwt":
            value = self.sign_jwt(
                access_token_claims(
                    issuer=self.url,
                    sub=sub,
                    client_id=client_id,
                    scope=scope,
                    audience=audiences,
                    issued_at=now,
                    expires_at=expires_at,
                    jkt=jkt,
                )
            )
        else:
            value = secrets.token_urlsafe(32)
        self.store.tokens[value] = TokenRecord(
            value=value,
            kind="access_token",
            client_id=client_id,
            sub=sub,
            scope=scope,
            audience=audiences,
            issued_at=now,
            expires_at=expires_at,
            family=self.store.new_family(),
            jkt=jkt,
        )
        return value

    def mint_signed(self, claims: dict[str, Any], *, header: dict[str, Any] | None = None) -> str:
        """Sign ``claims`` (as :meth:`sign_jwt`) and remember the token, so ``/introspect``
        answers with the token's own claims plus ``active``, ``client_id`` and ``username``, as
        Keycloak does (for its access tokens and, when their ``aud`` names the resource, its ID
        tokens). ``exp``, ``iat`` and ``sub`` are required; the client is ``azp``."""
        value = self.sign_jwt(claims, header=header)
        audience = claims.get("aud", ())
        scope = claims.get("scope", "")
        self.store.tokens[value] = TokenRecord(
            value=value,
            kind="access_token",
            client_id=str(claims.get("azp", claims.get("client_id", ""))),
            sub=str(claims["sub"]),
            scope=scope if isinstance(scope, str) else "",
            audience=(audience,) if isinstance(audience, str) else tuple(audience),
            issued_at=int(claims["iat"]),
            expires_at=int(claims["exp"]),
            family=self.store.new_family(),
            claims=dict(claims),
        )
        return value

    def sign_jwt(
        self,
        claims: dict[str, Any],
        *,
        header: dict[str, Any] | None = None,
        kid: str | None = None,
    ) -> str:
        """Sign any claim set with the issuer's current key (or ``kid``): the tests' way to make
        a token that is well signed and wrong in exactly one respect."""
        return self.keys.sign(claims, header=header, kid=kid)

    def revoke(self, token: str) -> bool:
        """Revoke an access or refresh token (RFC 7009 semantics). False if unknown."""
        record = self.store.tokens.get(token)
        if record is None:
            return False
        self.server.revoke_record(record)
        return True

    def metadata(self) -> dict[str, Any]:
        """RFC 8414 §2 authorization server metadata."""
        return self._settings.metadata(_GRANT_TYPES)

    # --- handlers --------------------------------------------------------------------------

    async def _metadata(self, request: web.Request) -> web.Response:
        return web.json_response(self.metadata(), headers={"Cache-Control": "max-age=60"})
