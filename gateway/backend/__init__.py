"""Upstream MCP client, tool catalog and service credentials.

May import the foundation and ``gateway.protocol`` (wire constants, strict decoding). Never
imports auth/, policy/, http/ or app.

Public API: :class:`~gateway.backend.proxy.UpstreamBackend` (one upstream),
:class:`~gateway.backend.federation.FederatedBackend` (every configured upstream behind the
``Backend`` seam) and :func:`~gateway.backend.tool_headers.header_params` (``x-mcp-header``
rules).
"""

from gateway.backend.federation import FederatedBackend
from gateway.backend.proxy import UpstreamBackend
from gateway.backend.tool_headers import header_params

__all__ = ["FederatedBackend", "UpstreamBackend", "header_params"]
