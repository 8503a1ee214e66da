"""``policy_external`` in a real ``mcp-gateway serve`` process (one worker and a group of two).

``serve`` builds its services before the event loop runs, unlike the in-process test stacks; a
decision point wired too eagerly fails there at startup. Here the real command starts, asks the
tests' AuthZEN server (with the file credential) after the local policy allowed, serves the
allowed call and refuses the other with 403 ``external_policy_denied``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.authzen_pdp import EVALUATION_PATH, AuthZenPdp
from tests.support.live_stack import ServerFactory
from tests.support.mcp_client import McpAt
from tests.support.serve_process import served_gateway, workers
from tests.support.upstreams import ModernUpstream, echo_tool

pytestmark = pytest.mark.slow

PDP_SECRET = "pdp-process-credential"


@pytest.mark.parametrize("count", [1, 2])
async def test_serve_starts_with_a_decision_point_and_asks_it(
    tmp_path: Path, aiohttp_server: ServerFactory, count: int
) -> None:
    upstream = ModernUpstream(tools=[echo_tool("echo"), echo_tool("danger")])
    backend = await aiohttp_server(upstream.app())
    pdp = AuthZenPdp(
        rule=lambda body: body["resource"]["id"] != "danger", credential=f"Bearer {PDP_SECRET}"
    )
    pdp_server = await aiohttp_server(pdp.app())
    (tmp_path / "pdp-token").write_text(PDP_SECRET + "\n")
    external = {
        "url": str(pdp_server.make_url(EVALUATION_PATH)),
        "allow_insecure_http": True,
        "credential": {"type": "bearer", "token": {"file": "pdp-token"}},
    }
    backend_url = str(backend.make_url("/mcp"))
    async with served_gateway(
        tmp_path, backend_url, *workers(count), policy_external=external
    ) as served:
        await served.ready()
        async with McpAt(served.mcp_url) as client:
            answers = {
                tool: await client.call(served.token(), tool, {"text": "x"})
                for tool in ("echo", "danger")
            }
        errors = await served.terminated()
    assert answers["echo"][0] == 200, answers
    assert answers["danger"][0] == 403
    assert json.loads(answers["danger"][2])["error"]["code"] == -31403
    assert [seen.headers["Authorization"] for seen in pdp.seen] == [f"Bearer {PDP_SECRET}"] * 2
    assert [r.json["params"]["name"] for r in upstream.calls("tools/call")] == ["echo"]
    assert "Traceback" not in errors, errors
