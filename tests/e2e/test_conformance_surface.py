"""The official MCP conformance suite (``@modelcontextprotocol/conformance``) through the gateway.

The suite's 2026-07-28 server scenarios for prompts, resources, completions and caching run
against the gateway fronting the official SDK's ``MCPServer`` holding the fixtures those
scenarios read, as their descriptions specify (``sdk_upstream(conformance=True)``). The
suite cannot send a bearer token, so a loopback forwarder adds one minted by the dev issuer (the
gateway still authenticates and authorizes every request, under a policy with a rule per
fixture).

Runs when the pinned npm package is installed (``npm ci --prefix tests/interop/conformance``,
as ``.ci/run`` does, which also requires it; :mod:`tests.support.conformance_suite`); skipped
otherwise. ``MCP_GATEWAY_CONFORMANCE_SCENARIOS`` overrides the scenarios (space separated).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.conformance_suite import INSTALLED, run_scenario
from tests.support.live_stack import MakeStack, ServerFactory
from tests.support.policy import policy_text
from tests.support.sdk_upstream import sdk_upstream

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not INSTALLED,
        reason="the conformance suite is not installed (npm ci --prefix tests/interop/conformance)",
    ),
]


POLICY = policy_text(
    tools={"*": ""},
    prompts={"test_*": ""},
    resources={
        "test://static-text": "",
        "test://static-binary": "",
        "test://template/**": "",
        "test://nonexistent-resource-for-conformance-testing": "",
    },
)

SCENARIOS = tuple(
    os.environ.get(
        "MCP_GATEWAY_CONFORMANCE_SCENARIOS",
        "caching resources-list resources-read-text resources-read-binary "
        "resources-templates-read sep-2164-resource-not-found prompts-list prompts-get-simple "
        "prompts-get-with-args prompts-get-embedded-resource prompts-get-with-image "
        "completion-complete",
    ).split()
)
"""Every 2026-07-28 server scenario about prompts, resources, completion and caching (and,
below, the 2025-11-25 session lifecycle)."""


@pytest.mark.parametrize(
    ("scenario", "version"),
    [*((s, None) for s in SCENARIOS), ("server-session-lifecycle", "2025-11-25")],
)
async def test_the_conformance_scenario_passes_through_the_gateway(
    tmp_path: Path,
    aiohttp_server: ServerFactory,
    make_stack: MakeStack,
    scenario: str,
    version: str | None,
) -> None:
    """``version``: the wire the suite speaks (its default when None). On 2025-11-25 the
    session lifecycle: the gateway mints a session (the caller hears the tools'
    ``list_changed``), and after ``DELETE`` a request with that id is 404."""
    async with (
        sdk_upstream(conformance=True) as sdk,
        make_stack(backend_url=sdk.url, policy=POLICY) as stack,
    ):
        token = stack.token("mcp:access")
        run = await run_scenario(
            tmp_path,
            aiohttp_server,
            target=stack.server.mcp_url,
            token=token,
            scenario=scenario,
            version=version,
        )
    text = run.printed
    assert token not in text
    assert run.checks, text
    assert run.with_status("FAILURE") == [], text
    if version is not None:  # a session was minted and ended: not skipped as stateless
        assert "server-session-terminated-returns-404" in run.passed, text
