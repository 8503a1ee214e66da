"""Per-user upstream authorization at the browser (issue 45): the pages where a person connects
their own account at a ``user_oauth`` backend's authorization server, built on the login surface
(docs/user-authorization.md#per-user-upstream-authorization).

By job: :mod:`.consent_links` (the MCP side's link to a consent page: a pending action of kind
``connect``), :mod:`.connect_pages` (that page, the upstream's answer, connecting and
disconnecting from the account page, the account page's section, the client metadata document),
:mod:`.upstream_flows` (one authorization in progress, bound to the person who started it),
:mod:`.connect_api` (the command line's ``mcp-gateway connect``).
"""
