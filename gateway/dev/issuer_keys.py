"""RFC 7517 / RFC 9068: the development issuer's signing keys and JWT access tokens.

DEVELOPMENT ONLY. :class:`DevKeySet` holds a rotating set of signing keys (RSA, EC P-256 or
Ed25519), publishes their public halves as a JWK Set, and signs compact JWS tokens with the key
currently in use. Tests rotate keys the way real issuers do: :meth:`DevKeySet.add` a key
(published, not yet signing), :meth:`DevKeySet.use` it, then :meth:`DevKeySet.remove` the old
one. The first RSA key is generated on first use, so issuers that never sign a JWT pay nothing.

:func:`access_token_claims` builds the RFC 9068 §2.2 claim set of an access token.
"""

from __future__ import annotations

import base64
import json
import secrets
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from aiohttp import web
from joserfc.jwk import ECKey, OKPKey, RSAKey
from joserfc.jws import JWSRegistry

__all__ = [
    "ACCESS_TOKEN_TYP",
    "DevKeySet",
    "JwksPublisher",
    "KeyKind",
    "access_token_claims",
    "b64url",
]

ACCESS_TOKEN_TYP = "at+jwt"
"""RFC 9068 §2.1: the ``typ`` header of a JWT access token."""
KeyKind = Literal["RSA", "EC", "OKP"]
_ALG = {"RSA": "RS256", "EC": "ES256", "OKP": "EdDSA"}

SigningKey = RSAKey | ECKey | OKPKey


def b64url(raw: bytes) -> str:
    """Unpadded base64url (RFC 7515 §2)."""
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _generate(kind: KeyKind, rsa_bits: int = 2048) -> SigningKey:
    if kind == "RSA":
        return RSAKey.generate_key(rsa_bits)
    if kind == "EC":
        return ECKey.generate_key("P-256")
    return OKPKey.generate_key("Ed25519")


class DevKeySet:
    """The issuer's keys by ``kid``; one of them signs (see the module docstring)."""

    def __init__(self) -> None:
        self._keys: dict[str, tuple[SigningKey, str]] = {}
        self._signing: str | None = None

    def _ensure(self) -> None:
        if self._signing is None:
            self._signing = self.add("RSA")

    @property
    def signing_kid(self) -> str:
        self._ensure()
        assert self._signing is not None
        return self._signing

    @property
    def kids(self) -> tuple[str, ...]:
        self._ensure()
        return tuple(self._keys)

    def add(self, kind: KeyKind = "RSA", *, kid: str | None = None, rsa_bits: int = 2048) -> str:
        """Publish a new key (it does not sign until :meth:`use`); return its ``kid``.
        ``rsa_bits`` below 2048 makes a weak key, for tests of how the gateway treats one."""
        kid = kid or f"dev-{kind.lower()}-{secrets.token_hex(4)}"
        self._keys[kid] = (_generate(kind, rsa_bits), _ALG[kind])
        if self._signing is None:
            self._signing = kid
        return kid

    def use(self, kid: str) -> None:
        """Sign with ``kid`` from now on."""
        if kid not in self._keys:
            raise KeyError(kid)
        self._signing = kid

    def remove(self, kid: str) -> None:
        """Stop publishing ``kid`` (the signing key cannot be removed)."""
        if kid == self._signing:
            raise ValueError("use another key before removing the signing key")
        del self._keys[kid]

    def key(self, kid: str | None = None) -> SigningKey:
        """The private key ``kid`` (default: the signing key), for tests that forge tokens."""
        return self._keys[kid or self.signing_kid][0]

    def jwks(self) -> dict[str, Any]:
        """The public JWK Set (RFC 7517 §5) with ``kid``, ``use`` and ``alg`` on every key."""
        self._ensure()
        keys = []
        for kid, (key, alg) in self._keys.items():
            public = key.as_dict(private=False)
            keys.append({**public, "kid": kid, "use": "sig", "alg": alg})
        return {"keys": keys}

    def sign(
        self,
        claims: Mapping[str, Any],
        *,
        header: Mapping[str, Any] | None = None,
        kid: str | None = None,
    ) -> str:
        """A compact JWS of ``claims`` signed with ``kid`` (default: the signing key).

        The header is ``{"typ": "at+jwt", "alg": <the key's>, "kid": <kid>}`` updated with
        ``header`` (a test may set ``typ``, add ``crit``, or drop ``kid`` with ``None``).
        """
        kid = kid or self.signing_kid
        key, alg = self._keys[kid]
        protected: dict[str, Any] = {"typ": ACCESS_TOKEN_TYP, "alg": alg, "kid": kid}
        for name, value in (header or {}).items():
            if value is None:
                protected.pop(name, None)
            else:
                protected[name] = value
        signing_input = (
            b64url(json.dumps(protected, separators=(",", ":")).encode())
            + "."
            + b64url(json.dumps(dict(claims), separators=(",", ":")).encode())
        )
        # The algorithm object directly: joserfc's registry warns about "EdDSA" (RFC 9864 names
        # Ed25519), and the warning is not the development issuer's business.
        signature = JWSRegistry.algorithms[protected["alg"]].sign(signing_input.encode(), key)
        return signing_input + "." + b64url(signature)


class JwksPublisher:
    """``GET /jwks``: the key set, with knobs for tests (an outage, garbage, cache headers)."""

    def __init__(self, keys: DevKeySet) -> None:
        self.keys = keys
        self.calls = 0
        """Requests served (tests count fetches at the issuer)."""
        self.status: int | None = None
        """Answer with this HTTP status instead (an outage)."""
        self.body: bytes | None = None
        """Answer 200 with these bytes instead (garbage, a bad set)."""
        self.content_type = "application/json"
        """The ``Content-Type`` of :attr:`body`."""
        self.max_age_s: int | None = 300
        """``Cache-Control: max-age`` of the answer; None sends no cache header."""

    async def handle(self, request: web.Request) -> web.Response:
        self.calls += 1
        if self.status is not None:
            return web.json_response({"error": "temporarily_unavailable"}, status=self.status)
        headers = {} if self.max_age_s is None else {"Cache-Control": f"max-age={self.max_age_s}"}
        if self.body is not None:
            headers["Content-Type"] = self.content_type
            return web.Response(body=self.body, headers=headers)
        return web.json_response(self.keys.jwks(), headers=headers)


def access_token_claims(
    *,
    issuer: str,
    sub: str,
    client_id: str,
    scope: str,
    audience: Sequence[str],
    issued_at: int,
    expires_at: int,
    jti: str | None = None,
    jkt: str | None = None,
) -> dict[str, Any]:
    """RFC 9068 §2.2: ``iss``, ``exp``, ``aud``, ``sub``, ``client_id``, ``iat``, ``jti`` and
    ``scope`` (``aud`` a string when there is one audience); ``cnf.jkt`` for a DPoP-bound
    token (RFC 9449 §6.1)."""
    claims: dict[str, Any] = {"iss": issuer, "exp": expires_at}
    if audience:  # without one the token has no aud, and resource servers refuse it
        claims["aud"] = audience[0] if len(audience) == 1 else list(audience)
    claims |= {
        "sub": sub,
        "client_id": client_id,
        "iat": issued_at,
        "jti": jti or secrets.token_urlsafe(16),
        "scope": scope,
    }
    if jkt is not None:
        claims["cnf"] = {"jkt": jkt}
    return claims
