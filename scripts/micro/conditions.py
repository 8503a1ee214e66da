#!/usr/bin/env python3
"""Micro benchmark: the policy's ``when:`` conditions on one ``tools/call`` (issue 25's budget).

Usage: ``.venv/bin/python scripts/bench_micro.py conditions [--number N] [--repeat R]``

The policy is the one of ``scripts/bench.py``'s "conditions on the tool" variant (the echo rule
with the two conditions of ``bench.CONDITIONS``); the principal carries a realistic set of
claims (an Entra-like access token: 20 claims, 12 groups, 3 roles) and, as in the gateway, is
the same object call after call (the auth layer caches it). Prints µs per call (best of R runs
of N calls) for: the ladder alone (``decide_tool``), the ladder plus the conditions, their
difference (what the conditions cost per call), a token-only condition alone, and the first
evaluation of a new principal (the token facts converted to CEL values once). Timings are
printed, never asserted.
"""

from __future__ import annotations

import argparse
import platform
import sys
import tempfile
import time
import timeit
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import CONDITIONS, policy

from gateway.policy.policy_loader import load_policy
from gateway.seams import AccessQuestion, Principal, frozen_claims

NOW = int(time.time())
CLAIMS: dict[str, Any] = {
    "iss": "https://login.example.com/72f988bf/v2.0",
    "sub": "bench",
    "aud": "https://mcp.example.com/mcp",
    "exp": NOW + 3600,
    "iat": NOW,
    "nbf": NOW,
    "jti": "Yk3b9Q2pTfu1xMHq0sKZ4A",
    "client_id": "bench-client",
    "azp": "bench-client",
    "scope": "mcp:access docs:read tickets:write",
    "tid": "72f988bf-86f1-41af-91ab-2d7cd011db47",
    "oid": "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0",
    "name": "Bench User",
    "preferred_username": "bench@example.com",
    "email": "bench@example.com",
    "ver": "2.0",
    "amr": ["pwd", "mfa"],
    "groups": [f"g-{i:02d}-platform" for i in range(11)] + ["sre"],
    "roles": ["Tickets.Write", "Docs.Read", "Ops.Restart"],
    "uti": "AbCdEfGhIjKlMnOp",
}
ARGUMENTS = {"text": "hello from the benchmark"}
QUESTION = AccessQuestion("tools/call", "echo", None, ARGUMENTS)
"""Built once, as a route builds its question once per call."""


def principal() -> Principal:
    return Principal(
        subject="bench",
        client_id="bench-client",
        scopes=frozenset({"mcp:access", "docs:read", "tickets:write"}),
        expires_at=NOW + 3600.0,
        issuer=CLAIMS["iss"],
        fingerprint="0123456789ab",
        auth_method="jwt",
        claims=frozen_claims(CLAIMS),
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--number", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        with_when = Path(work) / "when.yaml"
        with_when.write_text(policy(1, when=CONDITIONS))
        token_only = Path(work) / "token.yaml"
        token_only.write_text(policy(1, when=CONDITIONS[:1]))
        conditioned, tokened = load_policy([with_when]), load_policy([token_only])
    who = principal()

    number: int = args.number
    repeat: int = args.repeat

    def best(run: Any) -> float:
        return min(timeit.repeat(run, number=number, repeat=repeat)) / number * 1e6

    def ladder() -> None:
        conditioned.decide_tool(who, "echo")

    def ladder_and_conditions() -> None:
        conditioned.decide_tool(who, "echo")
        assert conditioned.decide_conditions(who, QUESTION) is None

    def token_condition() -> None:
        tokened.decide_conditions(who, QUESTION)

    def first_call() -> None:
        conditioned.decide_conditions(principal(), QUESTION)

    print(f"python {platform.python_version()} on {platform.machine()}; conditions {CONDITIONS}")
    base = best(ladder)
    full = best(ladder_and_conditions)
    print(f"  decide_tool (the ladder)               {base:8.2f} µs")
    print(f"  ladder + both conditions                {full:8.2f} µs")
    print(f"  => the conditions cost per call         {full - base:8.2f} µs")
    print(f"  the token-only condition alone          {best(token_condition):8.2f} µs")
    once = min(timeit.repeat(first_call, number=200, repeat=repeat)) / 200 * 1e6
    print(f"  a new principal's first call            {once:8.2f} µs")


if __name__ == "__main__":
    main()
