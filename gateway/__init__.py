"""OAuth-protected MCP resource-server gateway.

Layers (see docs/architecture.md and tests/test_layers.py): foundation modules (errors, seams,
config/, yaml_source, outbound, observability) at the bottom; protocol/, auth/, policy/ and
limits/ above them and independent of each other; backend/ and http/ above those; app/ (the
listeners), wiring/ (the composition root) and commands/ (the command line) on top. dev/ is
development tooling and imports only the foundation and outbound.
"""

__version__ = "0.1.0"

SERVER_PRODUCT = "mcp-gateway"
"""The ``Server`` field of every answer, both listeners (RFC 9110 §10.2.4): the product alone.
aiohttp's default names the Python and aiohttp versions, which tell a scanner what to try."""
