"""The production gateway with approval rules (docs/policy.md#approvals), its login surface and
the people who approve.

``async with approval_stack(tmp_path, aiohttp_server, monkeypatch) as stack`` is the login
stack (:mod:`tests.support.login_stack`: ``alice``, ``bob``, ``carol`` at the development
issuer, whose ID tokens give ``bob`` the group ``payments``) with an upstream serving ``echo``
(no approval), ``wipe`` (``by: self``, ``secret`` redacted) and ``pay`` (``by: {claim: groups,
value: payments}``), and ``approvals.wait_s`` short. :func:`decide` is a person's decision
through the HTTP browser: sign in, open the page, press the button.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pytest

from gateway.approvals.desk import ApprovalDesk
from tests.support.live_stack import ServerFactory
from tests.support.login_stack import HttpBrowser, LoginStack, hidden_fields, login_stack, sign_in
from tests.support.upstreams import ModernUpstream, echo_tool

__all__ = [
    "APPROVAL_KEY",
    "POLICY",
    "URL_ELICITATION",
    "ApprovalStack",
    "approval_stack",
    "decide",
]

APPROVAL_KEY: Final = "mcp-gateway/approve"
URL_ELICITATION: Final[dict[str, Any]] = {"elicitation": {"url": {}}}
POLICY: Final = """\
version: 1
baseline_scopes: [mcp:access]
tools:
  echo: {scopes: []}
  wipe:
    scopes: []
    approval: {by: self, ttl_s: 60, preview: {redact: [secret]}}
  pay:
    scopes: []
    approval: {by: {claim: groups, value: payments}, ttl_s: 60}
"""


@dataclass
class ApprovalStack:
    login: LoginStack
    upstream: ModernUpstream

    def token(self, person: str) -> str:
        return self.login.stack.token(scopes="mcp:access", sub=person)

    def runs(self, tool: str) -> list[dict[str, Any]]:
        """The arguments of each call of ``tool`` that reached the upstream."""
        return [
            r.json["params"]["arguments"]
            for r in self.upstream.calls("tools/call")
            if r.json and r.json["params"]["name"] == tool
        ]

    @property
    def desk(self) -> ApprovalDesk:
        pages = self.login.surface._pages["approve"]  # the approval page's bound method
        desk: ApprovalDesk = pages.__self__._desk  # type: ignore[attr-defined]
        return desk

    async def call(self, person: str, tool: str, arguments: Mapping[str, Any]) -> Any:
        return await self.login.stack.call(
            self.token(person), tool, arguments, capabilities=URL_ELICITATION
        )

    async def retry(
        self,
        person: str,
        tool: str,
        arguments: Mapping[str, Any],
        state: str,
        answer: Mapping[str, Any] | None = None,
    ) -> Any:
        params = {
            "name": tool,
            "arguments": dict(arguments),
            "requestState": state,
            "inputResponses": {APPROVAL_KEY: dict(answer or {"action": "accept"})},
        }
        return await self.login.stack.modern(
            self.token(person), "tools/call", params, name=tool, capabilities=URL_ELICITATION
        )


@contextlib.asynccontextmanager
async def approval_stack(
    tmp_path: Path,
    aiohttp_server: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
    *,
    gateway: Mapping[str, Any] | None = None,
    **kw: Any,
) -> AsyncIterator[ApprovalStack]:
    upstream = ModernUpstream(
        tools=[echo_tool("echo"), echo_tool("wipe"), echo_tool("pay")], list_changed=True
    )
    keys = {"approvals": {"wait_s": 0.5}, **(gateway or {})}
    async with login_stack(
        tmp_path, aiohttp_server, monkeypatch, gateway=keys, policy=POLICY, upstream=upstream, **kw
    ) as stack:
        stack.issuer.person_claims["bob"] = {"groups": ["payments", "staff"]}
        stack.issuer.person_claims["carol"] = {"groups": ["staff"]}
        yield ApprovalStack(stack, upstream)


async def decide(
    browser: HttpBrowser, stack: ApprovalStack, url: str, person: str, decision: str = "approve"
) -> tuple[int, str]:
    """``person`` signs in (unless signed in already), opens the page and presses the button:
    the decision's status and page."""
    status, _, page = await browser.get(url)
    if status == 303:
        await sign_in(browser, stack.login, person)
        status, _, page = await browser.get(url)
    if status != 200:
        return status, page
    fields = hidden_fields(page)
    status, _, done = await browser.post(url, {"csrf": fields["csrf"], "decision": decision})
    return status, done
