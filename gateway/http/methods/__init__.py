"""One module per MCP method family the gateway answers or forwards (after dispatch):
handshake.py (``initialize``, ``ping``), listing.py (``tools/list``, ``server/discover``),
tool_calls.py (``tools/call``) with input_rounds.py (its sealed input rounds) and
task_creation.py (a call that becomes a task), task_methods.py (``tasks/get``,
``tasks/update``, ``tasks/cancel``), surface_routes.py (``prompts/get``, ``resources/read``,
``completion/complete``) with surface_steps.py (the steps they share) and surface_lists.py
(their lists and capabilities).
``subscriptions/listen`` has a room of its own (:mod:`gateway.http.subscriptions.listen_route`).

Stands on the modules of ``gateway/http/`` itself and on ``subscriptions/`` (the legacy
session ``initialize`` mints, the listen capabilities ``server/discover`` reports).
"""
