"""Unpadded base64url (RFC 4648 §5, RFC 7515 §2): one encoder and one strict decoder.

Strict means canonical: only the URL-safe alphabet, no padding, no length of 4n+1, and the
unused low bits of the last character zero. Python's decoder accepts all of those variants
(and drops characters outside the alphabet), so one value would have many spellings; anything
keyed by the text (caches, revocations, sealed states, cursors) or compared after decoding must
see exactly one. (``gateway.state.revocation_key`` reads tokens the lenient way on purpose: it
must match whatever a lenient issuer accepts.)
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Final

__all__ = ["decode", "decode_canonical", "encode", "encode_bytes"]

_ALPHABET: Final = re.compile(r"[A-Za-z0-9_-]*")
_STANDARD: Final = bytes.maketrans(b"-_", b"+/")
_PADDING: Final = (b"", b"", b"==", b"=")
_ZERO_LOW_4: Final = frozenset("AQgw")
"""The characters whose value (0-63) is a multiple of 16."""
_ZERO_LOW_2: Final = frozenset("AEIMQUYcgkosw048")
"""The characters whose value is a multiple of 4."""


def encode(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def encode_bytes(raw: bytes) -> bytes:
    """:func:`encode` as ASCII bytes (a JWS signing input is bytes)."""
    return base64.urlsafe_b64encode(raw).rstrip(b"=")


def decode(text: str) -> tuple[bytes, bool] | None:
    """``(bytes, canonical)``, or None when ``text`` is not unpadded base64url at all."""
    rest = len(text) % 4
    if rest == 1 or _ALPHABET.fullmatch(text) is None:
        return None
    # Only the last character can carry unused bits (4 of them after 2 characters of a
    # quantum, 2 after 3): canonical when they are zero, as a re-encoding would write them.
    canonical = rest == 0 or text[-1] in (_ZERO_LOW_4 if rest == 2 else _ZERO_LOW_2)
    raw = binascii.a2b_base64(text.encode("ascii").translate(_STANDARD) + _PADDING[rest])
    return raw, canonical


def decode_canonical(text: str) -> bytes | None:
    """The bytes of canonical unpadded base64url ``text``, else None."""
    decoded = decode(text)
    return decoded[0] if decoded is not None and decoded[1] else None
