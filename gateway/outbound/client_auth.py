"""OAuth client authentication (RFC 6749 §2.3), one way for every request the gateway makes as a
client of an authorization server: token introspection (``gateway/auth``), the sign-in's code
redemption (``gateway/login``), the client-credentials grant, token exchange and a person's
upstream tokens (``gateway/backend``), each posted by :func:`post_oauth_form`.

- ``client_secret_basic``: ``Authorization: Basic base64(urlenc(id) ":" urlenc(secret))``.
  RFC 6749 §2.3.1 requires the form-urlencoding of both parts before they are joined; authlib
  1.9's ``encode_client_secret_basic`` leaves it out (a secret with ``:``, ``%`` or ``+`` then
  reads differently at the issuer), so the header is built here.
- ``client_secret_post``: ``client_id`` and ``client_secret`` form fields.
- ``private_key_jwt``: an RFC 7523 §2.2 assertion signed by authlib (``iss`` = ``sub`` =
  ``client_id``, ``aud`` = the audience the caller names, a unique ``jti``, a
  :data:`ASSERTION_LIFETIME_S` lifetime, ``kid`` when configured), with ``client_id`` beside it.

A secret is read with :meth:`~gateway.config.Secret.current` at each use, so a rotated
``file:`` secret is sent from the next request on.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable
from typing import Final
from urllib.parse import quote_plus, urlencode

from authlib.oauth2.rfc7523 import private_key_jwt_sign
from joserfc.jwk import ECKey, OKPKey, RSAKey

from gateway.config import ClientAuth, Secret
from gateway.outbound.client import Outbound
from gateway.outbound.responses import Response

__all__ = [
    "ASSERTION_LIFETIME_S",
    "JWT_BEARER_ASSERTION",
    "ClientAuthentication",
    "post_oauth_form",
    "signing_key",
]

ASSERTION_LIFETIME_S: Final = 60
"""Lifetime of a private_key_jwt client assertion (RFC 7523 §3: short)."""
JWT_BEARER_ASSERTION: Final = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"


def signing_key(pem: str, alg: str, *, name: str) -> RSAKey | ECKey:
    """The private key of a ``private_key_jwt`` client, parsed once at startup from PEM; a bad
    key is a ``ValueError`` naming the ``name`` setting (never the key: parsers may quote it)."""
    key_type = ECKey if alg.startswith("ES") else RSAKey
    try:
        key = key_type.import_key(pem)
    except Exception:  # joserfc/cryptography raise several types; none is safe to show
        raise ValueError(f"{name} is not a PEM private key matching its signing_alg") from None
    if not key.is_private:
        raise ValueError(f"{name} holds a public key, not a private key")
    return key


class ClientAuthentication:
    """How one client authenticates (module docstring). Raises ``ValueError`` (a fixed message)
    when what the method needs is missing."""

    __slots__ = ("_alg", "_client_id", "_clock", "_key", "_key_id", "_method", "_secret")

    def __init__(
        self,
        client_id: str,
        method: ClientAuth,
        *,
        clock: Callable[[], float],
        secret: Secret | None = None,
        key: RSAKey | ECKey | OKPKey | None = None,
        alg: str = "RS256",
        key_id: str | None = None,
    ) -> None:
        """``clock``: wall time (an assertion's ``iat``/``exp``)."""
        if method == "private_key_jwt" and key is None:
            raise ValueError("private_key_jwt needs a private key")
        if method != "private_key_jwt" and secret is None:
            raise ValueError(f"{method} needs a client secret")
        self._client_id = client_id
        self._method = method
        self._clock = clock
        self._secret = secret
        self._key = key
        self._alg = alg
        self._key_id = key_id

    def apply(self, headers: dict[str, str], audience: str) -> list[tuple[str, str]]:
        """Add the authentication to ``headers``; the form fields it needs, to add to the
        request's form. ``audience``: a private_key_jwt assertion's ``aud``."""
        secret = self._secret.current() if self._secret is not None else ""
        if self._method == "client_secret_basic":
            raw = quote_plus(self._client_id) + ":" + quote_plus(secret)
            headers["Authorization"] = "Basic " + base64.b64encode(raw.encode()).decode("ascii")
            return []
        if self._method == "client_secret_post":
            return [("client_id", self._client_id), ("client_secret", secret)]
        now = int(self._clock())
        assertion = private_key_jwt_sign(
            self._key,
            self._client_id,
            audience,
            alg=self._alg,
            header={"kid": self._key_id} if self._key_id else {},
            issued_at=now,
            expires_at=now + ASSERTION_LIFETIME_S,
        )
        return [
            ("client_assertion_type", JWT_BEARER_ASSERTION),
            ("client_assertion", str(assertion)),
            ("client_id", self._client_id),
        ]


async def post_oauth_form(
    outbound: Outbound,
    destination: str,
    url: str,
    form: Iterable[tuple[str, str]],
    *,
    auth: ClientAuthentication | None,
    audience: str,
    timeout_s: float,
    max_body: int,
    span: str | None = None,
) -> Response:
    """POST ``form`` to an authorization server's endpoint (token, introspection), asking for
    JSON (GitHub answers form-encoded without it), with ``auth``'s client authentication
    (``audience``: a ``private_key_jwt`` assertion's ``aud``; None: a public client, whose
    ``client_id`` the form carries). Raises :class:`~gateway.outbound.failures.OutboundError`."""
    headers = {
        "Content-Type": "application/x-www-form-urlencoded",
        "Accept": "application/json",
    }
    fields = list(form)
    if auth is not None:
        fields += auth.apply(headers, audience)
    return await outbound.request(
        destination,
        "POST",
        url,
        timeout_s=timeout_s,
        headers=headers,
        body=urlencode(fields).encode("ascii"),
        max_body=max_body,
        span=span,
    )
