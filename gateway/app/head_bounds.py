"""A request head's size: counted while it arrives, measured once parsed, and its framing.

:class:`HeadCount` counts the bytes of a head that is not complete yet, before aiohttp's parser
sees them (``limits.max_header_bytes``, :mod:`gateway.app.listener`); :func:`head_size` measures
a head the parser completed; :func:`only_chunked` tells a transfer coding the gateway decodes
from one it would misread.
"""

from __future__ import annotations

from typing import Any, Final

__all__ = ["HeadCount", "head_size", "only_chunked"]

_TERMINATOR: Final = b"\r\n\r\n"
"""The end of a request head (aiohttp's llhttp parser refuses bare-LF line endings)."""


class HeadCount:
    """The bytes received of the head not complete yet (:attr:`counted`)."""

    __slots__ = ("_carry", "counted")

    def __init__(self) -> None:
        self.counted = 0
        self._carry = b""
        """The last three bytes counted, so a terminator split across two reads is found."""

    def fits(self, data: bytes, cap: int) -> bool:
        """Count ``data`` towards the incomplete head; False once it cannot fit ``cap``.

        When the head ends in this chunk only the bytes up to its end count (the rest is body or
        a pipelined request, measured after parsing).
        """
        carry = self._carry
        if carry:
            spanning = (carry + data[:3]).find(_TERMINATOR)
            if spanning >= 0:
                return self.counted + spanning + len(_TERMINATOR) - len(carry) <= cap
        end = data.find(_TERMINATOR)
        if end >= 0:
            return self.counted + end + len(_TERMINATOR) <= cap
        self.counted += len(data)
        self._carry = (carry + data)[-3:]
        return self.counted <= cap

    def restart(self, data: bytes, *, awaiting: bool) -> None:
        """Heads completed in ``data``: start over. When another head is awaited, the bytes
        after the last terminator belong to it (or to the end of a body, counted
        conservatively)."""
        self._carry = b""
        self.counted = 0
        if awaiting:
            end = data.rfind(_TERMINATOR)
            self.counted = len(data) - end - len(_TERMINATOR) if end >= 0 else 0


def head_size(method: str, path: str, raw_headers: Any) -> int:
    """A parsed head's size in its canonical form: ``METHOD path HTTP/1.1`` CRLF, one
    ``Name: value`` CRLF per header, CRLF. Equal to the bytes received for a canonically
    written head (what the pre-parse count sees), a little over it otherwise."""
    return (
        len(method)
        + len(path)
        + 13
        + sum(len(name) + len(value) + 4 for name, value in raw_headers)
    )


def only_chunked(headers: Any) -> bool:
    """``Transfer-Encoding`` is exactly one ``chunked`` (case-insensitive, RFC 9112 §7).

    aiohttp's parser refuses a request whose final coding is not chunked (400, RFC 9112 §6.3)
    and a repeated ``chunked``, but accepts others before it (``gzip, chunked``) and decodes
    only the chunking: RFC 9112 §6.1 answers a coding the server does not understand 501.
    """
    values = headers.getall("Transfer-Encoding", ())
    return len(values) == 1 and values[0].strip().lower() == "chunked"
