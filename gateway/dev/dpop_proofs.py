"""DPoP (RFC 9449) for the development issuer and the demo: the token endpoint's proof check and
a client's proof signer.

DEVELOPMENT ONLY. The issuer's token endpoint (and ``/dev/tokens``) accepts one ``DPoP`` header
per request (§5): :class:`TokenEndpointProofs` checks it (RFC 9449 §4.3: ``typ``, an asymmetric
``alg``, a public ``jwk``, the signature, ``htm`` POST, ``htu`` the endpoint, ``iat`` within
five minutes, a ``jti`` not seen before) with joserfc, and the issued access token is bound to
the key's RFC 7638 thumbprint (``cnf.jkt``). This is deliberately not the gateway's verifier
(``gateway/auth/dpop.py``): the development tooling may not import the auth layer, and two
independent implementations meeting over HTTP is the better test of both.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final
from urllib.parse import urlsplit

from joserfc import jws
from joserfc.errors import JoseError, SecurityWarning
from joserfc.jwk import ECKey, OKPKey, RSAKey

__all__ = [
    "PROOF_ALGS",
    "DpopRefused",
    "TokenEndpointProofs",
    "new_client_key",
    "sign_proof",
]

PROOF_ALGS: Final = ("ES256", "EdDSA", "PS256", "RS256")
"""``dpop_signing_alg_values_supported`` of the development issuer (RFC 9449 §5.1)."""
WINDOW_S: Final = 300
_PRIVATE: Final = frozenset({"d", "p", "q", "dp", "dq", "qi", "oth", "k"})
_KTY: Final = {"ES256": "EC", "EdDSA": "OKP", "PS256": "RSA", "RS256": "RSA"}


class DpopRefused(ValueError):
    """The request's proof is refused: answer 400 ``invalid_dpop_proof`` (RFC 9449 §5)."""


def _endpoint(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}{parts.path or '/'}"


class TokenEndpointProofs:
    """The issuer's check of a client's proof; remembers each ``jti`` for the window."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._seen: dict[str, float] = {}

    def check(self, values: Sequence[str], *, htm: str, htu: str) -> str:
        """The thumbprint (``jkt``) of the one proof in ``values``; raise DpopRefused."""
        if len(values) != 1:
            raise DpopRefused("exactly one DPoP header is required")
        value = values[0]
        try:
            header = jws.extract_compact(value.encode("ascii")).protected
        except (JoseError, ValueError, UnicodeError):
            raise DpopRefused("the DPoP proof is not a compact JWS") from None
        alg, jwk = header.get("alg"), header.get("jwk")
        if header.get("typ") != "dpop+jwt":
            raise DpopRefused("typ must be dpop+jwt")
        if alg not in PROOF_ALGS:
            raise DpopRefused("unsupported DPoP proof alg")
        if not isinstance(jwk, dict) or _PRIVATE & jwk.keys() or jwk.get("kty") != _KTY[alg]:
            raise DpopRefused("jwk must be the public key for alg")
        try:
            key: ECKey | OKPKey | RSAKey
            if _KTY[alg] == "EC":
                key = ECKey.import_key(jwk)
            elif _KTY[alg] == "OKP":
                key = OKPKey.import_key(jwk)
            else:
                key = RSAKey.import_key(jwk)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", SecurityWarning)  # RFC 9864 deprecates "EdDSA"
                verified = jws.deserialize_compact(value, key, algorithms=[alg])
            claims = json.loads(verified.payload)
        except (JoseError, ValueError, TypeError):
            raise DpopRefused("bad DPoP proof signature") from None
        if not isinstance(claims, dict):
            raise DpopRefused("the DPoP proof's payload is not an object")
        now = self._clock()
        iat, jti = claims.get("iat"), claims.get("jti")
        if claims.get("htm") != htm or not isinstance(claims.get("htu"), str):
            raise DpopRefused("htm or htu does not match this request")
        if _endpoint(claims["htu"]) != _endpoint(htu) or "?" in claims["htu"]:
            raise DpopRefused("htm or htu does not match this request")
        if not isinstance(iat, int | float) or abs(now - iat) > WINDOW_S:
            raise DpopRefused("iat is too far from now")
        if not isinstance(jti, str) or not jti:
            raise DpopRefused("jti is required")
        for old in [k for k, until in self._seen.items() if until <= now]:
            del self._seen[old]
        thumbprint = str(key.thumbprint())
        seen = f"{thumbprint}:{jti}"
        if seen in self._seen:
            raise DpopRefused("the DPoP proof was used before")
        self._seen[seen] = iat + WINDOW_S
        return thumbprint


def new_client_key() -> ECKey:
    """A client's DPoP key (P-256, for ES256)."""
    return ECKey.generate_key("P-256", private=True)


def sign_proof(
    key: ECKey | OKPKey,
    *,
    htm: str,
    htu: str,
    token: str | None = None,
    nonce: str | None = None,
    alg: str = "ES256",
) -> str:
    """A fresh proof (RFC 9449 §4.2) for one request; ``ath`` when it carries ``token``."""
    claims: dict[str, Any] = {
        "jti": secrets.token_urlsafe(16),
        "htm": htm,
        "htu": htu,
        "iat": int(time.time()),
    }
    if token is not None:
        digest = hashlib.sha256(token.encode("ascii")).digest()
        claims["ath"] = base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")
    if nonce is not None:
        claims["nonce"] = nonce
    public: Mapping[str, Any] = key.as_dict(private=False)
    header = {"typ": "dpop+jwt", "alg": alg, "jwk": dict(public)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SecurityWarning)
        return jws.serialize_compact(header, json.dumps(claims), key, algorithms=[alg])
