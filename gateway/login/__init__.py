"""The browser login surface (issue 45, shared with issue 46): pages on the gateway's own origin
where a person signs in, so that a page can prove that the person in the browser is the MCP
caller who started an action. docs/user-authorization.md#login-surface.

The pieces, by job: :mod:`.login_surface` (the pages; the extension points ``add_section`` and
``add_action``), :mod:`.actions` (pending actions: started from the MCP side, redeemed at a page
by their owner only), :mod:`.person` (who is in the browser; :func:`~.person.same_person`),
:mod:`.cookies` (the sealed session and sign-in cookies), :mod:`.relying_party` and
:mod:`.id_token` (OpenID Connect, authorization code + PKCE), :mod:`.verifier` (the external
verifier alternative), :mod:`.forms` (strict parameters, CSRF), :mod:`.pages` (escaped HTML and
the security headers), :mod:`.login_events` (audit events, log lines, metrics), :mod:`.build`
(from ``login:``).
"""
