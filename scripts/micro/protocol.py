#!/usr/bin/env python3
"""Micro benchmark: strict decoding + classification of a typical 2026-07-28 ``tools/call``.

Usage: ``.venv/bin/python scripts/bench_micro.py protocol [--number N] [--repeat R]``

Prints the body size and µs per operation (best of R runs of N operations each) for: the strict
decoder alone, ``json.loads`` for comparison, ``classify`` alone, decode + classify together,
and encoding the response envelope. Numbers are for one core of the machine it runs on; it is
a measurement tool, not a test, and asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import timeit
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from multidict import CIMultiDict, CIMultiDictProxy

from gateway.config import JsonLimits, ServerInfo
from gateway.protocol.classify import classify
from gateway.protocol.envelope import success_body
from gateway.protocol.jsonstrict import decode
from gateway.protocol.results import shape_call_result
from gateway.seams import HeaderParam, ToolDef

BODY = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 42,
        "method": "tools/call",
        "params": {
            "name": "search_docs",
            "arguments": {
                "query": "How do I rotate the backend service credential?",
                "limit": 10,
                "filters": {"space": "ops", "updated_after": "2026-01-01"},
            },
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
                "io.modelcontextprotocol/clientInfo": {"name": "claude-code", "version": "2.1.328"},
                "progressToken": "p-7f3a",
            },
        },
    },
    separators=(",", ":"),
).encode()

HEADERS = CIMultiDictProxy(
    CIMultiDict(
        [
            ("Host", "mcp.example.com"),
            ("Authorization", "Bearer eyJhbGciOiJSUzI1NiJ9.x.y"),
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "search_docs"),
            ("Mcp-Param-Space", "ops"),
        ]
    )
)
TOOL = ToolDef(
    name="search_docs",
    definition={"name": "search_docs", "inputSchema": {"type": "object"}},
    header_params=(HeaderParam(header="Space", path=("filters", "space"), type="string"),),
)
LIMITS = JsonLimits()
SERVER = ServerInfo()
RESULT = {
    "content": [{"type": "text", "text": "Rotate it with `mcp-gateway check` then reload." * 4}],
    "isError": False,
}


def lookup(name: str) -> ToolDef | None:
    return TOOL if name == TOOL.name else None


def decode_and_classify() -> Any:
    return classify(HEADERS, decode(BODY, LIMITS), lookup)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    decoded = decode(BODY, LIMITS)
    message = decode_and_classify()
    cases = {
        "json.loads (reference)": lambda: json.loads(BODY),
        "jsonstrict.decode": lambda: decode(BODY, LIMITS),
        "classify": lambda: classify(HEADERS, decoded, lookup),
        "decode + classify": decode_and_classify,
        "shape + success_body": lambda: success_body(
            message.id, shape_call_result(RESULT, era="modern", server=SERVER)
        ),
    }
    print(f"python {platform.python_version()} on {platform.machine()}; body {len(BODY)} bytes")
    for label, func in cases.items():
        best = min(timeit.repeat(func, number=args.number, repeat=args.repeat))
        print(f"{label:<24} {best / args.number * 1e6:8.2f} µs/op")


if __name__ == "__main__":
    main()
