"""RFC 6749 §2 / RFC 7662 §2.2: the development issuer's in-memory clients, codes and tokens.

DEVELOPMENT ONLY. These are the model objects authlib's grants and endpoints work on (they
implement authlib's ``ClientMixin``, ``AuthorizationCodeMixin`` and ``TokenMixin`` duck types).
Everything lives in one process; nothing is persisted.
"""

from __future__ import annotations

import hmac
import secrets
import time
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeVar
from urllib.parse import urlsplit

__all__ = [
    "OIDC_SCOPES",
    "REPLAY_MEMORY_S",
    "AuthCode",
    "DevClient",
    "DevUser",
    "IssuerStore",
    "TokenRecord",
    "is_loopback_redirect",
]

TokenKind = Literal["access_token", "refresh_token"]
REPLAY_MEMORY_S: Final = 600
"""How long a used authorization code is remembered after it expired (replay detection)."""
OIDC_SCOPES: Final = ("openid", "profile")
"""Granted besides the issuer's own scopes: a sign-in (OIDC Core §3.1.2.1) asks for them."""
_LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})


def is_loopback_redirect(uri: str) -> bool:
    """RFC 8252 §7.3: an ``http`` redirect to a loopback interface (any port)."""
    parts = urlsplit(uri)
    return parts.scheme == "http" and (parts.hostname or "") in _LOOPBACK_HOSTS


def _redirect_matches(registered: str, requested: str) -> bool:
    """Exact match, except that loopback redirects match on any port (RFC 8252 §7.3)."""
    if hmac.compare_digest(registered, requested):
        return True
    if not (is_loopback_redirect(registered) and is_loopback_redirect(requested)):
        return False
    a, b = urlsplit(registered), urlsplit(requested)
    try:
        # Accessing .port validates it; a malformed port never matches.
        _ = (a.port, b.port)
    except ValueError:
        return False
    return (a.hostname, a.path, a.query, a.fragment) == (b.hostname, b.path, b.query, b.fragment)


@dataclass(slots=True)
class DevUser:
    """The resource owner an authorization code was granted by (auto-approve or consent)."""

    sub: str
    scope: str | None = None
    """The scope the resource owner approved (overrides the requested scope when set)."""

    def get_user_id(self) -> str:
        return self.sub


@dataclass(slots=True)
class DevClient:
    """A registered OAuth client (RFC 7591 §2 metadata that matters here)."""

    client_id: str
    secret: str | None
    auth_method: str
    grant_types: tuple[str, ...]
    scopes: tuple[str, ...]
    redirect_uris: tuple[str, ...] = ()
    response_types: tuple[str, ...] = ("code",)
    jwks: dict[str, Any] | None = None
    client_name: str | None = None
    default_scopes: tuple[str, ...] = ()
    """Granted when an authorization or token request omits ``scope`` (RFC 6749 §3.3)."""
    can_introspect: bool = False
    registered_at: int = field(default_factory=lambda: int(time.time()))

    # --- authlib ClientMixin ---------------------------------------------------------------

    def get_client_id(self) -> str:
        return self.client_id

    def get_default_redirect_uri(self) -> str | None:
        # RFC 6749 §3.1.2.3: only unambiguous with exactly one registered URI.
        return self.redirect_uris[0] if len(self.redirect_uris) == 1 else None

    def get_allowed_scope(self, scope: str | None) -> str:
        if not scope:
            return " ".join(self.default_scopes or self.scopes)
        allowed = {*self.scopes, *OIDC_SCOPES}
        return " ".join(s for s in scope.split() if s in allowed)

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        return any(_redirect_matches(r, redirect_uri) for r in self.redirect_uris)

    def check_client_secret(self, client_secret: str) -> bool:
        if self.secret is None:
            return False
        return hmac.compare_digest(self.secret.encode(), client_secret.encode())

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        return method == self.auth_method

    def check_response_type(self, response_type: str) -> bool:
        return response_type in self.response_types

    def check_grant_type(self, grant_type: str) -> bool:
        return grant_type in self.grant_types


@dataclass(slots=True)
class AuthCode:
    """An issued authorization code (RFC 6749 §4.1.2), bound to client, redirect and PKCE."""

    code: str
    client_id: str
    redirect_uri: str | None
    scope: str
    sub: str
    code_challenge: str | None
    code_challenge_method: str | None
    resources: tuple[str, ...]
    expires_at: float
    family: str
    used: bool = False
    nonce: str | None = None
    """OIDC Core §3.1.2.1: the authorization request's ``nonce``, echoed in the ID token."""
    auth_time: int = 0
    """When the person signed in (OIDC Core §2 ``auth_time``)."""

    def get_redirect_uri(self) -> str | None:
        return self.redirect_uri

    def get_scope(self) -> str:
        return self.scope

    def is_expired(self) -> bool:
        return time.time() >= self.expires_at


@dataclass(slots=True)
class TokenRecord:
    """One access or refresh token. ``family`` groups every token of one grant (RFC 7009 §2.1)."""

    value: str
    kind: TokenKind
    client_id: str
    sub: str
    scope: str
    audience: tuple[str, ...]
    issued_at: int
    expires_at: int
    family: str
    revoked: bool = False
    act: dict[str, Any] | None = None
    """RFC 8693 §4.1 ``act`` of an exchanged token (who acts for ``sub``)."""
    parent: str | None = None
    """The subject token an exchanged token was issued for (revoked together with it)."""
    claims: dict[str, Any] | None = None
    """A JWT's own claims, when introspection answers with them (as Keycloak does:
    :meth:`~gateway.dev.dev_issuer.DevIssuer.mint_signed`)."""
    jkt: str | None = None
    """RFC 9449 §6: the thumbprint of the client's DPoP key the token is bound to."""

    # --- authlib TokenMixin ----------------------------------------------------------------

    def check_client(self, client: DevClient) -> bool:
        return client.client_id == self.client_id

    def get_scope(self) -> str:
        return self.scope

    def get_expires_in(self) -> int:
        return self.expires_at - self.issued_at

    def is_expired(self) -> bool:
        return time.time() >= self.expires_at

    def is_revoked(self) -> bool:
        return self.revoked

    def get_user(self) -> DevUser:
        return DevUser(self.sub)


_Grant = TypeVar("_Grant", AuthCode, TokenRecord)


@dataclass
class IssuerStore:
    """All mutable issuer state. Single event loop, so no locking is needed."""

    clients: dict[str, DevClient] = field(default_factory=dict)
    codes: dict[str, AuthCode] = field(default_factory=dict)
    tokens: dict[str, TokenRecord] = field(default_factory=dict)
    seen_jti: dict[str, float] = field(default_factory=dict)
    consents: dict[str, float] = field(default_factory=dict)
    introspection_calls: int = 0
    introspection_calls_by_client: dict[str, int] = field(default_factory=dict)
    assertion_audience: str | None = None
    """Test knob: accept private_key_jwt assertions only with this ``aud``: ``issuer``,
    ``token_endpoint`` or ``introspection_endpoint`` (None: any of them, RFC 7523 §3)."""
    clock_offset_s: int = 0
    """Test knob: the NumericDates in introspection answers (``exp``, ``iat``, ``nbf``) are
    shifted by this many seconds, as from an issuer whose clock is off (negative: behind)."""

    def new_family(self) -> str:
        return secrets.token_hex(8)

    def revoke_family(self, family: str) -> None:
        """RFC 7009 §2.1 / RFC 9700 §4.14.2: revoke every token of one grant."""
        for record in self.tokens.values():
            if record.family == family:
                record.revoked = True

    def single_use(self, record: _Grant, *, replayed: bool) -> _Grant | None:
        """``record`` unless it expired, or came back after its use: then every token of its
        grant is revoked (a code used twice, RFC 6749 §4.1.2; a rotated-out refresh token,
        RFC 9700 §4.14.2)."""
        if replayed:
            self.revoke_family(record.family)
            return None
        return None if record.is_expired() else record

    def purge(self, now: float) -> None:
        """Forget what can never be used again, so a long demo session stays small.

        Expired tokens introspect as inactive whether known or not; used or expired codes are
        kept for :data:`REPLAY_MEMORY_S` so a replay can still revoke what they produced.
        """
        for key in [k for k, t in self.tokens.items() if t.expires_at < now]:
            del self.tokens[key]
        for key in [k for k, c in self.codes.items() if c.expires_at + REPLAY_MEMORY_S < now]:
            del self.codes[key]
        for key in [k for k, exp in self.consents.items() if exp < now]:
            del self.consents[key]

    def remember_jti(self, key: str, expires_at: float) -> bool:
        """RFC 7523 §3 item 7: a client assertion's ``jti`` is single-use. False on replay."""
        now = time.time()
        for old in [k for k, exp in self.seen_jti.items() if exp < now]:
            del self.seen_jti[old]
        if key in self.seen_jti:
            return False
        self.seen_jti[key] = expires_at
        return True
