"""Opt-in mypyc build of the typed per-request core (issue 34).

``MCP_GATEWAY_COMPILE=1 pip install .`` (or ``pip wheel``) compiles COMPILED_MODULES with mypyc;
without the variable this is a plain setuptools build and needs no C compiler. The same source
stays the pure-Python reference. `mcp-gateway version` reports which build is installed.
"""

from __future__ import annotations

import os

from setuptools import setup

# Extend this list (paths relative to the project root) to compile more of the core; every module
# here must be mypy --strict clean and must not be monkeypatched at run time (mypyc binds calls
# between compiled modules early). gateway/cli.py's CORE_MODULES names what `version` checks.
COMPILED_MODULES = [
    "gateway/deadlines.py",
    "gateway/protocol/envelope.py",
    "gateway/protocol/jsonrpc.py",
]

if os.environ.get("MCP_GATEWAY_COMPILE") == "1":
    from mypyc.build import mypycify

    setup(ext_modules=mypycify(COMPILED_MODULES, opt_level="3"))
else:
    setup()
