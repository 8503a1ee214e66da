#!/usr/bin/env python3
"""Micro benchmark: the cost of a signed caller assertion per ``tools/call``.

Usage: ``.venv/bin/python scripts/bench_micro.py assertion [--number N] [--repeat R]``

Prints µs per call (best of R runs of N calls) of :meth:`AssertionSigner.assertion` for each
algorithm (EdDSA with Ed25519, ES256, RS256 with 2048 bits) in three situations: a fresh
assertion every call (``reuse: false``), the same caller and tool again within the reuse window
(``reuse: true``, the default), and the raw signature alone for reference. A measurement tool,
not a test: it asserts nothing. Figures are in docs/performance.md.
"""

from __future__ import annotations

import argparse
import platform
import sys
import tempfile
import time
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat
from joserfc.jws import JWSRegistry

from gateway.backend.credentials.assertion_keys import AssertionKey
from gateway.backend.credentials.caller_assertion import AssertionSigner
from gateway.config import AssertionConfig, Secret
from gateway.config.identity_model import ASSERTION_ALGS, AssertionAlg
from gateway.seams import Principal, RequestContext, ToolDef

ISSUER = "https://mcp.example.com/mcp"
AUDIENCE = "https://tools.internal/mcp"
TOOL = ToolDef(name="docs__search", definition={}, upstream_name="search", backend="docs")
PRINCIPAL = Principal(
    subject="erin@example.com",
    client_id="claude-code",
    scopes=frozenset({"mcp:access", "docs:read", "tickets:write"}),
    expires_at=time.time() + 86_400,
    issuer="https://id.example.com",
    fingerprint="0123456789ab",
)
CTX = RequestContext("8f2d3c9a1b7e4d60" * 2, "t" * 32, "s" * 16, 0.0, "127.0.0.1")


def _pem(alg: str) -> str:
    key: Any
    if alg == "EdDSA":
        key = ed25519.Ed25519PrivateKey.generate()
    elif alg == "ES256":
        key = ec.generate_private_key(ec.SECP256R1())
    else:
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return str(key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()).decode())


def _best(run: Callable[[], object], number: int, repeat: int) -> float:
    return min(timeit.repeat(run, number=number, repeat=repeat)) / number * 1e6


def _measure(alg: AssertionAlg, folder: Path, number: int, repeat: int) -> str:
    path = folder / f"{alg}.pem"
    path.write_text(_pem(alg))
    secret = Secret(path.read_text().strip(), f"file:{path}", path.stat().st_mtime)
    fresh_cfg = AssertionConfig(secret, AUDIENCE, alg=alg, reuse=False)
    reuse_cfg = AssertionConfig(secret, AUDIENCE, alg=alg)
    key = AssertionKey(fresh_cfg)
    fresh = AssertionSigner(fresh_cfg, key, issuer=ISSUER, backend="docs")
    reused = AssertionSigner(reuse_cfg, key, issuer=ISSUER, backend="docs")
    jose, _ = key.current()
    algorithm = JWSRegistry.algorithms[alg]
    slow = number if alg != "RS256" else max(1, number // 5)
    sign = _best(lambda: algorithm.sign(b"x" * 420, jose), slow, repeat)
    new = _best(lambda: fresh.assertion(TOOL, PRINCIPAL, CTX), slow, repeat)
    again = _best(lambda: reused.assertion(TOOL, PRINCIPAL, CTX), number, repeat)
    size = len(fresh.assertion(TOOL, PRINCIPAL, CTX))
    return (
        f"{alg:6} signature alone {sign:7.1f} µs | fresh assertion {new:7.1f} µs "
        f"| reused {again:5.2f} µs | {size} bytes"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--number", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"python {platform.python_version()} on {platform.machine()}")
    with tempfile.TemporaryDirectory() as tmp:
        for alg in ASSERTION_ALGS:
            print(_measure(alg, Path(tmp), args.number, args.repeat))


if __name__ == "__main__":
    main()
