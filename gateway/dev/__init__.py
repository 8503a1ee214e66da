"""DEVELOPMENT ONLY: the development issuer and demo backend used by ``mcp-gateway demo`` and the
tests. Binds to loopback unless explicitly forced. Never part of a production deployment.

Imports only the foundation; the gateway never imports this package (except cli's demo command).
"""
