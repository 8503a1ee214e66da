"""Server-provided DPoP nonces (RFC 9449 §8, §9): rotated, valid on every replica, never stored.

A nonce is ``base64url(period || HMAC-SHA256(key, label || period)[:16])`` where ``period`` is
the current rotation period (``floor(now / nonce_rotation_s)``, 8 bytes big-endian) and the key
is derived with HKDF-SHA256 from the configured ``input_requests.seal_keys`` (the secret the
replicas already share; ``info`` names this use and the resource, so the sealing keys themselves
are never used for anything else). Any replica can therefore check any replica's nonce without
state: a nonce is accepted in the period it was issued in and the next one, under any configured
key (so rotating ``seal_keys`` costs a client at most one ``use_dpop_nonce`` answer); new nonces
use the sealing key.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Callable, Sequence
from typing import Final

from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from gateway import b64url

__all__ = ["NonceKeys"]

LABEL: Final = b"mcp-gateway/dpop-nonce/v1"
_MAC_BYTES: Final = 16
_NONCE_CHARS: Final = 32
"""base64url of 8 + 16 bytes."""


class NonceKeys:
    def __init__(
        self,
        secrets: Sequence[bytes],
        resource: str,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``secrets``: the sealing key first, then the other configured keys."""
        if not secrets:
            raise ValueError("DPoP nonces need at least one key")
        info = LABEL + b"|" + resource.encode("utf-8")
        self._keys = tuple(
            HKDF(algorithm=SHA256(), length=32, salt=None, info=info).derive(s) for s in secrets
        )
        self._clock = clock

    def _mac(self, key: bytes, period: bytes) -> bytes:
        return hmac.new(key, LABEL + period, hashlib.sha256).digest()[:_MAC_BYTES]

    def current(self, rotation_s: int) -> str:
        """A nonce of the current period (what ``DPoP-Nonce`` carries)."""
        period = int(self._clock() // rotation_s).to_bytes(8, "big")
        raw = period + self._mac(self._keys[0], period)
        return b64url.encode(raw)

    def valid(self, nonce: str, rotation_s: int) -> bool:
        """Whether ``nonce`` was issued here (any key) in this period or the previous one."""
        if len(nonce) != _NONCE_CHARS:
            return False
        raw = b64url.decode_canonical(nonce)
        if raw is None or len(raw) != 8 + _MAC_BYTES:
            return False
        period, mac = raw[:8], raw[8:]
        now = int(self._clock() // rotation_s)
        if int.from_bytes(period, "big") not in (now, now - 1):
            return False
        return any(hmac.compare_digest(mac, self._mac(key, period)) for key in self._keys)
