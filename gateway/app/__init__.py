"""Assembles the gateway: the public MCP listener, the ops listener and their lifecycle.

Two aiohttp applications, each on its own :class:`aiohttp.web.AppRunner`:

* the **public** listener (``config.listen``, :mod:`~gateway.app.public`) serves the exact MCP
  path (and, once wired, the RFC 9728 protected-resource metadata paths); everything else is 404;
* the **ops** listener (``config.ops_listen``, loopback by default, :mod:`~gateway.app.ops`)
  serves ``/healthz``, ``/readyz`` and ``/metrics`` and is never exposed through the reverse
  proxy.

Both carry the request-id middleware (:mod:`~gateway.app.request_id`). What they run with is
:class:`Services` (:mod:`~gateway.app.services`, with the readiness registry), filled in by
:mod:`gateway.wiring`; :mod:`~gateway.app.lifecycle` starts and gracefully stops both
(:class:`GatewayServer`, :func:`serve`).

Import the public names from here (``from gateway.app import GatewayServer``). Importing the
package first checks the aiohttp internals its listeners use
(:mod:`~gateway.app.aiohttp_internals`).
"""

# First: refuse an aiohttp without the internals, before a module below imports one of them.
from gateway.app.aiohttp_internals import AIOHTTP_LINE
from gateway.app.lifecycle import GatewayServer, serve
from gateway.app.ops import build_ops_app
from gateway.app.public import build_public_app
from gateway.app.request_id import REQUEST_ID, REQUEST_ID_HEADER, request_id_middleware
from gateway.app.services import CONFIG, SERVICES, Readiness, ReadinessCheck, Services

__all__ = [
    "AIOHTTP_LINE",
    "CONFIG",
    "REQUEST_ID",
    "REQUEST_ID_HEADER",
    "SERVICES",
    "GatewayServer",
    "Readiness",
    "ReadinessCheck",
    "Services",
    "build_ops_app",
    "build_public_app",
    "request_id_middleware",
    "serve",
]
