"""What an outbound request can fail with: :class:`OutboundError` and its kinds.

Each derives, where it fits, from the matching stdlib type too, so a caller can catch either
(``except TimeoutError`` works), and names its :data:`OutboundFailure` kind, so a caller maps
failures to its own vocabulary with one ``except OutboundError`` and a table. Messages are fixed
and never carry a credential.
"""

from __future__ import annotations

from typing import ClassVar, Literal

__all__ = [
    "OutboundConnectionError",
    "OutboundError",
    "OutboundFailure",
    "OutboundInvalidRequest",
    "OutboundRedirect",
    "OutboundTimeout",
    "ResponseTooLarge",
]


OutboundFailure = Literal["failed", "timeout", "connection", "redirect", "too_large", "invalid"]


class OutboundError(Exception):
    """Root of outbound failures. Messages are fixed and never contain credentials."""

    kind: ClassVar[OutboundFailure] = "failed"


class OutboundTimeout(OutboundError, TimeoutError):
    kind = "timeout"


class OutboundConnectionError(OutboundError, ConnectionError):
    kind = "connection"


class OutboundRedirect(OutboundError):
    """The peer answered 3xx; redirects are never followed (SSRF and credential leaks)."""

    kind = "redirect"


class ResponseTooLarge(OutboundError):
    kind = "too_large"


class OutboundInvalidRequest(OutboundError):
    """The request could not be built (an invalid URL, credentials both in the URL and in a
    header, an unencodable header). Callers map it like any other outbound failure (503 /
    tool error), never to a 500: a discovered or configured URL is input like any other."""

    kind = "invalid"
