"""The DPoP proof of one request (RFC 9449 §4.3, §7.1), checked before the token it binds.

:func:`check_proof` is pure (no I/O; the clock is an argument). It takes every ``DPoP`` header
line of the request, the access token's hash (``ath``), the request's method and the public URL
of the resource (``resource``: the URL the client called behind the TLS proxy, never the
listener's own), and returns a :class:`Proof` or raises
:class:`~gateway.errors.InvalidDpopProof` whose ``reason`` (one of :data:`PROOF_REFUSALS`, a
bounded metrics label) says which check failed. In order, first failure wins:

1. exactly one ``DPoP`` header (§4.3 item 1), at most :data:`MAX_PROOF_CHARS` long;
2. a JWS in compact form, read by the strict decoder of our access tokens (:mod:`.jws`:
   canonical base64url, no duplicate members, bounded depth) (item 2);
3. ``typ`` ``dpop+jwt`` (item 4, compared as a media type, RFC 7515 §4.1.9); no ``crit``;
4. ``alg`` one of the issuer's ``dpop.algorithms``: asymmetric only, ``none`` and the MAC
   family can never be configured (item 5);
5. ``jwk``: a public key of the type and curve ``alg`` needs, without private members (item 7;
   RSA at least 2048 bits);
6. the signature, verified with that key (:mod:`.signatures`) (item 6);
7. claims: ``jti`` a non-empty string of at most 256 characters; ``htm`` equal to the request's
   method (item 8); ``htu`` equal to ``resource`` after RFC 3986 §6.2.2/§6.2.3 normalisation,
   and without query or fragment (RFC 9449 §4.2 defines it "without query and fragment
   parts") (item 9); ``iat`` a number within ``iat_window_s`` of now, either way (item 11);
   ``ath`` the base64url SHA-256 of the access token (§7.1 / §4.3 item 12).

What needs state or the token's claims is checked by the caller: the ``nonce``
(:mod:`.dpop_nonce`), the ``jti`` replay (:class:`gateway.seams.DpopReplays`) and the RFC 7638
thumbprint of the key against the token's ``cnf.jkt`` (:func:`check_binding`).

Cost: steps 3-5 depend on the protected header alone, so they, the key's import and its
thumbprint are done once per header text (a client's proofs share one); per proof there is one
signature verification and no other cryptography (``ath`` is compared with the hash of the
token the caller already computed for its cache).
"""

from __future__ import annotations

import functools
import hmac
import posixpath
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

from joserfc.jwk import ECKey, OKPKey, RSAKey

from gateway import b64url
from gateway.bounded import BoundedMap
from gateway.errors import InvalidDpopProof, InvalidToken
from gateway.observability.metric_labels import DPOP_REFUSALS

from .cache import token_digest
from .jwks import MIN_RSA_BITS, key_type_for
from .jws import read_header, read_rest
from .signatures import Verifier, verifier

__all__ = [
    "MAX_PROOF_CHARS",
    "PROOF_REFUSALS",
    "Proof",
    "ath_of",
    "check_binding",
    "check_proof",
    "normalise_htu",
    "token_hash",
]

MAX_PROOF_CHARS: Final = 4096
"""Longest ``DPoP`` header read (an RSA-4096 proof is about 1.6 KiB)."""
MAX_JTI_CHARS: Final = 256
PROOF_REFUSALS: Final = tuple(r for r in DPOP_REFUSALS if r not in ("as_bearer", "required"))
"""``reason`` of :class:`~gateway.errors.InvalidDpopProof` (``dpop_refusals_total{reason}``);
``nonce`` counts the ``use_dpop_nonce`` answers."""

_TYP: Final = "application/dpop+jwt"
_MAX_KEYS: Final = 1024


@dataclass(frozen=True, slots=True)
class _ProofKey:
    """What proofs with one protected header are checked with: its ``alg``, its ``jwk``'s
    RFC 7638 thumbprint and the key's verifier (public keys only)."""

    alg: str
    jkt: str
    verify: Verifier


_PROOF_KEYS: Final[BoundedMap[str, _ProofKey]] = BoundedMap(_MAX_KEYS)
"""Protected-header segment (its exact text) -> its checks' outcome: one entry per client key
(and header spelling), the least recently used out first."""
_PRIVATE_MEMBERS: Final = frozenset({"d", "p", "q", "dp", "dq", "qi", "oth", "k"})
_PERCENT: Final = re.compile(r"%([0-9A-Fa-f]{2})")
_UNRESERVED: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


@dataclass(frozen=True, slots=True)
class Proof:
    """A proof that passed :func:`check_proof`: what the stateful checks need."""

    jkt: str
    """RFC 7638 SHA-256 thumbprint of the proof's key (base64url)."""
    alg: str
    jti: str
    iat: float
    nonce: str | None


def token_hash(token: str) -> str:
    """``ath`` (RFC 9449 §4.2): base64url(SHA-256(ASCII(token))), unpadded."""
    return ath_of(token_digest(token)[0])


def ath_of(digest: bytes) -> str:
    """``ath`` of the token whose SHA-256 is ``digest`` (the token cache's key, computed once
    per request for both)."""
    return b64url.encode(digest)


def _percent(match: re.Match[str]) -> str:
    char = chr(int(match.group(1), 16))
    # RFC 3986 §6.2.2.2: decode unreserved characters, uppercase the hex of the others.
    return char if char in _UNRESERVED else "%" + match.group(1).upper()


@functools.lru_cache(maxsize=256)
def normalise_htu(url: str) -> str | None:
    """RFC 3986 §6.2.2 (case, percent-encoding, dot segments) and §6.2.3 (default port, empty
    path) normalisation of an ``htu``, as RFC 9449 §4.3 item 9 asks; None when it is not an
    absolute http(s) URI without userinfo, query and fragment."""
    if not url.isascii() or any(c in url for c in " \t\r\n\\"):
        return None
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    host = parts.hostname
    if scheme not in ("http", "https") or not host or "@" in parts.netloc:
        return None
    if parts.query or parts.fragment or "?" in url or "#" in url:
        return None
    netloc = f"[{host}]" if ":" in host else host  # hostname drops an IPv6 literal's brackets
    if port is not None and port != {"http": 80, "https": 443}[scheme]:
        netloc += f":{port}"
    path = _PERCENT.sub(_percent, parts.path) or "/"
    trailing = path.endswith("/")
    path = posixpath.normpath(path)
    if path.startswith("//"):  # normpath keeps a leading "//"
        path = "/" + path.lstrip("/")
    if trailing and path != "/":
        path += "/"
    return f"{scheme}://{netloc}{path}"


def _refuse(reason: str, detail: str) -> InvalidDpopProof:
    return InvalidDpopProof(reason=reason, detail=detail)


def _public_key(jwk: object, alg: str) -> RSAKey | ECKey | OKPKey:
    if not isinstance(jwk, dict):
        raise _refuse("jwk", "jwk header missing or not an object")
    if _PRIVATE_MEMBERS & jwk.keys():
        # §4.3 item 7: a proof that publishes its private key proves nothing.
        raise _refuse("jwk", "jwk has private key members")
    kty, curves = key_type_for(alg)
    if jwk.get("kty") != kty or (curves is not None and jwk.get("crv") not in curves):
        raise _refuse("jwk", "jwk key type does not fit alg")
    try:
        key: RSAKey | ECKey | OKPKey
        if kty == "RSA":
            key = RSAKey.import_key(jwk)
            if key.raw_value.key_size < MIN_RSA_BITS:
                raise _refuse("jwk", "RSA key shorter than 2048 bits")
        elif kty == "EC":
            key = ECKey.import_key(jwk)
        else:
            key = OKPKey.import_key(jwk)
    except InvalidDpopProof:
        raise
    except Exception:  # joserfc/cryptography raise several types for a malformed key
        raise _refuse("jwk", "jwk is not a valid public key") from None
    if key.is_private:
        raise _refuse("jwk", "jwk has private key members")
    return key


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def check_proof(
    values: tuple[str, ...],
    *,
    ath: str,
    method: str,
    htu: str,
    algorithms: Collection[str],
    iat_window_s: float,
    now: float,
) -> Proof:
    """Check the request's ``DPoP`` header lines (``values``) as the module docstring says.

    ``ath``: the access token's hash (:func:`ath_of` its digest); ``htu``: the expected URL,
    already normalised (:func:`normalise_htu` of ``resource``)."""
    if not values:
        raise _refuse("missing", "no DPoP header")
    if len(values) > 1:
        raise _refuse("multiple", "several DPoP headers")
    value = values[0].strip(" \t")
    if not value or len(value) > MAX_PROOF_CHARS:
        raise _refuse("malformed", "DPoP header empty or too long")
    if value.count(".") != 2:
        raise _refuse("malformed", "DPoP header is not a compact JWS")
    header_b64, payload_b64, signature_b64 = value.split(".")
    # A client signs every proof with one key and the same header: its checks, the key's
    # import and thumbprint are done once per header text (a different spelling of a header,
    # or of the same key, is an entry of its own: no entry is found by what it decodes to).
    known = _PROOF_KEYS.get(header_b64)
    try:
        header = read_header(header_b64) if known is None else None
        if (known is None and header is None) or not payload_b64:
            raise _refuse("malformed", "DPoP header is not a compact JWS")
        claims, signature = read_rest(payload_b64, signature_b64)
    except InvalidToken:
        raise _refuse("malformed", "DPoP header is not a compact JWS") from None
    if known is None:
        assert header is not None
        known = _proof_key(header, algorithms)
        _PROOF_KEYS.put(header_b64, known)
    elif known.alg not in algorithms:
        raise _refuse("alg", "alg not allowed for DPoP proofs")
    signing_input = value[: len(header_b64) + 1 + len(payload_b64)].encode("ascii")
    if not known.verify(signing_input, signature):
        raise _refuse("signature", "bad proof signature")
    jti = claims.get("jti")
    if not isinstance(jti, str) or not 0 < len(jti) <= MAX_JTI_CHARS:
        raise _refuse("jti", "jti missing, empty or too long")
    if claims.get("htm") != method:
        raise _refuse("htm", "htm is not the request's method")
    claimed = claims.get("htu")
    if not isinstance(claimed, str) or normalise_htu(claimed) != htu:
        raise _refuse("htu", "htu is not the resource URL")
    iat = _number(claims.get("iat"))
    if iat is None:
        raise _refuse("iat", "iat missing or not a number")
    if abs(now - iat) > iat_window_s:
        raise _refuse("iat", "iat outside the accepted window")
    claimed_ath = claims.get("ath")
    if not isinstance(claimed_ath, str) or not hmac.compare_digest(claimed_ath, ath):
        raise _refuse("ath", "ath is not the hash of the access token")
    nonce = claims.get("nonce")
    if nonce is not None and not isinstance(nonce, str):
        raise _refuse("nonce", "nonce is not a string")
    return Proof(jkt=known.jkt, alg=known.alg, jti=jti, iat=iat, nonce=nonce)


def _proof_key(header: dict[str, Any], algorithms: Collection[str]) -> _ProofKey:
    """The checks of a proof's header (steps 3-5), and what its proofs are verified with."""
    typ = header.get("typ")
    if not isinstance(typ, str) or (typ.strip().lower().removeprefix("application/")) != (
        _TYP.removeprefix("application/")
    ):
        raise _refuse("typ", "typ is not dpop+jwt")
    if "crit" in header:
        raise _refuse("typ", "crit header (no extension is understood)")
    alg: str = header["alg"]
    if alg not in algorithms:
        raise _refuse("alg", "alg not allowed for DPoP proofs")
    key = _public_key(header.get("jwk"), alg)
    return _ProofKey(alg=alg, jkt=key.thumbprint(), verify=verifier(alg, key))


def check_binding(proof: Proof, jkt: str) -> None:
    """§7.1 item 3 / §6.1: the proof's key must be the one the token is bound to."""
    if not hmac.compare_digest(proof.jkt.encode("ascii"), jkt.encode("ascii", "replace")):
        raise _refuse("jkt", "proof key is not the token's cnf.jkt")
