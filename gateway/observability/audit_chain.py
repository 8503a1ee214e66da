"""The audit trail's hash chain: what links one event to the one before it (docs/operations.md,
"Verifying the audit trail").

Every event a sink writes ends with three members appended to the JSON object its ``to_json``
rendered: ``chain`` (this process's chain id: the replica id, ``hostname:pid``, and the start
time), ``seq`` (1, 2, ... within the chain) and ``prev`` (the SHA-256, hex, of the previous
event's **canonical bytes**; :data:`GENESIS` for ``seq`` 1). The canonical bytes of an event are
the UTF-8 bytes of its line as written, without the newline: :func:`digest` is the one definition,
used by the writer (:class:`Chain`) and by ``mcp-gateway audit verify``
(:mod:`gateway.observability.audit_verify`). Deleting, reordering, inserting or editing an event
therefore breaks a link. Cost per event: one string concatenation and one SHA-256 over bytes
already rendered.

Anyone who can write the file can also recompute every hash after an edit: the chain proves the
file is what *some* writer wrote in order, not who wrote it. Signed checkpoints (a key only the
gateway holds) close that gap: with ``audit.checkpoint`` the sink writes an ``audit_checkpoint``
event every ``every`` events and a ``final`` one when it closes. A checkpoint is a chain event like
any other, whose line ends with one more member, ``sig``: the Ed25519 signature (base64url) of
the line's bytes without it (:func:`signed_bytes`), so it covers ``prev``, hence every event
before it. Its ``kid`` is the RFC 7638 thumbprint of the public key (:func:`public_jwk`).
"""

from __future__ import annotations

import hashlib
import os
import socket
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Final

import orjson
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from joserfc.jwk import OKPKey

from gateway import b64url
from gateway.config.signing_keys import public_jwk as signing_public_jwk

__all__ = [
    "CHECKPOINT_EVENT",
    "GENESIS",
    "Chain",
    "Signer",
    "chain_id",
    "digest",
    "public_jwk",
    "replica_id",
    "signed_bytes",
]

CHECKPOINT_EVENT: Final = "audit_checkpoint"
_SIG: Final = b',"sig":"'


GENESIS: Final = "0" * 64
"""``prev`` of a chain's first event (``seq`` 1)."""


def digest(line: bytes) -> str:
    """The SHA-256 (hex) of an event's canonical bytes: its line as written, without ``\\n``."""
    return hashlib.sha256(line).hexdigest()


def replica_id() -> str:
    """``hostname:pid``: the pod (or host) and the process (the workers of ``serve --workers N``
    share a hostname)."""
    return f"{socket.gethostname()}:{os.getpid()}"


def chain_id(replica: str, started: float) -> str:
    """``replica@start`` with the start time in RFC 3339 UTC, microseconds: a restarted process
    (same host, perhaps the same pid) starts a new chain."""
    stamp = datetime.fromtimestamp(started, UTC).isoformat(timespec="microseconds")[:-6] + "Z"
    return f"{replica}@{stamp}"


class Chain:
    """One process's chain. :meth:`link` is called with the sink's write lock held (the order
    of links is the order of lines)."""

    __slots__ = ("_prev", "_seq", "_suffix", "id", "lock")

    def __init__(self, replica: str | None = None, started: float | None = None) -> None:
        self.id = chain_id(replica or replica_id(), time.time() if started is None else started)
        self._suffix = ',"chain":' + orjson.dumps(self.id).decode() + ',"seq":'
        self._seq = 0
        self._prev = GENESIS
        self.lock = threading.Lock()
        """Held by the sink around :meth:`link` and the write, so lines leave in link order."""

    @property
    def seq(self) -> int:
        """The ``seq`` of the last event linked (0: none yet)."""
        return self._seq

    @property
    def head(self) -> str:
        """The digest of the last event linked (:data:`GENESIS` before the first)."""
        return self._prev

    def link(self, rendered: str, sign: Callable[[bytes], str] | None = None) -> str:
        """``rendered`` (one compact JSON object, as ``to_json`` returns it) with ``chain``,
        ``seq`` and ``prev`` appended (and ``sig``, ``sign`` of those bytes, when given); the
        chain advances to it."""
        seq = self._seq + 1
        line = f'{rendered[:-1]}{self._suffix}{seq},"prev":"{self._prev}"}}'
        try:
            data = line.encode()
        except UnicodeEncodeError:
            # A lone surrogate (lines.json_line escapes them; a rendered string from elsewhere
            # may not): written as the JSON escape it stands for, so the bytes written are the
            # bytes hashed.
            line = line.encode("utf-8", "backslashreplace").decode()
            data = line.encode()
        if sign is not None:
            line = f'{line[:-1]},"sig":"{sign(data)}"}}'
            data = line.encode()
        self._seq = seq
        self._prev = digest(data)
        return line


def signed_bytes(line: bytes) -> tuple[bytes, bytes] | None:
    """(the bytes a checkpoint's ``sig`` signs, the signature) of a checkpoint line as written,
    or None when the line does not end with a ``sig`` member."""
    at = line.rfind(_SIG)
    if at < 0 or not line.endswith(b'"}'):
        return None
    encoded = line[at + len(_SIG) : -2]
    try:
        signature = b64url.decode_canonical(encoded.decode("ascii"))
    except UnicodeDecodeError:
        return None
    if signature is None:
        return None
    return line[:at] + b"}", signature


def public_jwk(key: Ed25519PublicKey) -> dict[str, Any]:
    """The public key as a JWK (RFC 8037) with its RFC 7638 thumbprint as ``kid``: the same
    function (joserfc's thumbprint) that publishes the assertion keys."""
    return signing_public_jwk(OKPKey.import_key(key), "EdDSA")


class Signer:
    """The checkpoint key: signs a checkpoint's bytes; ``jwk`` is what the ops listener's
    ``/.well-known/jwks.json`` publishes."""

    __slots__ = ("_key", "every", "jwk", "kid")

    def __init__(self, key: Ed25519PrivateKey, every: int) -> None:
        self._key = key
        self.every = every
        self.jwk = public_jwk(key.public_key())
        self.kid: str = self.jwk["kid"]

    def sign(self, data: bytes) -> str:
        return b64url.encode(self._key.sign(data))
