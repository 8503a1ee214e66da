"""The gateway's one error vocabulary: every rejection is one row of the status table.

Each concrete subclass of :class:`GatewayError` is exactly one row of the status table in
``docs/errors.md`` (mirrored from the design's ``architecture.md``). A class carries the row's
HTTP status, its JSON-RPC code (if the row has a JSON-RPC body), its RFC 6750 error code (if the
row has a Bearer challenge) and a short fixed message. Messages never echo input or secrets:
clients show them to users verbatim.

Rendering to HTTP happens in one place, :mod:`gateway.http.error_response` (the login surface's
pages: :mod:`gateway.login.pages`). This package is pure and imports nothing else from the
gateway, so every layer may raise these. It is imported as ``gateway.errors`` only; its private
modules are the families of rows: _base.py (the root and the codes), _transport.py (HTTP
admission), _oauth.py (the resource server), _denials.py (conditions, token exchange, decision
point, guardrails, a person's upstream token), _approvals.py (human approval), _mcp.py
(JSON-RPC), _login_pages.py (the login surface and its connect pages). Each family's
``__all__`` lists its names, once; this package offers all of them.
"""

from __future__ import annotations

from gateway.errors import _approvals, _base, _denials, _login_pages, _mcp, _oauth, _transport
from gateway.errors._approvals import *
from gateway.errors._base import *
from gateway.errors._denials import *
from gateway.errors._login_pages import *
from gateway.errors._mcp import *
from gateway.errors._oauth import *
from gateway.errors._transport import *

__all__: list[str] = ["all_rows"]
__all__ += _approvals.__all__
__all__ += _base.__all__
__all__ += _denials.__all__
__all__ += _login_pages.__all__
__all__ += _mcp.__all__
__all__ += _oauth.__all__
__all__ += _transport.__all__


def all_rows() -> list[type[_base.GatewayError]]:
    """Every concrete row class, recursively (used by the status-table test)."""
    found: list[type[_base.GatewayError]] = []
    stack: list[type[_base.GatewayError]] = [_base.GatewayError]
    while stack:
        cls = stack.pop()
        for sub in cls.__subclasses__():
            stack.append(sub)
            if sub.row:
                found.append(sub)
    return sorted(found, key=lambda c: c.row)
