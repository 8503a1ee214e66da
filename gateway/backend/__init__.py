"""Upstream MCP servers behind the ``Backend`` seam: their links, catalogs and credentials.

May import the foundation and ``gateway.protocol`` (wire constants, strict decoding). Never
imports auth/, policy/, http/ or app.

Rooms, each standing only on the ones listed before it: ``credentials/`` (who the gateway is
toward an upstream), ``upstream/`` (the link to one upstream and the requests sent on it),
``catalog/`` (what the backends offer: validated, overridden, merged, pinned, kept fresh) and
``listen/`` (streams held open at an upstream). At the top, the composition:
:mod:`.upstream_backend` (one configured backend), :mod:`.federation` (all of them behind one
endpoint) and :mod:`.federated_listen` (callers' listen streams across them).

Nothing is re-exported here: import each name from its module (one import path per thing).
"""
