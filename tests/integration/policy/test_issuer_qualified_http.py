"""Two issuers, one ``alice`` each (issue 43, item 5): a subject is a name its issuer gives.

Two real development issuers behind one gateway (``issuers:``), each minting tokens for a
subject ``alice`` and a client ``ops-console``. Through HTTP: per-subject limits count each
issuer's ``alice`` apart.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gateway.dev.issuer import DevIssuer
from tests.support.live_stack import (
    LiveStack,
    ServerFactory,
    issuer_entries,
    live_stack,
    other_issuer,
)

SCOPES = "mcp:access tools:echo"


@dataclass
class TwoIssuers:
    stack: LiveStack
    other: DevIssuer

    def first(self, sub: str = "alice", client_id: str = "ops-console") -> str:
        """A token of the first issuer (``issuers[0]``)."""
        return self.stack.token(SCOPES, sub=sub, client_id=client_id)

    def second(self, sub: str = "alice", client_id: str = "ops-console") -> str:
        """A token of the second issuer, for the same names."""
        return self.other.mint_token(
            sub=sub, client_id=client_id, scopes=SCOPES, audience=self.stack.config.resource
        )


@contextlib.asynccontextmanager
async def two_issuers(
    tmp_path: Path,
    aiohttp_server: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
    policy: str,
    **gateway: Any,
) -> AsyncIterator[TwoIssuers]:
    async with other_issuer(monkeypatch) as other:
        first, second = issuer_entries(other)
        async with live_stack(
            tmp_path, aiohttp_server, monkeypatch, policy=policy,
            gateway={"issuer": None, "issuers": [first, second], **gateway},
        ) as stack:  # fmt: skip
            yield TwoIssuers(stack, other)


@pytest.mark.row("rate_limited")
@pytest.mark.parametrize(
    ("rule", "limits"),
    [("rate_limit: 1/minute", {}), ("description: none", {"principal_rate": "1/minute"})],
    ids=["rule_rate_limit", "limits.principal_rate"],
)
async def test_per_subject_limits_count_each_issuers_alice_apart(
    tmp_path: Path,
    aiohttp_server: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
    rule: str,
    limits: dict[str, str],
) -> None:
    policy = f"""
version: 1
baseline_scopes: [mcp:access]
tools:
  echo: {{scopes: [tools:echo], {rule}}}
"""
    async with two_issuers(tmp_path, aiohttp_server, monkeypatch, policy, limits=limits) as two:
        stack = two.stack
        assert (await stack.call(two.first()))[0] == 200
        status, headers, _ = await stack.call(two.first())
        assert status == 429 and int(headers["Retry-After"]) > 0  # the first alice's budget
        status, _, text = await stack.call(two.second())
        assert status == 200, text  # the second issuer's alice has a budget of her own
        assert (await stack.call(two.second()))[0] == 429
