"""Regenerate ``gateway/schema/mcp-input-requests.schema.json`` from the official MCP schema.

The gateway validates upstream ``inputRequests`` and client ``inputResponses`` (MCP 2026-07-28
basic/patterns/mrtr.mdx) against the official definitions. This script copies the definitions
those need, and everything they reference, out of the revision's ``schema.json`` verbatim::

    .venv/bin/python scripts/extract_input_schema.py [PATH/TO/2026-07-28/schema.json]

``tests/unit/protocol/test_input_requests.py`` fails when the packaged copy and a fresh
extraction differ.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Final

ROOT: Final = Path(__file__).resolve().parents[1]
TARGET: Final = ROOT / "gateway" / "schema" / "mcp-input-requests.schema.json"
ROOTS: Final = (
    "ElicitRequest",
    "CreateMessageRequest",
    "ListRootsRequest",
    "ElicitResult",
    "CreateMessageResult",
    "ListRootsResult",
)
_PREFIX: Final = "#/$defs/"


def default_source() -> Path:
    for candidate in (
        ROOT.parent / "shared" / "spec",
        ROOT / "shared" / "spec",
        ROOT / "tests" / "fixtures" / "spec",
    ):
        path = candidate / "2026-07-28" / "schema.json"
        if path.is_file():
            return path
    raise SystemExit("no 2026-07-28/schema.json found; pass its path")


def _refs(node: Any) -> set[str]:
    found: set[str] = set()
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            ref = item.get("$ref")
            if isinstance(ref, str) and ref.startswith(_PREFIX):
                found.add(ref[len(_PREFIX) :])
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def extract(schema: dict[str, Any]) -> dict[str, Any]:
    """The root definitions and their transitive ``$ref`` closure, sorted by name."""
    defs = schema["$defs"]
    wanted: set[str] = set()
    pending = list(ROOTS)
    while pending:
        name = pending.pop()
        if name in wanted:
            continue
        wanted.add(name)
        pending.extend(_refs(defs[name]) - wanted)
    return {
        "$schema": schema["$schema"],
        "$comment": "Extracted from the official MCP 2026-07-28 schema.json by "
        "scripts/extract_input_schema.py; do not edit.",
        "$defs": {name: defs[name] for name in sorted(wanted)},
    }


def render(schema: dict[str, Any]) -> str:
    return json.dumps(extract(schema), indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    source = Path(argv[1]) if len(argv) > 1 else default_source()
    TARGET.write_text(render(json.loads(source.read_text(encoding="utf-8"))), encoding="utf-8")
    print(f"wrote {TARGET.relative_to(ROOT)} from {source}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
