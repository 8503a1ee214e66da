"""OAuth-protected MCP resource-server gateway.

Layers (see docs/architecture.md and tests/test_layers.py): foundation modules (errors, seams,
config/, yaml_source, outbound, observability) at the bottom; protocol/, auth/, policy/ and
limits/ above them and independent of each other; backend/ and http/ above those; app/, wiring.py
and cli.py on top. dev/ is development tooling and imports only the foundation.
"""

__version__ = "0.1.0"
