"""The supervisor's private runtime directory, shared with its workers.

Created with ``tempfile.mkdtemp`` (mode 0700, under ``$TMPDIR``, default ``/tmp``) and removed
at exit. It holds one Unix socket per worker slot (``worker-<slot>.sock``: the worker's private
ops listener, reachable only by the gateway's own user) and ``revocations.json``: the
revocations the supervisor fanned out (memory state), which a worker reads right after binding
its public listener, so a worker started after a revocation refuses the token too.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from gateway.jsonkit.read import loads
from gateway.jsonkit.write import compact

__all__ = ["REVOCATIONS_FILE", "read_revocations", "socket_path", "write_revocations"]

REVOCATIONS_FILE: Final = "revocations.json"


def socket_path(runtime_dir: Path, slot: int) -> Path:
    return runtime_dir / f"worker-{slot}.sock"


def write_revocations(runtime_dir: Path, revoked: Mapping[bytes, float]) -> None:
    """Replace the file atomically (a reader sees the old or the new list, never half)."""
    path = runtime_dir / REVOCATIONS_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(compact({digest.hex(): until for digest, until in revoked.items()}))
    tmp.replace(path)


def read_revocations(runtime_dir: Path) -> dict[bytes, float]:
    """The live entries of the file (none when it does not exist yet)."""
    with contextlib.suppress(FileNotFoundError):
        data = loads((runtime_dir / REVOCATIONS_FILE).read_bytes())
        now = time.time()
        found: dict[bytes, float] = {}
        for member, until in data.items():
            with contextlib.suppress(ValueError, TypeError):
                if float(until) > now:
                    found[bytes.fromhex(member)] = float(until)
        return found
    return {}
