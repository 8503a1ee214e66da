"""RFC 8446 / RFC 8705 §2: TLS toward the upstream, with a custom CA and an mTLS client certificate.

The context is built once at startup (``backend.tls``); a missing or unreadable file is a
:class:`~gateway.errors.ConfigError`, never a per-request failure.
"""

from __future__ import annotations

import ssl

from gateway.config import TlsConfig
from gateway.errors import ConfigError

__all__ = ["build_ssl_context"]


def build_ssl_context(tls: TlsConfig) -> ssl.SSLContext | None:
    """None when ``backend.tls`` sets nothing (the system trust store applies)."""
    if tls.ca_file is None and tls.client_cert is None:
        return None
    try:
        context = ssl.create_default_context(cafile=tls.ca_file)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        if tls.client_cert is not None:
            context.load_cert_chain(tls.client_cert, tls.client_key)
    except (OSError, ssl.SSLError, ValueError) as exc:
        raise ConfigError(["backend.tls: cannot load the CA file or client certificate"]) from exc
    return context
