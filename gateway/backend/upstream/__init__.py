"""The link to one upstream MCP server and the requests sent on it.

The link in the era the upstream speaks (link.py, era.py), one POST and its reply (rpc.py,
sse_parser.py), every page of a list (list_pages.py), ``tools/call`` and the surface requests
with their answers checked (tool_call.py, tool_results.py, tool_headers.py, surface_call.py,
surface_results.py), a task's requests (task_call.py), what the requests but ``tools/call``
share (method_call.py), the gateway's own headers of them all (request_headers.py). Imports
backend/credentials/ only.
"""
