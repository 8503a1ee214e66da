"""HTTP admission: the rows answered before a JSON-RPC message is read (method, origin, media
types, size, time, framing, rate and capacity, the legacy session)."""

from __future__ import annotations

from gateway.errors._base import (
    BAD_REQUEST_CODE,
    NOT_IMPLEMENTED_CODE,
    RATE_LIMITED_CODE,
    UNSUPPORTED_MEDIA_TYPE_CODE,
    GatewayError,
)

__all__ = [
    "BodyTooLarge",
    "Draining",
    "HeadersTooLarge",
    "MalformedRequest",
    "MethodNotAllowed",
    "NotAcceptable",
    "OriginForbidden",
    "OverCapacity",
    "RateLimited",
    "RequestTimeout",
    "SessionNotFound",
    "SessionRequired",
    "StreamNotAcceptable",
    "TooManySubscriptions",
    "UnsupportedContentEncoding",
    "UnsupportedMediaType",
    "UnsupportedTransferCoding",
]


class MethodNotAllowed(GatewayError):
    row, status, message = "method_not_allowed", 405, ""


class OriginForbidden(GatewayError):
    row, status, message = "origin_forbidden", 403, ""


class NotAcceptable(GatewayError):
    row, status, message = "not_acceptable", 406, "Accept must allow application/json"


class UnsupportedMediaType(GatewayError):
    row, status, message = "unsupported_media_type", 415, "Content-Type must be application/json"
    body_code = UNSUPPORTED_MEDIA_TYPE_CODE


class UnsupportedContentEncoding(UnsupportedMediaType):
    """A request body with a content coding (``gzip``, ``deflate``, ...): never decompressed.

    RFC 9110 §15.5.16: 415 for an unacceptable content coding, with ``Accept-Encoding`` naming
    what is accepted (RFC 7694 §3). MCP clients do not compress requests; decoding them would
    only add a decompression-bomb surface in front of authentication.
    """

    row, message = "unsupported_content_encoding", "Request bodies must not be content-encoded"


class BodyTooLarge(GatewayError):
    row, status, message = "body_too_large", 413, "Request body too large"


class RequestTimeout(GatewayError):
    """The request body did not arrive before the end-to-end request deadline (RFC 9110 §15.5.9)."""

    row, status, message = "request_timeout", 408, "Request timed out"


class MalformedRequest(GatewayError):
    """The bytes are not a valid HTTP/1.1 request (bad request line, invalid header, obsolete line
    folding, bad chunk framing, conflicting framing headers). Answered by the listener before any
    handler runs; the connection is closed."""

    row, status, message = "malformed_request", 400, "Malformed HTTP request"
    body_code = BAD_REQUEST_CODE


class UnsupportedTransferCoding(GatewayError):
    """A request framed with a transfer coding other than a single ``chunked`` (``gzip,
    chunked``): RFC 9112 §6.1, a coding the server does not understand gets 501 (SHOULD). No
    coding but chunked is decoded, so the body could only be misread. Answered by the listener;
    the connection is closed."""

    row, status, message = (
        "unsupported_transfer_coding",
        501,
        "Transfer codings other than chunked are not supported",
    )
    body_code = NOT_IMPLEMENTED_CODE


class HeadersTooLarge(GatewayError):
    """The request head is over ``limits.max_header_bytes`` (or one line over 16 KiB): RFC 6585
    §5. The connection is closed."""

    row, status, message = "headers_too_large", 431, "Request headers too large"


class RateLimited(GatewayError):
    row, status, message = "rate_limited", 429, "Too many requests"
    body_code = RATE_LIMITED_CODE

    def body_message(self) -> str:
        if self.retry_after is None:
            return self.message
        return f"{self.message}, retry in {max(1, int(self.retry_after))} s"  # = Retry-After


class TooManySubscriptions(GatewayError):
    """``limits.max_subscriptions_per_principal`` streams or
    ``limits.max_subscribed_uris_per_principal`` URIs of this subject are already open on this
    replica. No ``Retry-After``: a slot frees when the client closes a stream, not after a time."""

    row, status, message = "too_many_subscriptions", 429, "Too many subscriptions"
    body_code = RATE_LIMITED_CODE


class SessionNotFound(GatewayError):
    """A legacy request names an ``Mcp-Session-Id`` this replica does not hold for this caller:
    never minted here, minted for another principal, malformed, or ended (2025-06-18
    basic/transports.mdx §Session Management 3: 404, the client starts a new session)."""

    row, status, message = "session_not_found", 404, "Session not found"
    legacy_status = 404
    body_code = -31404


class SessionRequired(GatewayError):
    """``resources/subscribe`` / ``resources/unsubscribe`` without ``Mcp-Session-Id``: a
    subscription lives in the session whose GET stream hears its updates (transports.mdx
    §Session Management 2: 400)."""

    row, status, message = "session_required", 400, "Mcp-Session-Id required"
    legacy_status = 400
    body_code = BAD_REQUEST_CODE


class StreamNotAcceptable(GatewayError):
    """A session's GET whose ``Accept`` does not list ``text/event-stream`` (transports.mdx
    §Listening for Messages from the Server 2)."""

    row, status, message = "stream_not_acceptable", 406, "Accept must allow text/event-stream"


class OverCapacity(GatewayError):
    row, status, message = "over_capacity", 503, "Server busy, retry later"


class Draining(GatewayError):
    """The replica is shutting down (SIGTERM) and this request cannot finish before the drain
    deadline: retry on another replica."""

    row, status, message = "draining", 503, "Server shutting down, retry later"
