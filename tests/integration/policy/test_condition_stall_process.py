"""One request must not stall a replica through a ``when:`` condition (issue 43 item 1).

A red team held a replica's event loop for about 35 s with a 5.7 KB request against a condition
``check`` accepted (a glob with three stars over an argument was quartic in the argument's
length; nested comprehensions cubic): ``/healthz`` on the ops listener stopped answering. Here a
real ``mcp-gateway serve`` process gets such a request (~6 KB); while it is in flight the ops
listener and another caller must answer within 5 s, and the crafted call is denied (403,
audited). Arguments larger than a condition may read are refused before it runs (400). The
nested-comprehension forms are refused by ``check`` itself (tests/unit/policy/
test_condition_cost.py), so they cannot reach a replica.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

from tests.support.replicas import replica_stack

POLICY = """\
version: 1
baseline_scopes: [mcp:access]
tools:
  echo:
    scopes: []
    when: 'glob(arguments.text, "*a*a*a*b")'
  hold:
    scopes: []
    when: 'arguments.hosts.all(h, h != "prod")'
"""
ANSWER_S = 5.0
"""How long the ops listener and another caller may take while the crafted call runs."""


async def test_a_crafted_argument_neither_stalls_the_replica_nor_passes(tmp_path: Path) -> None:
    async with replica_stack(tmp_path, None, replicas=1, policy=POLICY, hold_s=0.01) as stack:
        [replica] = stack.replicas
        attacker, other = stack.mint("mallory"), stack.mint("bob")
        crafted = "a" * 6000  # no "b": every placement of the three stars fails
        call = asyncio.ensure_future(stack.call(replica, attacker, "echo", text=crafted))
        answered = 0
        while not call.done():  # the ops listener answers all along
            async with asyncio.timeout(ANSWER_S):
                async with stack.session.get(replica.ops_url + "/healthz") as response:
                    assert response.status == 200
            answered += 1
            async with asyncio.timeout(ANSWER_S):
                status, payload, _ = await stack.call(replica, other, "echo", text="a.a.a.b")
            assert status == 200, payload
            await asyncio.wait({call}, timeout=0.05)
        status, payload, headers = await call
        assert answered >= 1
        assert status == 403, payload
        assert payload["error"]["data"] == {"rule": "echo"}
        assert "WWW-Authenticate" not in headers

        # 1,000 values (~5 KB): more than a condition may be given, refused before it runs.
        status, payload, _ = await stack.call(replica, attacker, "hold", hosts=["h"] * 1000)
        assert status == 400, payload
        assert payload["error"]["code"] == -32602
        assert payload["error"]["data"] == {"rule": "hold"}
        sent = [r.json["params"]["name"] for r in stack.upstream.calls("tools/call") if r.json]
        assert sent.count("hold") == 0 and sent.count("echo") >= 1
        deadline = time.monotonic() + ANSWER_S
        while len(denied := _audited(replica.log(), "mallory")) < 2:  # written after the answer
            assert time.monotonic() < deadline, denied
            await asyncio.sleep(0.02)
        log = replica.log()
    for secret in (attacker, other, crafted):  # no token, no argument value in any line
        assert secret not in log
    assert [(e["tool"], e["error_row"], e.get("condition")) for e in denied] == [
        ("echo", "condition_denied", "false"),
        ("hold", "condition_arguments_too_large", None),
    ], denied


def _audited(log: str, subject: str) -> list[dict[str, Any]]:
    """The audit events of ``subject`` in a replica's log (audit.sink: stdout)."""
    events = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    return [e for e in events if e.get("log") == "audit" and e["subject"] == subject]
