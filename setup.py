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
    "gateway/deadlines.py",  # the hot path's timers
    # protocol/: strict decoding, classification, envelopes, results (all of the MCP wire)
    "gateway/protocol/capabilities.py",
    "gateway/protocol/classify.py",
    "gateway/protocol/cursor.py",
    "gateway/protocol/envelope.py",
    "gateway/protocol/headers.py",
    "gateway/protocol/jsonencode.py",
    "gateway/protocol/jsonrpc.py",
    "gateway/protocol/jsonstrict.py",
    "gateway/protocol/messages.py",
    "gateway/protocol/params.py",
    "gateway/protocol/results.py",
    "gateway/protocol/versions.py",
    # http/: the endpoint pipeline, admission, dispatch and the answer, tools/call
    "gateway/http/admission.py",
    "gateway/http/answer.py",
    "gateway/http/batch_admission.py",
    "gateway/http/call_limits.py",
    "gateway/http/dispatch.py",
    "gateway/http/drain.py",
    "gateway/http/endpoint.py",
    "gateway/http/errors.py",
    "gateway/http/handshake.py",
    "gateway/http/listing.py",
    "gateway/http/progress.py",
    "gateway/http/request_record.py",
    "gateway/http/tool_call.py",
    "gateway/http/traced.py",
    "gateway/http/turn.py",
    # policy/: the rule model and its evaluation (glob.py is regular expressions: nothing to gain)
    "gateway/policy/evaluate.py",
    "gateway/policy/hierarchy.py",
    "gateway/policy/model.py",
    # auth/: bearer parsing, the token cache, claim checks
    "gateway/auth/bearer.py",
    "gateway/auth/cache.py",
    "gateway/auth/claims.py",
    "gateway/auth/jwt_claims.py",
    "gateway/auth/scopes.py",
    # limits/: the per-replica limiter and the limit keys
    "gateway/limits/keys.py",
    "gateway/limits/memory.py",
    # observability/: the access line and the audit event (lines.py needs __weakref__, which
    # native classes lack, and only batches the writes)
    "gateway/observability/access.py",
    "gateway/observability/audit.py",
    "gateway/observability/events.py",
    # backend/: one tools/call upstream and its result
    "gateway/backend/results.py",
    "gateway/backend/tool_call.py",
    # outbound/: the lean client's request heads and response parsing
    "gateway/outbound/http1_codec.py",
]

if os.environ.get("MCP_GATEWAY_COMPILE") == "1":
    from mypyc.build import mypycify

    setup(ext_modules=mypycify(COMPILED_MODULES, opt_level="3"))
else:
    setup()
