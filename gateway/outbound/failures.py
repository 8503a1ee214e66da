"""What an outbound request can fail with: :class:`OutboundError` and its kinds.

Each derives, where it fits, from the matching stdlib type too, so a caller can catch either
(``except TimeoutError`` works). Messages are fixed and never carry a credential.
"""

from __future__ import annotations

__all__ = [
    "OutboundConnectionError",
    "OutboundError",
    "OutboundInvalidRequest",
    "OutboundRedirect",
    "OutboundTimeout",
    "ResponseTooLarge",
]


class OutboundError(Exception):
    """Root of outbound failures. Messages are fixed and never contain credentials."""


class OutboundTimeout(OutboundError, TimeoutError):
    pass


class OutboundConnectionError(OutboundError, ConnectionError):
    pass


class OutboundRedirect(OutboundError):
    """The peer answered 3xx; redirects are never followed (SSRF and credential leaks)."""


class ResponseTooLarge(OutboundError):
    pass


class OutboundInvalidRequest(OutboundError):
    """The request could not be built (an invalid URL, credentials both in the URL and in a
    header, an unencodable header). Callers map it like any other outbound failure (503 /
    tool error), never to a 500: a discovered or configured URL is input like any other."""
