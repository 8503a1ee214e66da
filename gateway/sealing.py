"""The AEAD envelope every gateway-sealed text uses, under the ``input_requests.seal_keys`` ring.

One construction, several purposes (each its own ``label``): the ``requestState`` of an input
round (:mod:`gateway.protocol.sealed_state`), the task handle
(:mod:`gateway.protocol.task_handle`), the browser login surface's session and sign-in
cookies (:mod:`gateway.login.cookies`), and, under a key ring of their own (``user_oauth``), the
stored per-user upstream tokens (:mod:`gateway.state.upstream_tokens`, bound to their owner and
key by the ``context`` of :meth:`SealRing.seal`). A foundation module, so every layer that
seals reaches the one construction::

    envelope = version (1 byte, 0x01) | key-id length (1 byte) | key id (ASCII, 1-16)
               | nonce (12 random bytes) | AES-256-GCM ciphertext and tag
    text     = base64url(envelope), no padding (one canonical spelling is accepted)

Associated data (authenticated, not sent): the label, the gateway's ``resource`` URI (a
deployment sharing keys with another cannot replay its texts) and the envelope header (version
and key id, so neither can be swapped). Each key is derived from the configured secret with
HKDF-SHA256 (info: the label and the key id), so one secret never keys two purposes: a text
sealed for one label never opens under another. The key id is in the clear because it picks the
key (rotation: every configured key opens, one seals).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from gateway import b64url
from gateway.config import SealKey

__all__ = [
    "ENVELOPE_OVERHEAD",
    "VERSION",
    "ClaimField",
    "EnvelopeError",
    "SealRing",
    "claims_from_wire",
    "claims_to_wire",
    "envelope_chars",
    "opened_claim",
]

VERSION: Final = 1
NONCE_BYTES: Final = 12
TAG_BYTES: Final = 16
MAX_KEY_ID: Final = 16
ENVELOPE_OVERHEAD: Final = 2 + MAX_KEY_ID + NONCE_BYTES + TAG_BYTES
"""Bytes an envelope adds to its plaintext, at most (the longest key id)."""
_TEXT: Final = re.compile(r"[A-Za-z0-9_-]+")


def envelope_chars(plaintext_bytes: int) -> int:
    """The longest envelope text for a plaintext of up to ``plaintext_bytes``."""
    raw = ENVELOPE_OVERHEAD + plaintext_bytes
    return (raw * 4 + 2) // 3  # base64url without padding


_T = TypeVar("_T")


def opened_claim(value: Any, kind: type[_T]) -> _T:
    """``value`` of an opened envelope's claims when it is a ``kind`` (a bool is no int);
    raises ``TypeError``. Only the gateway makes an authentic plaintext; it is still read
    defensively."""
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise TypeError("claim type")
    return value


@dataclass(frozen=True, slots=True)
class ClaimField:
    """One claim of a sealed value: its attribute, its name on the wire, its type (``None``
    allowed where ``optional``)."""

    attribute: str
    wire: str
    kind: type
    optional: bool = False


def claims_to_wire(claims: object, fields: Sequence[ClaimField]) -> dict[str, Any]:
    """The wire members of ``claims`` (a dataclass) for ``fields``."""
    return {field.wire: getattr(claims, field.attribute) for field in fields}


def claims_from_wire(obj: Mapping[str, Any], fields: Sequence[ClaimField]) -> dict[str, Any]:
    """Attribute -> value of ``fields`` read back from an opened envelope's object, each
    checked (:func:`opened_claim`); raises ``KeyError`` or ``TypeError``."""
    return {
        field.attribute: None
        if field.optional and obj[field.wire] is None
        else opened_claim(obj[field.wire], field.kind)
        for field in fields
    }


class EnvelopeError(ValueError):
    """A text that is not an envelope this ring sealed; the message says why (logs only)."""


class SealRing:
    """Seals and opens envelopes under the configured keys (one seals, all open)."""

    def __init__(
        self, keys: Sequence[SealKey], seal_key_id: str, *, label: bytes, resource: str
    ) -> None:
        ring: dict[bytes, AESGCM] = {}
        for key in keys:
            kid = key.id.encode("ascii")
            if not 0 < len(kid) <= MAX_KEY_ID:
                raise ValueError("seal key ids are 1-16 ASCII characters")
            info = label + b"|" + kid
            derived = HKDF(algorithm=SHA256(), length=32, salt=None, info=info).derive(key.key)
            ring[kid] = AESGCM(derived)
        sealing = seal_key_id.encode("ascii")
        if sealing not in ring:
            raise ValueError("seal_key_id names no configured key")
        self._ring = ring
        self._sealing = sealing
        self._context = label + b"\x00" + resource.encode("utf-8") + b"\x00"

    @property
    def seal_key_id(self) -> str:
        return self._sealing.decode("ascii")

    def seal(self, plaintext: bytes, *, context: bytes = b"") -> str:
        """The envelope text of ``plaintext`` (a fresh nonce every time). ``context``: more
        associated data (authenticated, not sent) that :meth:`open` must be given again: what
        the text is bound to (a stored record's owner and key), so it opens nowhere else."""
        header = bytes((VERSION, len(self._sealing))) + self._sealing
        nonce = os.urandom(NONCE_BYTES)
        aad = self._context + header + context
        sealed = self._ring[self._sealing].encrypt(nonce, plaintext, aad)
        return b64url.encode(header + nonce + sealed)

    def open(self, text: str, *, max_chars: int, context: bytes = b"") -> bytes:
        """The plaintext of an envelope this ring (or a replica with the same keys) sealed
        with this ``context``; raises :class:`EnvelopeError` for anything else: longer than
        ``max_chars``, not canonical base64url, unknown version or key id, or failed
        authentication (another context included)."""
        if len(text) > max_chars or not _TEXT.fullmatch(text):
            raise EnvelopeError("not a sealed state")
        raw = b64url.decode_canonical(text)  # a flipped padding bit is another text
        if raw is None or len(raw) < 2:
            raise EnvelopeError("not canonical base64url")
        if raw[0] != VERSION:
            raise EnvelopeError("unknown envelope version")
        kid_end = 2 + raw[1]
        aead = self._ring.get(raw[2:kid_end]) if raw[1] else None
        if aead is None:
            raise EnvelopeError("unknown seal key id")
        nonce, sealed = raw[kid_end : kid_end + NONCE_BYTES], raw[kid_end + NONCE_BYTES :]
        if len(nonce) != NONCE_BYTES or len(sealed) < TAG_BYTES:
            raise EnvelopeError("truncated envelope")
        try:
            return aead.decrypt(nonce, sealed, self._context + raw[:kid_end] + context)
        except InvalidTag:
            raise EnvelopeError("authentication failed") from None
