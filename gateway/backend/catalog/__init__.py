"""What the backends offer, as the gateway serves it: tools, prompts, resources and templates.

Validated (tool_catalog.py, surface_catalog.py, hygiene.py), under the policy's ``override:``
(exposed.py), merged across backends (tool_merge.py, surface_merge.py), pinned by the catalog
lock (pinning.py, lock_file.py, lock_watch.py, held.py) and kept fresh (refresher.py).
Imports backend/upstream/ (the fetch, the ``x-mcp-header`` rules) and backend/credentials/.
"""
