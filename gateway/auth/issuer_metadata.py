"""RFC 8414 §3 authorization server metadata discovery, with OIDC Discovery 1.0 §4 fallback.

For an issuer ``https://id.example.com/tenant`` the documents are tried in the order the MCP
specification gives clients (2025-11-25 §Authorization Server Metadata Discovery):

1. ``https://id.example.com/.well-known/oauth-authorization-server/tenant`` (RFC 8414 §3.1,
   path inserted after the host, a terminating ``/`` removed first);
2. ``https://id.example.com/.well-known/openid-configuration/tenant`` (OIDC, path insertion);
3. ``https://id.example.com/tenant/.well-known/openid-configuration`` (OIDC, path appending).

Without a path only 1 and 2 exist. A 4xx moves on to the next URL; a network error, a 5xx, a
redirect or a malformed document stops discovery (it is retried later). A document is accepted
only if (RFC 8414 §3.3) its ``issuer`` equals the configured issuer *exactly*, and, when the
issuer introspects, its ``introspection_endpoint`` is https (plain http only for loopback with
``allow_insecure_http``), on the issuer's origin, and carries no userinfo or fragment (an
endpoint elsewhere must be configured explicitly); when it validates JWTs without a configured
``jwks_uri``, the document's ``jwks_uri`` passes the same checks except the origin (RFC 8414 §2
allows the key set anywhere, Google serves it from another host, and a key set carries no token:
the document itself came over TLS from the issuer).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from yarl import URL

from gateway.config import IssuerConfig, is_loopback_url
from gateway.jsonkit.read import JsonError, answer, peer_limits
from gateway.outbound.client import Outbound
from gateway.outbound.failures import OutboundError

__all__ = [
    "MAX_METADATA_BYTES",
    "DiscoveryFailed",
    "IssuerMetadata",
    "check_endpoint",
    "discover",
    "metadata_urls",
]

MAX_METADATA_BYTES: Final = 65_536
"""Largest metadata document read (64 KiB)."""
_LIMITS: Final = peer_limits(16)


class DiscoveryFailed(Exception):
    """Metadata could not be obtained or was refused; the message is fixed and safe to log."""

    def __init__(self, message: str, *, declared_issuer: str | None = None) -> None:
        super().__init__(message)
        self.declared_issuer = declared_issuer
        """On an issuer mismatch: the ``issuer`` the metadata declared (bounded)."""


@dataclass(frozen=True, slots=True)
class IssuerMetadata:
    """What the gateway uses from the issuer's metadata."""

    issuer: str
    introspection_endpoint: str | None
    """None when the issuer does not introspect (``tokens: jwt``)."""
    auth_methods: tuple[str, ...] = ()
    """``introspection_endpoint_auth_methods_supported`` (empty when not advertised)."""
    token_endpoint: str | None = None
    """The advertised ``token_endpoint`` (an absolute http(s) URL), or None; only ever used as
    a private_key_jwt assertion audience, never contacted by the resource server."""
    source: str = "configured"
    """The URL the document came from, or ``configured`` when discovery was skipped."""
    jwks_uri: str | None = None
    """The advertised (or configured) JWK Set URL; None when the issuer does not validate JWTs."""
    authorization_endpoint: str | None = None
    """The advertised ``authorization_endpoint`` (an absolute http(s) URL), or None: where the
    login surface sends a browser to sign in (never contacted by the gateway itself)."""
    iss_parameter: bool = False
    """``authorization_response_iss_parameter_supported`` (RFC 9207 §3): every authorization
    response names the issuer, so one without ``iss`` is refused."""


def metadata_urls(issuer: str) -> list[str]:
    """The discovery URLs for ``issuer``, in the order they are tried."""
    parts = urlsplit(issuer)
    origin = f"{parts.scheme}://{parts.netloc}"
    path = parts.path.rstrip("/")
    urls = [
        origin + "/.well-known/oauth-authorization-server" + path,
        origin + "/.well-known/openid-configuration" + path,
    ]
    if path:
        urls.append(origin + path + "/.well-known/openid-configuration")
    return urls


def _parsed(url: str) -> URL:
    # yarl, not urlsplit: the checks must see the URL exactly as aiohttp will connect to it
    # (no parser differential between the check and the request).
    if any(ch <= " " or ch in "\\\x7f" for ch in url):
        raise ValueError("whitespace, control characters or backslashes")
    return URL(url)


def _origin(url: URL) -> tuple[str, str, int | None]:
    return url.scheme.lower(), (url.host or "").lower(), url.port


def check_endpoint(
    endpoint: object,
    config: IssuerConfig,
    *,
    name: str = "introspection_endpoint",
    same_origin_only: bool = True,
) -> str:
    """Validate a discovered introspection endpoint (or ``jwks_uri``, ``name``); return it or
    raise DiscoveryFailed.

    The documented policy (docs/configuration.md, ``issuer``): an absolute https URL (plain http
    only for loopback with ``allow_insecure_http``) on the issuer's exact origin (scheme, host,
    port), without userinfo (``user@host``: credentials never travel in URLs, and aiohttp would
    turn them into an ``Authorization`` header) and without a fragment.
    """
    if not isinstance(endpoint, str) or not endpoint:
        raise DiscoveryFailed(f"issuer metadata has no {name}")
    try:
        url = _parsed(endpoint)
        origin = _origin(url)
        same_origin = origin == _origin(_parsed(config.url))
    except (ValueError, TypeError) as exc:
        raise DiscoveryFailed(f"{name} is not a valid URL") from exc
    scheme, host, _ = origin
    if not url.absolute or not host:
        raise DiscoveryFailed(f"{name} is not an absolute URL")
    if url.raw_user is not None or url.raw_password is not None or "@" in url.raw_authority:
        raise DiscoveryFailed(f"{name} must not contain userinfo")
    if url.raw_fragment or "#" in endpoint:
        raise DiscoveryFailed(f"{name} must not contain a fragment")
    if scheme != "https" and not (
        scheme == "http" and config.allow_insecure_http and is_loopback_url(endpoint)
    ):
        raise DiscoveryFailed(f"{name} must use https")
    if same_origin_only and not same_origin:
        # SECURITY: a tampered or misconfigured document must not send tokens elsewhere.
        raise DiscoveryFailed(f"{name} is not on the issuer's origin; configure it explicitly")
    return endpoint


async def discover(
    outbound: Outbound,
    config: IssuerConfig,
    *,
    destination: str = "issuer",
    urls: Sequence[str] | None = None,
) -> IssuerMetadata:
    """Fetch and validate the issuer's metadata; raise DiscoveryFailed with a fixed reason."""
    for url in urls if urls is not None else metadata_urls(config.url):
        try:
            response = await outbound.request(
                destination,
                "GET",
                url,
                timeout_s=config.timeout_s,
                headers={"Accept": "application/json"},
                max_body=MAX_METADATA_BYTES,
            )
        except OutboundError as exc:
            raise DiscoveryFailed("issuer metadata unreachable") from exc
        if 400 <= response.status < 500:
            continue  # not served at this location; try the next form
        if response.status != 200:
            raise DiscoveryFailed("issuer metadata answered an error status")
        try:
            doc = answer(response.content_type, response.body, _LIMITS)
        except JsonError as exc:
            if exc.kind == "content_type":
                raise DiscoveryFailed("issuer metadata is not application/json") from None
            raise DiscoveryFailed("issuer metadata is not a JSON object") from exc
        # RFC 8414 §3.3 / OIDC Discovery §4.3: identical, character for character.
        if doc.get("issuer") != config.url:
            raise DiscoveryFailed(
                "issuer metadata names a different issuer",
                declared_issuer=_declared(doc.get("issuer")),
            )
        methods = doc.get("introspection_endpoint_auth_methods_supported", [])
        jwks_uri = config.jwks_uri
        if config.validates_jwt and jwks_uri is None:
            jwks_uri = check_endpoint(
                doc.get("jwks_uri"), config, name="jwks_uri", same_origin_only=False
            )
        introspection = config.introspection_endpoint
        if config.introspects and introspection is None:
            introspection = check_endpoint(doc.get("introspection_endpoint"), config)
        return IssuerMetadata(
            issuer=config.url,
            introspection_endpoint=introspection,
            jwks_uri=jwks_uri,
            auth_methods=tuple(m for m in methods if isinstance(m, str))
            if isinstance(methods, list)
            else (),
            source=url,
            token_endpoint=_absolute_url(doc.get("token_endpoint")),
            authorization_endpoint=_absolute_url(doc.get("authorization_endpoint")),
            iss_parameter=doc.get("authorization_response_iss_parameter_supported") is True,
        )
    raise DiscoveryFailed("issuer serves no authorization server metadata")


def _absolute_url(value: object) -> str | None:
    if not isinstance(value, str) or len(value) > 2048:
        return None
    try:
        parts = urlsplit(value)
    except ValueError:
        return None
    return value if parts.scheme in ("http", "https") and parts.hostname else None


_MAX_DECLARED: Final = 256


def _declared(value: object) -> str:
    """What the metadata's ``issuer`` says, bounded for a log line (operators compare it with
    ``issuer.url`` to spot a trailing slash, http/https or a realm path)."""
    if not isinstance(value, str):
        return "<missing>" if value is None else f"<{type(value).__name__}>"
    text = value if value.isprintable() else repr(value)
    return text if len(text) <= _MAX_DECLARED else text[:_MAX_DECLARED] + "…"
