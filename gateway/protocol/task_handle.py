"""The task handle: a backend's task id sealed to the caller that created the task.

The tasks extension (``io.modelcontextprotocol/tasks``, SEP-2663 §Security Considerations):
task ids MUST be unguessable and every task request MUST be authenticated and authorised. A
relayed backend id is neither (the backend's ids may be guessable, and the backend sees only the
gateway's credential), so the client never sees it. It gets a handle instead::

    handle = "t1." + envelope(canonical JSON of the claims)

an AEAD envelope of :mod:`gateway.sealing` under the ``input_requests.seal_keys`` ring with its own
label (``mcp-gateway/task-handle/v1``: a handle never opens as a ``requestState``, nor the
reverse), the gateway's ``resource`` bound as associated data. The claims::

    {"v":1, "be": backend, "up": upstream task id, "iss": issuer, "sub": subject,
     "cid": client id or null, "tool": exposed tool name, "iat": issued at, "exp": expiry}

Stateless: any replica with the keys opens any handle, and a key rotation keeps the handles of
the old key valid while it stays listed. The handle is minted once, at creation, and the
client's own text is echoed on every answer after (clients key on it). :func:`check_owner`
compares the claims with the caller of a task request; every failure, here or in opening, is
one :class:`HandleRefused` whose ``reason`` is for the audit trail only: the client gets the one
unknown-task answer whatever it is.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Final

from gateway.config import SealKey
from gateway.jsonkit.read import loads
from gateway.jsonkit.write import canonical
from gateway.sealing import (
    ClaimField,
    EnvelopeError,
    SealRing,
    claims_from_wire,
    claims_to_wire,
    envelope_chars,
)
from gateway.seams import HandleRefusal, Principal

__all__ = [
    "LABEL",
    "MAX_CLAIMS_BYTES",
    "MAX_HANDLE_CHARS",
    "MAX_UPSTREAM_ID_BYTES",
    "PREFIX",
    "HandleRefused",
    "TaskClaims",
    "TaskHandles",
    "check_owner",
    "handle_digest",
]

PREFIX: Final = "t1."
LABEL: Final = b"mcp-gateway/task-handle/v1"
VERSION: Final = 1
MAX_UPSTREAM_ID_BYTES: Final = 256
"""Longest backend task id (UTF-8 bytes) the gateway relays; a longer one is a garbled reply."""
MAX_CLAIMS_BYTES: Final = 2048
"""Largest claims object (canonical JSON) a handle carries."""
MAX_HANDLE_CHARS: Final = len(PREFIX) + envelope_chars(MAX_CLAIMS_BYTES)
"""Longest handle the gateway mints: a longer ``taskId`` is refused before anything is opened."""


class HandleRefused(Exception):
    """A handle the caller may not use; the client hears only "unknown task"."""

    def __init__(self, reason: HandleRefusal, detail: str = "") -> None:
        super().__init__(detail or reason)
        self.reason: HandleRefusal = reason


class HandleTooLarge(ValueError):
    """The claims do not fit :data:`MAX_CLAIMS_BYTES` (the task is not relayed)."""


@dataclass(frozen=True, slots=True)
class TaskClaims:
    """What one handle binds."""

    backend: str
    upstream_id: str
    issuer: str
    subject: str
    client_id: str | None
    tool: str
    """The exposed tool name: the policy is asked about it on every task request."""
    issued_at: int
    expires_at: int
    """At least the task's ``ttlMs`` after creation, at most ``tasks.max_ttl_s``."""


_FIELDS: Final = (
    ClaimField("backend", "be", str),
    ClaimField("upstream_id", "up", str),
    ClaimField("issuer", "iss", str),
    ClaimField("subject", "sub", str),
    ClaimField("client_id", "cid", str, optional=True),
    ClaimField("tool", "tool", str),
    ClaimField("issued_at", "iat", int),
    ClaimField("expires_at", "exp", int),
)


def handle_digest(handle: str) -> str:
    """32 hex digits of SHA-256(handle): links a task's audit events and keys its poll budget
    without writing the handle itself."""
    return hashlib.sha256(handle.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def check_owner(claims: TaskClaims, principal: Principal, now: float) -> None:
    """Raise :class:`HandleRefused` unless ``principal`` created the task and it has not
    expired: the same issuer, subject and client id (a handle is not a bearer token)."""
    if not now < claims.expires_at:
        raise HandleRefused("expired")
    if claims.issuer != principal.issuer:
        raise HandleRefused("issuer")
    if claims.subject != principal.subject:
        raise HandleRefused("subject")
    if claims.client_id != principal.client_id:
        raise HandleRefused("client")


class TaskHandles:
    """Mints and opens handles under the configured keys (one seals, all open)."""

    def __init__(self, keys: tuple[SealKey, ...], seal_key_id: str, *, resource: str) -> None:
        self._ring = SealRing(keys, seal_key_id, label=LABEL, resource=resource)

    def seal(self, claims: TaskClaims) -> str:
        """A fresh handle for ``claims``; raises :class:`HandleTooLarge` past the bound."""
        body = canonical({"v": VERSION, **claims_to_wire(claims, _FIELDS)})
        if len(body) > MAX_CLAIMS_BYTES:
            raise HandleTooLarge("task handle claims over MAX_CLAIMS_BYTES")
        return PREFIX + self._ring.seal(body)

    def open(self, handle: str) -> TaskClaims:
        """The claims of a handle this gateway (or a replica with the same keys) minted; raises
        :class:`HandleRefused` (``malformed`` or ``tampered``) for anything else."""
        if not handle.startswith(PREFIX) or len(handle) > MAX_HANDLE_CHARS:
            raise HandleRefused("malformed")
        try:
            plaintext = self._ring.open(handle[len(PREFIX) :], max_chars=MAX_HANDLE_CHARS)
        except EnvelopeError as refused:
            raise HandleRefused("tampered", str(refused)) from None
        return _parse(plaintext)


def _parse(plaintext: bytes) -> TaskClaims:
    # Only the gateway can produce an authentic plaintext; still, read it defensively.
    try:
        obj = loads(plaintext)
        claims = TaskClaims(**claims_from_wire(obj, _FIELDS))
        if obj["v"] != VERSION:
            raise ValueError("claims version")
    except (ValueError, KeyError, TypeError):
        raise HandleRefused("tampered", "malformed claims") from None
    return claims
