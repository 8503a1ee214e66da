"""URL helpers shared by the loader and the layers that read the configuration."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

__all__ = ["canonical_uri", "is_loopback_url", "is_private_url"]


def is_loopback_url(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def is_private_url(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        # A name: "allow_insecure_http" is the operator's statement that it resolves privately.
        return True
    return address.is_private or address.is_loopback


def canonical_uri(url: str) -> str:
    """RFC 8707 / RFC 3986 §6.2.2 normalisation: lowercase scheme and host, no default port."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    port = parts.port
    if port is not None and not (
        (scheme == "https" and port == 443) or (scheme == "http" and port == 80)
    ):
        host = f"{host}:{port}"
    if ":" in (parts.hostname or "") and not host.startswith("["):
        host = f"[{parts.hostname}]" + (f":{port}" if port else "")
    path = parts.path
    return f"{scheme}://{host}{path}"
