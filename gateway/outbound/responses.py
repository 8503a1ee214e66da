"""An outbound response: read whole (:class:`Response`), or open and read chunk by chunk under
the request's deadline and the body cap (:class:`StreamingResponse`), from aiohttp's response or
the lean HTTP/1.1 client's alike.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Final

import aiohttp
from multidict import CIMultiDictProxy

from gateway.jsonkit.read import media_type
from gateway.outbound.failures import OutboundConnectionError, ResponseTooLarge
from gateway.outbound.http1_codec import Http1Error, Http1Response

__all__ = ["DEFAULT_MAX_BODY", "BodyReader", "Response", "StreamingResponse"]

DEFAULT_MAX_BODY: Final = 1_048_576
"""Default response cap in bytes; larger bodies raise ResponseTooLarge."""


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    headers: CIMultiDictProxy[str]
    body: bytes

    @property
    def content_type(self) -> str:
        return media_type(self.headers.get("Content-Type", ""))


class BodyReader:
    """An open response of either client, aiohttp's or the lean one: what
    :class:`StreamingResponse` reads from, and how the connection is let go."""

    __slots__ = ("_aiohttp", "_lean", "headers", "status")

    def __init__(
        self,
        *,
        aiohttp_response: aiohttp.ClientResponse | None = None,
        lean: Http1Response | None = None,
    ) -> None:
        self._aiohttp = aiohttp_response
        self._lean = lean
        opened = lean if lean is not None else aiohttp_response
        assert opened is not None
        self.status: int = opened.status
        self.headers: CIMultiDictProxy[str] = opened.headers

    @property
    def content_length(self) -> int | None:
        if self._lean is not None:
            return self._lean.content_length
        assert self._aiohttp is not None
        return self._aiohttp.content_length

    def finish(self, done: bool) -> None:
        """Let the connection go: back to the pool after a fully read body (``done``), closed
        otherwise (cancelled, cap exceeded, early exit), so that the upstream sees the abort.
        The lean client's ``release`` tells the two apart itself."""
        if self._lean is not None:
            self._lean.release()
            return
        assert self._aiohttp is not None
        if done:
            self._aiohttp.release()
        else:
            self._aiohttp.close()

    async def read(self) -> bytes:
        if self._lean is not None:
            return await self._lean.read()
        assert self._aiohttp is not None
        return await self._aiohttp.read()

    async def readany(self) -> bytes:
        if self._lean is not None:
            return await self._lean.readany()
        assert self._aiohttp is not None
        return await self._aiohttp.content.readany()


@dataclass(slots=True)
class StreamingResponse:
    """An open response whose body the caller reads chunk by chunk under the same deadline."""

    status: int
    headers: CIMultiDictProxy[str]
    _body: BodyReader
    _max_body: int
    _deadline: float
    _read: int = 0
    done: bool = False
    """True once the body was read to its end (the connection may then go back to the pool)."""

    @property
    def content_type(self) -> str:
        return media_type(self.headers.get("Content-Type", ""))

    async def read(self) -> bytes:
        """The whole body (capped). One read when the length is declared, else chunk by chunk."""
        length = self._body.content_length
        if length is not None and length <= self._max_body:
            try:
                data = await self._body.read()
            except (aiohttp.ClientError, Http1Error) as exc:
                raise OutboundConnectionError("connection failed while reading") from exc
            self._read = len(data)
            if self._read > self._max_body:
                raise ResponseTooLarge("response exceeds the size cap")
            self.done = True
            return data
        return b"".join([chunk async for chunk in self.chunks()])

    async def chunks(self) -> AsyncIterator[bytes]:
        """Yield body chunks; ResponseTooLarge past the cap, OutboundTimeout past the deadline."""
        # The deadline itself is enforced by the one deadline_at around the whole exchange
        # in Outbound.stream (a timer per chunk would cost a heap operation per read).
        while True:
            try:
                chunk = await self._body.readany()
            except (aiohttp.ClientError, Http1Error) as exc:
                raise OutboundConnectionError("connection failed while reading") from exc
            if not chunk:
                self.done = True
                return
            self._read += len(chunk)
            if self._read > self._max_body:
                raise ResponseTooLarge("response exceeds the size cap")
            yield chunk
