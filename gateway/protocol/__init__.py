"""MCP wire only: strict JSON-RPC decoding, version routing, the 2026-07-28 stateless rules and
the legacy initialize profile. Pure: no I/O. Knows nothing about OAuth or backends.

May import only the foundation (errors, seams, config). Never imports auth/, policy/, backend/,
http/ or app.
"""
