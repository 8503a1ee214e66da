"""The conformance suite's ``tasks-*`` scenarios (the tasks extension, SEP-2663): directly against
the reference upstream, then through the gateway in front of it.

The official SDK has no server task support, so the reference is
:class:`~tests.support.task_upstream.TaskUpstream`, written to the extension's text with the
fixtures the scenarios name (``greet``, ``slow_compute``, ``failing_job``, ...). Each scenario
runs twice: straight at it (the reference passes, so a failure through the gateway is the
gateway's), then through the gateway with ``tasks:`` on and a policy that lets every fixture be
a task. The suite cannot send a bearer token; a loopback forwarder adds one
(:mod:`tests.support.conformance_suite`). ``tasks-status-notifications`` is a placeholder in
this suite version (one ``SKIPPED`` check, no ``FAILURE`` possible); it runs like the others.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.conformance_suite import INSTALLED, Run, run_scenario
from tests.support.live_stack import MakeStack, ServerFactory
from tests.support.task_stack import SCOPES, task_stack
from tests.support.task_upstream import TaskUpstream

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not INSTALLED,
        reason="the conformance suite is not installed (npm ci --prefix tests/interop/conformance)",
    ),
]

SCENARIOS = (
    "tasks-lifecycle",
    "tasks-capability-negotiation",
    "tasks-wire-fields",
    "tasks-request-state-removal",
    "tasks-mrtr-input",
    "tasks-mrtr-composition",
    "tasks-request-headers",
    "tasks-dispatch-and-envelope",
    "tasks-required-task-error",
    "tasks-status-notifications",
)


def assert_passed(run: Run) -> None:
    assert run.checks, run.printed
    assert run.with_status("FAILURE") == [], run.printed


@pytest.mark.parametrize("scenario", SCENARIOS)
async def test_the_reference_upstream_passes_the_scenario(
    tmp_path: Path, aiohttp_server: ServerFactory, scenario: str
) -> None:
    upstream = TaskUpstream()
    try:
        server = await aiohttp_server(upstream.app())
        run = await run_scenario(
            tmp_path,
            aiohttp_server,
            target=str(server.make_url("/mcp")),
            token="service-secret",
            scenario=scenario,
        )
    finally:
        await upstream.close()
    assert_passed(run)


@pytest.mark.parametrize("scenario", SCENARIOS)
async def test_the_scenario_passes_through_the_gateway(
    tmp_path: Path, aiohttp_server: ServerFactory, make_stack: MakeStack, scenario: str
) -> None:
    upstream = TaskUpstream()
    async with make_stack.of(task_stack, upstream=upstream) as stack:
        token = stack.token(SCOPES)
        run = await run_scenario(
            tmp_path,
            aiohttp_server,
            target=stack.server.mcp_url,
            token=token,
            scenario=scenario,
        )
    assert token not in run.printed
    assert_passed(run)
    # The client only ever saw handles: the upstream's ids stayed behind the gateway.
    assert "task-1" not in run.printed
