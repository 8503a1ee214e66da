"""OAuth 2.1 resource server: bearer extraction (RFC 6750), issuer metadata (RFC 8414 / OIDC),
introspection (RFC 7662) with cache and single-flight, claim checks, challenges and protected
resource metadata (RFC 9728). Knows nothing about MCP.

May import only the foundation (errors, seams, config, outbound, limits, observability).
"""
