"""Per-user upstream tokens of ``user_oauth`` backends: one sealed record per person and backend.

A person connects an account at a ``user_oauth`` backend's authorization server once (the
connect pages, ``gateway/connections``); the gateway keeps the tokens it was given here and
sends the access token with that person's calls to that backend only
(``gateway/backend/credentials/user_credential.py``). docs/user-authorization.md#the-token-store.

* **Key**: the digest of the MCP caller's verified issuer and subject
  (:func:`~gateway.state.browser_records.owner_digest`) and the backend's configured name: never a
  display name or an e-mail, so two people can never share a record.
* **Value**: an :class:`UpstreamRecord` as canonical JSON, sealed (AES-256-GCM,
  :mod:`gateway.sealing`) under ``user_oauth.seal_keys`` with the label
  ``mcp-gateway/upstream-token/v1`` and the owner digest and backend as associated data, so a
  record copied under another key does not open. The store holds the envelope only; no replica
  writes a token anywhere else (no log, no metric, no audit event).
* **Generation**: each write gets a fresh random generation; :meth:`UpstreamTokenStore.put` with
  ``expect`` writes only over that generation (compare and set), so a rotated refresh token is
  written atomically with its access token and a slow writer never puts an older grant back over
  a newer one (a reconnect, another replica's refresh).
* **Lease**: one refresh of a record at a time, across replicas (:meth:`UpstreamTokenStore.lease`).
* **Idle expiry**: a record lives ``user_oauth.max_idle_days`` after it was last used (each use
  extends it, at most once an hour per replica).
* **Changes** (a write, a delete) are told to every replica (:meth:`UpstreamTokenStore.on_change`),
  which drops what it cached of the record.

:class:`MemoryUpstreamTokens` is one replica's (``state.backend: memory``); the Redis one is in
:mod:`gateway.state.upstream_tokens_redis`.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Protocol

from gateway.bounded import BoundedMap
from gateway.config import SealKey
from gateway.jsonkit.read import JsonError, loads_object
from gateway.jsonkit.write import canonical
from gateway.sealing import EnvelopeError, SealRing, envelope_chars

__all__ = [
    "LABEL",
    "MAX_RECORD_BYTES",
    "ConnectionState",
    "MemoryUpstreamTokens",
    "RecordSeal",
    "Stored",
    "UpstreamRecord",
    "UpstreamTokenStore",
    "record_context",
]

LABEL: Final = b"mcp-gateway/upstream-token/v1"
MAX_RECORD_BYTES: Final = 65_536
"""Largest record plaintext (an Entra access token alone can be several kilobytes)."""
MAX_RECORDS: Final = 100_000
"""Records one replica keeps in memory (``state.backend: memory``); past it the oldest go."""
VERSION: Final = 1

Status = Literal["connected", "reconnect_required"]
ConnectionState = Literal["connected", "missing", "expired", "reconnect_required"]
"""What the account page and ``upstream-tokens list`` show for a person and a backend."""


@dataclass(frozen=True, slots=True)
class UpstreamRecord:
    """What the gateway keeps of one person's connection to one backend's upstream."""

    issuer: str
    """The MCP caller's issuer (``Principal.issuer``)."""
    subject: str
    """The MCP caller's subject (``Principal.subject``)."""
    backend: str
    server: str
    """The upstream authorization server's issuer identifier: the grant is used there only."""
    client_id: str
    """The gateway's client at that server (its credentials are that server's only)."""
    access_token: str | None = field(repr=False)
    """None once the upstream refused it for good (``reconnect_required``)."""
    refresh_token: str | None = field(repr=False)
    expires_at: float
    """Unix time the access token expires (as the server's ``expires_in`` said)."""
    scope: str
    """What was granted (space-separated; what was asked for when the answer did not say)."""
    connected_at: int
    refreshed_at: int = 0
    status: Status = "connected"
    wanted: str = ""
    """Scopes a consent must ask for beyond ``scope`` (an upstream ``insufficient_scope``)."""

    def state(self, now: float) -> ConnectionState:
        """``connected`` while the access token is valid or can be refreshed; ``expired`` when
        it lapsed without a refresh token; ``reconnect_required`` when the upstream refused
        the grant or needs more scopes."""
        if self.status == "reconnect_required" or self.access_token is None:
            return "reconnect_required"
        if self.expires_at <= now and not self.refresh_token:
            return "expired"
        return "connected"

    def to_json(self) -> bytes:
        return canonical(
            {
                "v": VERSION,
                "iss": self.issuer,
                "sub": self.subject,
                "be": self.backend,
                "as": self.server,
                "cid": self.client_id,
                "at": self.access_token,
                "rt": self.refresh_token,
                "exp": self.expires_at,
                "scope": self.scope,
                "cat": self.connected_at,
                "rat": self.refreshed_at,
                "st": self.status,
                "want": self.wanted,
            }
        )

    @classmethod
    def from_json(cls, body: bytes) -> UpstreamRecord:
        """Raises ``ValueError`` for anything but a record this module wrote."""
        try:
            obj = loads_object(body)
            if obj.get("v") != VERSION or obj.get("st") not in ("connected", "reconnect_required"):
                raise ValueError("record version or status")
            return cls(
                issuer=_text(obj["iss"]),
                subject=_text(obj["sub"]),
                backend=_text(obj["be"]),
                server=_text(obj["as"]),
                client_id=_text(obj["cid"]),
                access_token=_optional(obj["at"]),
                refresh_token=_optional(obj["rt"]),
                expires_at=float(_number(obj["exp"])),
                scope=_text(obj["scope"], empty=True),
                connected_at=int(_number(obj["cat"])),
                refreshed_at=int(_number(obj["rat"])),
                status=obj["st"],
                wanted=_text(obj["want"], empty=True),
            )
        except (JsonError, KeyError, TypeError) as exc:
            raise ValueError("not a stored upstream record") from exc


def _text(value: Any, *, empty: bool = False) -> str:
    if not isinstance(value, str) or (not value and not empty):
        raise TypeError("not a string")
    return value


def _optional(value: Any) -> str | None:
    return None if value is None else _text(value)


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError("not a number")
    return value


def record_context(owner: bytes, backend: str) -> bytes:
    """The associated data a record is sealed with: its owner digest and backend (its key)."""
    return owner + b"\x00" + backend.encode("utf-8")


class RecordSeal:
    """Seals and opens records under ``user_oauth.seal_keys`` (one seals, all open)."""

    def __init__(self, keys: Sequence[SealKey], seal_key_id: str, *, resource: str) -> None:
        self._ring = SealRing(keys, seal_key_id, label=LABEL, resource=resource)
        self._max_chars = envelope_chars(MAX_RECORD_BYTES)

    @property
    def seal_key_id(self) -> str:
        return self._ring.seal_key_id

    def seal(self, owner: bytes, record: UpstreamRecord) -> str:
        body = record.to_json()
        if len(body) > MAX_RECORD_BYTES:
            raise ValueError("upstream record too large")
        return self._ring.seal(body, context=record_context(owner, record.backend))

    def open(self, owner: bytes, backend: str, text: str) -> UpstreamRecord | None:
        """The record, or None when the text does not open here (another key or place, a key
        no longer configured, tampering) or holds another person's or backend's record."""
        try:
            body = self._ring.open(
                text, max_chars=self._max_chars, context=record_context(owner, backend)
            )
            record = UpstreamRecord.from_json(body)
        except (EnvelopeError, ValueError):
            return None
        return record if record.backend == backend else None


@dataclass(frozen=True, slots=True)
class Stored:
    """A record as read, with the generation a compare-and-set write names."""

    record: UpstreamRecord
    generation: str


Listener = Callable[[bytes, str], None]
"""Told ``(owner, backend)`` of every write or delete, on every replica."""


class UpstreamTokenStore(Protocol):
    async def get(self, owner: bytes, backend: str) -> Stored | None:
        """The record, or None (none, idle-expired, or not openable under the ring)."""
        ...

    async def put(self, owner: bytes, record: UpstreamRecord, *, expect: str | None) -> str | None:
        """Write ``record`` (its ``backend``); with ``expect``, only over that generation.
        The new generation, or None when another write came first. Extends its idle
        lifetime."""
        ...

    async def delete(self, owner: bytes, backend: str) -> bool:
        """Remove the record; whether there was one."""
        ...

    async def touch(self, owner: bytes, backend: str) -> None:
        """The record was used: its idle lifetime starts again."""
        ...

    async def lease(self, owner: bytes, backend: str, ttl_s: float) -> str | None:
        """The right to refresh this record for ``ttl_s`` (a token for :meth:`release`), or None
        while another holder has it (on any replica)."""
        ...

    async def release(self, owner: bytes, backend: str, lease: str) -> None: ...

    async def owners(self, backend: str) -> list[bytes]:
        """The owner digests with a record at ``backend`` (used within the idle lifetime)."""
        ...

    def on_change(self, listener: Listener) -> None: ...

    async def run(self) -> None:
        """Deliver other replicas' changes until cancelled (nothing to do for one replica)."""
        ...


class MemoryUpstreamTokens:
    """One replica's records (``state.backend: memory``), sealed like Redis's."""

    def __init__(
        self,
        seal: RecordSeal,
        *,
        max_idle_s: float,
        max_entries: int = MAX_RECORDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._seal = seal
        self._idle_s = max_idle_s
        self._records: BoundedMap[tuple[bytes, str], tuple[str, str]] = BoundedMap(max_entries)
        self._leases: BoundedMap[tuple[bytes, str], str] = BoundedMap(max_entries)
        self._clock = clock
        self._listeners: list[Listener] = []

    async def get(self, owner: bytes, backend: str) -> Stored | None:
        found = self._records.peek((owner, backend), self._clock())
        if found is None:
            return None
        record = self._seal.open(owner, backend, found[0])
        return None if record is None else Stored(record, found[1])

    async def put(self, owner: bytes, record: UpstreamRecord, *, expect: str | None) -> str | None:
        key, now = (owner, record.backend), self._clock()
        if expect is not None:
            current = self._records.peek(key, now)
            if current is None or current[1] != expect:
                return None
        sealed, generation = self._seal.seal(owner, record), new_generation()
        self._records.put(key, (sealed, generation), now + self._idle_s)
        self._records.trim(now)
        self._changed(owner, record.backend)
        return generation

    async def delete(self, owner: bytes, backend: str) -> bool:
        existed = self._records.pop((owner, backend)) is not None
        self._changed(owner, backend)
        return existed

    async def touch(self, owner: bytes, backend: str) -> None:
        key, now = (owner, backend), self._clock()
        found = self._records.peek(key, now)
        if found is not None:
            self._records.put(key, found, now + self._idle_s)

    async def lease(self, owner: bytes, backend: str, ttl_s: float) -> str | None:
        key, now = (owner, backend), self._clock()
        if self._leases.peek(key, now) is not None:
            return None
        token = new_generation()
        self._leases.put(key, token, now + ttl_s)
        self._leases.trim(now)
        return token

    async def release(self, owner: bytes, backend: str, lease: str) -> None:
        key = (owner, backend)
        if self._leases.peek(key, self._clock()) == lease:
            self._leases.pop(key)

    async def owners(self, backend: str) -> list[bytes]:
        now = self._clock()
        self._records.expire(now)
        return [owner for (owner, name) in self._records if name == backend]

    def on_change(self, listener: Listener) -> None:
        self._listeners.append(listener)

    async def run(self) -> None:
        return

    def _changed(self, owner: bytes, backend: str) -> None:
        for listener in self._listeners:
            listener(owner, backend)


def new_generation() -> str:
    """A fresh random generation (or lease) token: a record deleted and written again never
    gets a generation an old writer still holds."""
    return secrets.token_hex(12)
