"""What the demo backends share so tests can assert a client's token never reaches them: every
request recorded as received (DEVELOPMENT ONLY)."""

from __future__ import annotations

from collections import deque
from dataclasses import KW_ONLY, dataclass, field
from typing import Final

from aiohttp import web

__all__ = ["MAX_RECORDED", "RecordedRequest", "RecordsRequests", "request_log"]

MAX_RECORDED: Final = 10_000


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One request as the backend received it (header names as sent)."""

    method: str
    path: str
    headers: tuple[tuple[str, str], ...]
    body: bytes

    def header(self, name: str) -> str | None:
        lowered = name.lower()
        return next((v for k, v in self.headers if k.lower() == lowered), None)


def request_log() -> deque[RecordedRequest]:
    """An empty record of received requests that keeps the last :data:`MAX_RECORDED`."""
    return deque(maxlen=MAX_RECORDED)


@dataclass
class RecordsRequests:
    """What the demo backends share so tests can assert a client's token never reaches them:
    :meth:`_record` keeps every request in :attr:`received`, and :meth:`saw` searches it."""

    _: KW_ONLY
    received: deque[RecordedRequest] = field(default_factory=request_log)
    """The last :data:`MAX_RECORDED` requests, oldest first."""

    def saw(self, needle: str) -> bool:
        """Whether ``needle`` appeared in any received header value or body."""
        raw = needle.encode()
        return any(
            needle in value or raw in recorded.body
            for recorded in self.received
            for _, value in (*recorded.headers, ("", ""))
        )

    async def _record(self, request: web.Request) -> bytes:
        """Read the body and record the request as received; the body."""
        body = await request.read()
        self.received.append(
            RecordedRequest(request.method, request.path, tuple(request.headers.items()), body)
        )
        return body
