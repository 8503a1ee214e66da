"""The login surface's two cookies, sealed: the session, and one sign-in in progress.

Both are AEAD envelopes of :mod:`gateway.sealing` under ``input_requests.seal_keys`` (the ring
every replica shares; any replica opens what another sealed), each purpose with its own label
(HKDF info), so a session never opens as a sign-in, a ``requestState`` or a task handle, and
the reverse. The cookies carry everything (no server-side session record; sign-out leaves a
mark in the shared store instead, :mod:`gateway.login.login_surface`)::

    __Host-mcp-gateway-session  {"v":1,"sid","iss","sub","m","iat","exp","csrf"[,"cl"]}
    __Host-mcp-gateway-signin   {"v":1,"st","nonce","pkce","next","m","iat","exp"}

Attributes: the ``__Host-`` prefix (``Secure``, ``Path=/``, no ``Domain``: no sibling host can
set or shadow it), ``HttpOnly`` (no script reads it), ``SameSite=Lax`` (sent on the top-level
navigation back from the issuer and from an MCP client's link, never on a cross-site form
post), ``Max-Age`` the record's own lifetime. A cookie that does not open (tampered, sealed
under a removed key, another label) or whose ``exp`` has passed is no cookie at all.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeVar

from aiohttp import web

from gateway import b64url
from gateway.config import SealKey
from gateway.jsonkit.read import JsonError, loads_object
from gateway.jsonkit.write import canonical
from gateway.login.person import BrowserIdentity
from gateway.sealing import EnvelopeError, SealRing, envelope_chars

__all__ = [
    "MAX_COOKIE_CHARS",
    "SESSION_COOKIE",
    "SIGNIN_COOKIE",
    "Cookies",
    "Method",
    "Session",
    "SignIn",
    "random_token",
]

SESSION_COOKIE: Final = "__Host-mcp-gateway-session"
SIGNIN_COOKIE: Final = "__Host-mcp-gateway-signin"
SESSION_LABEL: Final = b"mcp-gateway/login-session/v1"
SIGNIN_LABEL: Final = b"mcp-gateway/login-signin/v1"
MAX_COOKIE_CHARS: Final = 3800
"""Longest sealed value: a browser keeps a cookie of at most 4096 bytes, name included."""
_MAX_PLAINTEXT: Final = 2600
VERSION: Final = 1

Method = Literal["oidc", "verifier"]
"""How the browser proved who it is: the relying party's ID token, or an external verifier."""
_METHODS: Final = ("oidc", "verifier")


def random_token() -> str:
    """32 random bytes, base64url (43 characters): session ids, CSRF tokens, states, nonces."""
    return b64url.encode(secrets.token_bytes(32))


@dataclass(frozen=True, slots=True)
class Session:
    """A signed-in browser."""

    sid: str
    """Random; what sign-out marks as ended (in the shared store, by digest)."""
    identity: BrowserIdentity
    method: Method
    issued_at: int
    expires_at: int
    csrf: str
    """The synchronizer token every form of this session carries."""


@dataclass(frozen=True, slots=True)
class SignIn:
    """One sign-in in progress, bound to this browser by its cookie."""

    state: str
    """Sent to the issuer (or verifier), which returns it: the answer must carry this value."""
    nonce: str
    """Sent too; the ID token (or the verifier's assertion) must carry it."""
    verifier: str
    """The PKCE code verifier (RFC 7636; empty for an external verifier)."""
    next_path: str
    """Where the browser goes once signed in (a path under the surface's prefix)."""
    method: Method
    issued_at: int
    expires_at: int


_Record = TypeVar("_Record", Session, SignIn)


class Cookies:
    """Seals and opens both cookies (one ring, two labels) and writes them on responses."""

    def __init__(
        self,
        keys: Sequence[SealKey],
        seal_key_id: str,
        *,
        resource: str,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._session = SealRing(keys, seal_key_id, label=SESSION_LABEL, resource=resource)
        self._signin = SealRing(keys, seal_key_id, label=SIGNIN_LABEL, resource=resource)
        self._clock = clock
        self._max_chars = min(envelope_chars(_MAX_PLAINTEXT), MAX_COOKIE_CHARS)

    # --- the session ---------------------------------------------------------------------

    def new_session(self, identity: BrowserIdentity, method: Method, ttl_s: int) -> Session:
        now = int(self._clock())
        return Session(random_token(), identity, method, now, now + ttl_s, random_token())

    def seal_session(self, session: Session) -> str:
        return self._seal(
            self._session,
            {
                "sid": session.sid,
                "iss": session.identity.issuer,
                "sub": session.identity.subject,
                "m": session.method,
                "iat": session.issued_at,
                "exp": session.expires_at,
                "csrf": session.csrf,
                **(
                    {"cl": [list(pair) for pair in session.identity.claims]}
                    if session.identity.claims
                    else {}
                ),
            },
        )

    def session(self, request: web.Request) -> Session | None:
        """The request's session, or None (no cookie, or one that does not open or expired)."""
        return self._opened(self._session, request.cookies.get(SESSION_COOKIE), _session)

    # --- a sign-in in progress -----------------------------------------------------------

    def new_signin(self, next_path: str, method: Method, ttl_s: int, *, pkce: bool) -> SignIn:
        now = int(self._clock())
        verifier = random_token() if pkce else ""
        return SignIn(random_token(), random_token(), verifier, next_path, method, now, now + ttl_s)

    def seal_signin(self, signin: SignIn) -> str:
        return self._seal(
            self._signin,
            {
                "st": signin.state,
                "nonce": signin.nonce,
                "pkce": signin.verifier,
                "next": signin.next_path,
                "m": signin.method,
                "iat": signin.issued_at,
                "exp": signin.expires_at,
            },
        )

    def signin(self, request: web.Request) -> SignIn | None:
        """The sign-in this browser started, or None (as :meth:`session`)."""
        return self._opened(self._signin, request.cookies.get(SIGNIN_COOKIE), _signin)

    # --- on the wire ---------------------------------------------------------------------

    @staticmethod
    def set(response: web.StreamResponse, name: str, value: str, max_age: int) -> None:
        response.set_cookie(
            name, value, path="/", max_age=max_age, secure=True, httponly=True, samesite="Lax"
        )

    @staticmethod
    def clear(response: web.StreamResponse, name: str) -> None:
        # Deleting a __Host- cookie takes the same attributes (a browser ignores it otherwise).
        response.del_cookie(name, path="/", secure=True, httponly=True, samesite="Lax")

    def _seal(self, ring: SealRing, claims: dict[str, Any]) -> str:
        body = canonical({"v": VERSION, **claims})
        if len(body) > _MAX_PLAINTEXT:
            raise ValueError("cookie claims too large")
        return ring.seal(body)

    def _opened(
        self, ring: SealRing, text: str | None, read: Callable[[dict[str, Any]], _Record]
    ) -> _Record | None:
        """The record a cookie holds, or None: no cookie, one that does not open (:meth:`_open`),
        one that misses a member, or one whose ``exp`` has passed."""
        obj = self._open(ring, text)
        if obj is None:
            return None
        try:
            record = read(obj)
        except (KeyError, TypeError, ValueError):
            return None
        return record if self._clock() < record.expires_at else None

    def _open(self, ring: SealRing, text: str | None) -> dict[str, Any] | None:
        """A cookie's members, or None (none, or one that does not open or is of another
        version)."""
        if not text:
            return None
        try:
            obj = loads_object(ring.open(text, max_chars=self._max_chars))
        except (EnvelopeError, JsonError):
            return None
        return obj if obj.get("v") == VERSION else None


def _session(obj: dict[str, Any]) -> Session:
    return Session(
        sid=_text(obj["sid"]),
        identity=BrowserIdentity(_text(obj["iss"]), _text(obj["sub"]), _claims(obj.get("cl", []))),
        method=_method(obj["m"]),
        issued_at=_int(obj["iat"]),
        expires_at=_int(obj["exp"]),
        csrf=_text(obj["csrf"]),
    )


def _signin(obj: dict[str, Any]) -> SignIn:
    return SignIn(
        state=_text(obj["st"]),
        nonce=_text(obj["nonce"]),
        verifier=_text(obj["pkce"], empty=True),
        next_path=_text(obj["next"]),
        method=_method(obj["m"]),
        issued_at=_int(obj["iat"]),
        expires_at=_int(obj["exp"]),
    )


def _text(value: Any, *, empty: bool = False) -> str:
    if not isinstance(value, str) or (not value and not empty):
        raise TypeError("not a string")
    return value


def _int(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError("not an integer")
    return value


def _method(value: Any) -> Method:
    if value == "oidc":
        return "oidc"
    if value == "verifier":
        return "verifier"
    raise ValueError("unknown method")


def _claims(value: Any) -> tuple[tuple[str, str], ...]:
    """The session's kept claims: pairs of strings (a cookie only this gateway sealed)."""
    if not isinstance(value, list):
        raise TypeError("claims")
    return tuple((_text(pair[0]), _text(pair[1])) for pair in value)
