"""``mcp-gateway demo``: the real gateway, a development issuer and a demo backend in one process.

DEVELOPMENT ONLY. Everything binds to loopback (``--force-non-loopback`` overrides it).
:mod:`gateway.demo.stack` starts the three (:func:`start_demo`, also used by the end-to-end
tests); :mod:`gateway.commands.demo` is the command line (``demo``, ``demo token``).
``--tokens jwt`` runs the gateway in front of an issuer with JWT access tokens and no
introspection endpoint (the Microsoft Entra ID shape).
"""
