"""Validate gateway responses against the official MCP JSON Schemas (``shared/spec``).

``validate_response(revision, envelope, method=None)`` checks a JSON-RPC response envelope
against the revision's response definition (``JSONRPCResponse``; for error envelopes of the
2025-03-26 and 2025-06-18 revisions, whose ``JSONRPCResponse`` is result-only, ``JSONRPCError``)
and, when ``method`` is given, the result against the method's result type
(``ListToolsResult``, ``CallToolResult``, ``DiscoverResult``, ``InitializeResult``,
``EmptyResult``). ``validate_result(revision, definition, result)`` checks a bare result
against any named definition. Both raise AssertionError naming the failing paths.

The schema directory is found in this order: ``$MCP_SPEC_DIR``; ``<repo>/../shared/spec`` (the
layout of ``/work/main`` and of CI, which puts a copy of ``shared/`` beside a fresh clone);
``<repo>/shared/spec``; the verbatim copy in ``tests/fixtures/spec``.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any

import jsonschema_rs

__all__ = ["REVISIONS", "SPEC_DIR", "validate_response", "validate_result"]

REVISIONS = ("2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28")


def _spec_dir() -> Path:
    override = os.environ.get("MCP_SPEC_DIR")
    if override:
        return Path(override)
    repo = Path(__file__).resolve().parents[2]
    candidates = (
        repo.parent / "shared" / "spec",
        repo / "shared" / "spec",
        # A verbatim copy of shared/spec, so a clone without shared/ beside it still tests.
        repo / "tests" / "fixtures" / "spec",
    )
    for candidate in candidates:
        if (candidate / "2026-07-28" / "schema.json").is_file():
            return candidate
    return candidates[0]


SPEC_DIR = _spec_dir()

_RESULT_TYPES = {
    "tools/list": "ListToolsResult",
    "tools/call": "CallToolResult",
    "server/discover": "DiscoverResult",
    "initialize": "InitializeResult",
    "ping": "EmptyResult",
}


@functools.cache
def _root(revision: str) -> dict[str, Any]:
    path = SPEC_DIR / revision / "schema.json"
    if not path.is_file():
        raise AssertionError(f"no schema for {revision} at {path}; set MCP_SPEC_DIR")
    document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return document


def _definitions(revision: str) -> tuple[str, dict[str, Any]]:
    root = _root(revision)
    key = "$defs" if "$defs" in root else "definitions"
    return key, root[key]


@functools.cache
def _validator(revision: str, definition: str) -> Any:
    root = _root(revision)
    key, definitions = _definitions(revision)
    if definition not in definitions:
        raise AssertionError(f"{definition} is not defined in the {revision} schema")
    schema = {"$schema": root["$schema"], key: definitions, "$ref": f"#/{key}/{definition}"}
    return jsonschema_rs.validator_for(schema)


def validate_response(revision: str, envelope: Any, method: str | None = None) -> None:
    """Assert ``envelope`` is a valid response of ``revision`` (and of ``method``'s result)."""
    _, definitions = _definitions(revision)
    is_error = isinstance(envelope, dict) and "error" in envelope
    if is_error and envelope.get("id", 0) is None and "JSONRPCErrorResponse" in definitions:
        # JSON-RPC 2.0 §5 writes an unknown id as null; the 2025-11-25+ schemas model the same
        # thing as an absent id (digest §6 item 11). Check the rest of the envelope.
        envelope = {key: value for key, value in envelope.items() if key != "id"}
    if is_error and "JSONRPCErrorResponse" not in definitions:
        _check(revision, "JSONRPCError", envelope)  # 2025-03-26, 2025-06-18
    else:
        _check(revision, "JSONRPCResponse", envelope)
    if method is not None and not is_error:
        if not isinstance(envelope, dict) or "result" not in envelope:
            raise AssertionError("a success response must carry a result")
        _check(revision, _RESULT_TYPES[method], envelope["result"])


def validate_result(revision: str, definition: str, result: Any) -> None:
    """Assert ``result`` is a valid instance of ``definition`` in ``revision``'s schema."""
    _check(revision, definition, result)


def _check(revision: str, definition: str, instance: Any) -> None:
    errors = list(_validator(revision, definition).iter_errors(instance))
    if errors:
        detail = "; ".join(f"{list(e.instance_path)}: {e.message}" for e in errors[:5])
        raise AssertionError(f"not a valid {revision} {definition}: {detail}")
