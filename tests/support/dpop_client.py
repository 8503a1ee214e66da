"""A DPoP client for the tests (RFC 9449 §4), independent of the gateway's verifier.

Keys are generated with ``cryptography`` and proofs are signed with ``joserfc``'s JWS
serializer; nothing here imports ``gateway.auth``. :meth:`DpopKey.proof` builds a valid proof by
default, and each keyword spoils one part of it for the refusal tests.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import time
import warnings
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from joserfc import jws
from joserfc.errors import SecurityWarning
from joserfc.jwk import ECKey, OctKey, OKPKey

__all__ = ["DpopKey", "ath_of", "dpop_headers"]

_UNSET: Any = object()


def ath_of(token: str) -> str:
    digest = hashlib.sha256(token.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def _pem(private: ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey) -> bytes:
    return private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


class DpopKey:
    """A client's DPoP key pair: ``ES256`` (P-256) or ``EdDSA`` (Ed25519)."""

    def __init__(self, alg: str = "ES256") -> None:
        self.alg = alg
        self.key: ECKey | OKPKey
        if alg == "ES256":
            self.key = ECKey.import_key(_pem(ec.generate_private_key(ec.SECP256R1())))
        elif alg == "EdDSA":
            self.key = OKPKey.import_key(_pem(ed25519.Ed25519PrivateKey.generate()))
        else:
            raise ValueError(alg)

    @property
    def public_jwk(self) -> dict[str, Any]:
        return dict(self.key.as_dict(private=False))

    @property
    def jkt(self) -> str:
        """RFC 7638 SHA-256 thumbprint (what an issuer puts in ``cnf.jkt``)."""
        return self.key.thumbprint()

    def proof(
        self,
        htu: str,
        *,
        token: str | None = None,
        htm: str = "POST",
        iat: float | None = None,
        jti: str | None = None,
        nonce: str | None = None,
        typ: str = "dpop+jwt",
        alg: str | None = None,
        jwk: Any = _UNSET,
        ath: Any = _UNSET,
        claims: dict[str, Any] | None = None,
    ) -> str:
        """A compact proof for a request to ``htu``; ``ath`` is the token's hash when ``token``
        is given. ``alg="none"`` and ``alg="HS256"`` sign as those algorithms would."""
        header: dict[str, Any] = {
            "typ": typ,
            "alg": alg or self.alg,
            "jwk": self.public_jwk if jwk is _UNSET else jwk,
        }
        payload: dict[str, Any] = {
            "jti": jti or secrets.token_urlsafe(16),
            "htm": htm,
            "htu": htu,
            "iat": int(time.time() if iat is None else iat),
        }
        if ath is not _UNSET:
            if ath is not None:
                payload["ath"] = ath
        elif token is not None:
            payload["ath"] = ath_of(token)
        if nonce is not None:
            payload["nonce"] = nonce
        payload.update(claims or {})
        body = json.dumps(payload, separators=(",", ":"))
        if header["alg"] == "none":
            signing = base64.urlsafe_b64encode(json.dumps(header).encode()).rstrip(b"=")
            data = base64.urlsafe_b64encode(body.encode()).rstrip(b"=")
            return (signing + b"." + data + b".").decode("ascii")
        if header["alg"].startswith("HS"):
            secret = OctKey.import_key(json.dumps(self.public_jwk).encode())
            return jws.serialize_compact(header, body, secret, algorithms=[header["alg"]])
        with warnings.catch_warnings():
            # joserfc warns that RFC 9864 deprecates "EdDSA" (for "Ed25519"); clients still send it.
            warnings.simplefilter("ignore", SecurityWarning)
            return jws.serialize_compact(header, body, self.key, algorithms=[header["alg"]])


def dpop_headers(token: str, proof: str | None, *, scheme: str = "DPoP") -> dict[str, str]:
    headers = {"Authorization": f"{scheme} {token}"}
    if proof is not None:
        headers["DPoP"] = proof
    return headers
