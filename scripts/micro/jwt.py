#!/usr/bin/env python3
"""Local JWT validation: what one request costs in the auth layer, cold and warm.

In process, no I/O: a :class:`~gateway.auth.resource_server.ResourceServer` for one issuer with
``tokens: jwt``, whose JWK Set holds the development issuer's keys (loaded directly, no fetch).
Per algorithm (RS256 with a 2048-bit key, PS256, ES256, EdDSA/Ed25519):

* ``verify``: :meth:`JwtVerifier.verify` alone on one parsed token (header checks, key lookup,
  signature, claims): the signature work a cache miss pays;
* ``cold``: ``ResourceServer.authenticate`` with a token never seen before (bearer parse,
  SHA-256, routing with the strict compact decoder, single-flight, verify, caching): the whole
  first request of a token;
* ``warm``: ``authenticate`` of a token already verified (bearer parse, SHA-256, routing, one
  cache lookup): every later request of that token until its cache entry ends.

Usage::

    .venv/bin/python scripts/bench_micro.py jwt            # all algorithms, default sizes
    .venv/bin/python scripts/bench_micro.py jwt -n 5000 --alg RS256

Figures and the exact command are recorded in docs/performance.md ("Local JWT validation").
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from gateway.auth.jwks import parse_jwks  # noqa: E402
from gateway.auth.jws import parse_compact  # noqa: E402
from gateway.auth.resource_server import ResourceServer  # noqa: E402
from gateway.config import BackendConfig, Config, CredentialConfig, IssuerConfig, Secret  # noqa: E402
from gateway.dev.issuer_keys import DevKeySet, KeyKind  # noqa: E402
from gateway.observability.metrics import Metrics  # noqa: E402
from gateway.outbound.client import Outbound  # noqa: E402
from gateway.seams import AuthRequest  # noqa: E402

ISSUER = "https://id.example.com"
RESOURCE = "https://mcp.example.com/mcp"
ALGS: dict[str, KeyKind] = {"RS256": "RSA", "PS256": "RSA", "ES256": "EC", "EdDSA": "OKP"}


def config() -> Config:
    issuer = IssuerConfig(url=ISSUER, tokens="jwt", jwks_uri=ISSUER + "/jwks")
    backend = BackendConfig(
        url="http://127.0.0.1:9/mcp",
        credential=CredentialConfig(type="bearer", token=Secret("x", "literal")),
    )
    return Config(
        source="bench", resource=RESOURCE, issuer=issuer, backend=backend, policy_paths=()
    )


def claims(n: int) -> dict[str, Any]:
    now = int(time.time())
    return {
        "iss": ISSUER,
        "sub": f"user-{n}",
        "aud": RESOURCE,
        "client_id": "bench",
        "scope": "mcp:access notes:read notes:write",
        "iat": now,
        "exp": now + 3600,
        "jti": f"bench-{n}",
    }


async def measure(alg: str, n: int, repeats: int) -> dict[str, float]:
    keys = DevKeySet()
    kid = keys.add(ALGS[alg])
    keys.use(kid)
    rs = ResourceServer(config(), Outbound(), metrics=Metrics())
    jwks = rs.issuers[0].jwks
    verifier = rs.issuers[0].verifier
    assert jwks is not None and verifier is not None
    published = {"keys": [{**k, "alg": alg} if k["kid"] == kid else k for k in keys.jwks()["keys"]]}
    jwks.keys, _ = parse_jwks(json.dumps(published).encode(), (alg,))

    def sign(i: int) -> str:
        return keys.sign(claims(i), header={"alg": alg})

    results: dict[str, list[float]] = {"verify": [], "cold": [], "warm": []}
    for round_ in range(repeats):
        tokens = [sign(round_ * n + i) for i in range(n)]
        parsed = [parse_compact(t) for t in tokens]
        start = time.perf_counter()
        for token, jws in zip(tokens, parsed, strict=True):
            assert jws is not None
            await verifier.verify(jws, len(token), "fp")
        results["verify"].append((time.perf_counter() - start) / n)

        requests = [AuthRequest((f"Bearer {t}",), frozenset(), "192.0.2.1") for t in tokens]
        start = time.perf_counter()
        for request in requests:
            await rs.authenticate(request)
        results["cold"].append((time.perf_counter() - start) / n)
        start = time.perf_counter()
        for request in requests:
            await rs.authenticate(request)
        results["warm"].append((time.perf_counter() - start) / n)
        for issuer in rs.issuers:
            issuer.cache.clear()
    return {name: min(values) * 1e6 for name, values in results.items()}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("-n", type=int, default=2000, help="tokens per round (default 2000)")
    parser.add_argument("--repeats", type=int, default=5, help="rounds, best kept (default 5)")
    parser.add_argument("--alg", choices=sorted(ALGS), action="append", help="default: all")
    args = parser.parse_args()
    print(
        f"# {platform.python_implementation()} {platform.python_version()}, "
        f"{platform.machine()}, n={args.n}, best of {args.repeats} (µs per call)"
    )
    print("| Algorithm | verify (signature + claims) | cold authenticate | warm authenticate |")
    print("|---|---|---|---|")
    for alg in args.alg or list(ALGS):
        figures = await measure(alg, args.n, args.repeats)
        print(
            f"| {alg} | {figures['verify']:.1f} | {figures['cold']:.1f} | {figures['warm']:.1f} |"
        )


if __name__ == "__main__":
    asyncio.run(main())
