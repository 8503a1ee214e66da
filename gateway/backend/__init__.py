"""Upstream MCP client, tool catalog and service credentials.

May import the foundation and ``gateway.protocol`` (wire constants, strict decoding). Never
imports auth/, policy/, http/ or app.
"""
