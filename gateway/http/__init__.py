"""HTTP admission, the MCP endpoint pipeline and the one error renderer (``errors.py``).

May import the foundation (errors, seams, config, outbound, limits, observability) and
``gateway.protocol``. Never imports auth/, policy/ or backend/: those arrive as the Protocols in
:mod:`gateway.seams`, wired by :mod:`gateway.wiring`.
"""
