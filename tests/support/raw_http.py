"""Raw-socket HTTP/1.1 for the tests a client library would refuse to send (malformed request
lines, folded headers, slow or oversized heads)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from multidict import CIMultiDict

__all__ = ["RawResponse", "exchange", "parse_response", "request_bytes"]


@dataclass(frozen=True, slots=True)
class RawResponse:
    status: int
    headers: CIMultiDict[str]
    body: bytes
    version: str = ""
    """The status line's HTTP version (``HTTP/1.1``), when parsed from the bytes."""

    def json(self) -> Any:
        return json.loads(self.body)


def request_bytes(
    headers: Mapping[str, str],
    body: bytes = b"",
    *,
    method: str = "POST",
    path: str = "/mcp",
    close: bool = True,
) -> bytes:
    """A canonical request: ``Host``, the given headers, ``Content-Length`` when there is a body."""
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    if body:
        lines.append(f"Content-Length: {len(body)}")
    if close:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def parse_response(raw: bytes) -> RawResponse:
    head, _, body = raw.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers: CIMultiDict[str] = CIMultiDict()
    for line in header_lines:
        name, _, value = line.partition(":")
        headers.add(name.strip(), value.strip())
    length = headers.get("Content-Length")
    if length is not None:
        body = body[: int(length)]
    version, status, *_ = status_line.split(" ", 2)
    return RawResponse(int(status), headers, body, version)


async def exchange(port: int, data: bytes, *, timeout_s: float = 10.0) -> RawResponse:
    """Send ``data`` on a new connection and read until the server closes it."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(data)
        await writer.drain()
        async with asyncio.timeout(timeout_s):
            raw = await reader.read()
    finally:
        writer.close()
    assert raw, "the server closed the connection without an answer"
    return parse_response(raw)
