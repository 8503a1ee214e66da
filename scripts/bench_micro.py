#!/usr/bin/env python3
"""In-process microbenchmarks of the hot path's pieces (``make bench-micro``).

The end-to-end comparison at the defaults is ``scripts/bench.py`` (``make bench``); these
measure in process, one piece each without sockets (``pipeline``: all of them, on loopback):

- ``front_door``: the MCP endpoint's handler with in-process fakes;
- ``protocol``: strict JSON decoding and classification of a ``tools/call``;
- ``observer``: the access line, request metrics and the audit event;
- ``jwt``: local JWT validation, cold and with a warm verification cache, per algorithm;
- ``assertion``: signed caller assertions, fresh and reused, per algorithm;
- ``conditions``: a rule's ``when:`` conditions per call (the bench's ``conditions`` policy);
- ``pipeline``: the whole default pipeline in one process (gateway, issuer, bare backend,
  client), per variant; with ``--callgrind``, instructions per call (load-independent).

Usage::

    .venv/bin/python scripts/bench_micro.py                 # every part, default sizes
    .venv/bin/python scripts/bench_micro.py jwt --rounds 3  # one part, its own options

Timings are printed, never asserted. Figures: docs/performance.md.
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
PARTS = ("front_door", "protocol", "observer", "jwt", "assertion", "conditions", "pipeline")


def main() -> int:
    sys.path[:0] = [str(HERE.parent)]  # the repository root: gateway/ and tests/support/
    args = sys.argv[1:]
    if args and args[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    if args and args[0] not in PARTS:
        print(f"unknown part {args[0]!r}; one of {', '.join(PARTS)}", file=sys.stderr)
        return 2
    chosen = [args[0]] if args else list(PARTS)
    for part in chosen:
        print(f"== {part}", flush=True)
        sys.argv = [f"bench_micro.py {part}", *(args[1:] if args else [])]
        runpy.run_path(str(HERE / "micro" / f"{part}.py"), run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
