"""OAuth 2.1 resource server: bearer extraction (RFC 6750), routing by ``iss`` to one of several
trusted issuers, issuer metadata (RFC 8414 / OIDC), introspection (RFC 7662), local validation of
JWT access tokens (RFC 9068) against the issuer's JWK Set, one cache with single-flight, claim
checks, challenges and protected resource metadata (RFC 9728). Knows nothing about MCP.

May import only the foundation (errors, seams, config, outbound, limits, observability).
"""
