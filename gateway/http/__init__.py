"""The MCP endpoint: HTTP admission, the request pipeline, the methods, and the one error renderer.

May import the foundation (errors, seams, config, outbound, limits, observability) and
``gateway.protocol``. Never imports auth/, policy/ or backend/: those arrive as the Protocols in
:mod:`gateway.seams`, wired by :mod:`gateway.wiring`.

Rooms, each standing only on the ones listed before it: the modules of this package itself
(the ground floor every room shares: admission.py, drain.py, turn.py, progress.py, sse.py,
condition_gate.py, call_limits.py, error_response.py), ``subscriptions/`` (both eras'
subscriptions and their streams), ``methods/`` (one module per method family) and
``pipeline/`` (the request's steps 1-18, routing to the methods).
"""
