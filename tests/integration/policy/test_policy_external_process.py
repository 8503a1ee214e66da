"""``policy_external`` in a real ``mcp-gateway serve`` process (one worker and a group of two).

``serve`` builds its services before the event loop runs, unlike the in-process test stacks; a
decision point wired too eagerly fails there at startup. Here the real command starts, asks the
tests' AuthZEN server (with the file credential) after the local policy allowed, serves the
allowed call and refuses the other with 403 ``external_policy_denied``.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from aiohttp.test_utils import TestServer

from gateway.dev.dev_issuer import DevIssuer
from tests.support.authzen_pdp import EVALUATION_PATH, AuthZenPdp
from tests.support.mcp_client import McpAt
from tests.support.ports import free_port
from tests.support.serve_process import gateway_config, serve_process, write_config
from tests.support.upstreams import ModernUpstream, echo_tool

pytestmark = pytest.mark.slow

RESOURCE = "https://mcp.example.test/mcp"
SECRET = "pdp-process-introspection-secret"
PDP_SECRET = "pdp-process-credential"


@pytest.mark.parametrize("workers", [1, 2])
async def test_serve_starts_with_a_decision_point_and_asks_it(tmp_path: Path, workers: int) -> None:
    upstream = ModernUpstream(
        accepted={"svc-token"}, tools=[echo_tool("echo"), echo_tool("danger")]
    )
    backend = TestServer(upstream.app(), host="127.0.0.1")
    await backend.start_server()
    pdp = AuthZenPdp(
        rule=lambda body: body["resource"]["id"] != "danger", credential=f"Bearer {PDP_SECRET}"
    )
    pdp_server = TestServer(pdp.app(), host="127.0.0.1")
    await pdp_server.start_server()
    issuer = DevIssuer(resources=[RESOURCE])
    await issuer.start()
    issuer.register_client("mcp-gateway", SECRET, can_introspect=True)
    token = issuer.mint_token(sub="alice", scopes="mcp:access", audience=RESOURCE)
    port, ops_port = free_port(), free_port()  # a group of workers logs no single address
    (tmp_path / "svc").write_text("svc-token")
    (tmp_path / "pdp-token").write_text(PDP_SECRET + "\n")
    config = gateway_config(
        issuer_url=issuer.url,
        backend_url=str(backend.make_url("/mcp")),
        secret={"env": "PDP_GW_SECRET"},
        credential={"file": "svc"},
        resource=RESOURCE,
        port=port,
        ops_port=ops_port,
        policy_external={
            "url": str(pdp_server.make_url(EVALUATION_PATH)),
            "allow_insecure_http": True,
            "credential": {"type": "bearer", "token": {"file": "pdp-token"}},
        },
    )
    serving = serve_process(
        write_config(tmp_path, config),
        "--workers",
        str(workers),
        *(["--event-loop", "asyncio"] if workers > 1 else []),
        env={"PDP_GW_SECRET": SECRET},
    )
    try:
        async with serving as gw:
            await gw.until_ready(f"http://127.0.0.1:{ops_port}")
            async with McpAt(f"http://127.0.0.1:{port}/mcp") as client:
                answers = {
                    tool: await client.call(token, tool, {"text": "x"})
                    for tool in ("echo", "danger")
                }
            gw.process.terminate()
            await asyncio.wait_for(gw.process.wait(), 30)
            errors = await gw.errors()
        assert answers["echo"][0] == 200, answers
        assert answers["danger"][0] == 403
        assert json.loads(answers["danger"][2])["error"]["code"] == -31403
        assert [seen.headers["Authorization"] for seen in pdp.seen] == [f"Bearer {PDP_SECRET}"] * 2
        assert [r.json["params"]["name"] for r in upstream.calls("tools/call")] == ["echo"]
    finally:
        await issuer.stop()
        await backend.close()
        await pdp_server.close()
    assert "Traceback" not in errors, errors
