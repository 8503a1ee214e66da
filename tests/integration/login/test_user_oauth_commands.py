"""The operators' and the headless person's commands of per-user upstream authorization (issue 45):
``mcp-gateway upstream-tokens list|purge`` (the ops listener's admin API) and ``mcp-gateway
connect`` (a consent link for a terminal, polled until the person connected), against the
running production gateway."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from gateway.commands.cli import main
from tests.support.login_stack import HttpBrowser
from tests.support.user_oauth_stack import (
    ADMIN_TOKEN,
    UPSTREAM_USERS,
    WHOAMI,
    UserOAuthStack,
    connect,
    connected,
)


async def run(
    argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> tuple[int, str, str]:
    monkeypatch.setenv("MCP_GATEWAY_ADMIN_TOKEN", ADMIN_TOKEN)
    code = await asyncio.to_thread(main, argv)
    out, err = capsys.readouterr()
    return code, out, err


async def test_operators_list_and_purge_records_never_seeing_a_token(
    stack: UserOAuthStack,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    await connected(stack, "alice", UPSTREAM_USERS[0])
    await connected(stack, "bob", UPSTREAM_USERS[1])
    ops = stack.stack.server.ops_url
    code, out, _ = await run(["upstream-tokens", "list", "--url", ops], capsys, monkeypatch)
    assert code == 0
    lines = sorted(line for line in out.splitlines() if line.startswith("accounts\t"))
    assert len(lines) == 2 and lines[0].startswith(f"accounts\t{stack.login.issuer.url}\talice")
    assert "\tconnected\t" in lines[0] and f"server={stack.upstream.url}" in lines[0]
    for call in stack.accounts.calls:
        assert call.token not in out
    record = await stack.record("alice")
    assert record is not None and record.refresh_token is not None
    assert record.refresh_token not in out and record.access_token not in out  # type: ignore[operator]
    code, out, _ = await run(
        [
            "upstream-tokens",
            "list",
            "--url",
            ops,
            "--json",
            "--backend",
            "accounts",
            "--issuer",
            stack.login.issuer.url,
            "--subject",
            "bob",
        ],
        capsys,
        monkeypatch,
    )
    (answer,) = [line for line in out.splitlines() if line.startswith('{"records"')]
    (only,) = json.loads(answer)["records"]
    assert (only["subject"], only["state"]) == ("bob", "connected")
    code, out, _ = await run(
        [
            "upstream-tokens",
            "purge",
            "--url",
            ops,
            "--issuer",
            stack.login.issuer.url,
            "--subject",
            "alice",
        ],
        capsys,
        monkeypatch,
    )
    assert code == 0 and "purged 1 record(s)" in out.splitlines()
    assert await stack.record("alice") is None and await stack.record("bob") is not None
    # Alice is asked to connect again; Bob's calls go on.
    _, _, text = await stack.stack.call(stack.token("alice"), WHOAMI)
    assert json.loads(text)["result"]["isError"] is True
    _, _, text = await stack.stack.call(stack.token("bob"), WHOAMI)
    assert json.loads(text)["result"]["structuredContent"]["sub"] == UPSTREAM_USERS[1]
    code, out, _ = await run(
        ["upstream-tokens", "purge", "--url", ops, "--backend", "accounts"], capsys, monkeypatch
    )
    assert code == 0 and "purged 1 record(s)" in out.splitlines()
    events = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    purges = [e for e in events if e["event"] == "upstream_tokens_purged"]
    assert [e["count"] for e in purges] == [1, 1] and purges[0]["subject"] == "alice"
    code, _, err = await run(["upstream-tokens", "purge", "--url", ops], capsys, monkeypatch)
    assert code == 2 and "name a --backend" in err


async def test_the_admin_api_refuses_a_wrong_credential_and_an_unreadable_body(
    stack: UserOAuthStack,
) -> None:
    url = stack.stack.server.ops_url + "/admin/upstream-tokens/purge"
    session = stack.stack.session

    async def post(body: Any, token: str = ADMIN_TOKEN) -> int:
        headers = {"Authorization": f"Bearer {token}"}
        async with session.post(url, json=body, headers=headers) as response:
            return response.status

    assert await post({"backend": "accounts"}, token="c" * 40) == 401
    assert await post({}) == 400
    assert await post({"issuer": "https://id.example.com"}) == 400  # a person needs both
    assert await post({"backend": 7}) == 400
    assert await post(["accounts"]) == 400


async def test_connect_from_a_terminal_prints_a_link_and_waits_for_the_person(
    stack: UserOAuthStack,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.setattr("gateway.commands.connect_command.POLL_S", 0.1)
    token_file = tmp_path / "token"
    token_file.write_text(stack.token("carol"))
    argv = ["connect", "accounts", "--url", stack.stack.mcp_url, "--token-file", str(token_file)]
    running = asyncio.create_task(asyncio.to_thread(main, argv))
    link = ""
    printed = ""
    while "/connect/" not in printed:  # a readiness poll of the command's output
        await asyncio.sleep(0.05)
        printed += capsys.readouterr().out
        assert not running.done(), printed
    link = next(word for word in printed.split() if "/connect/" in word)
    assert link.startswith(stack.login.url("/connect/"))
    async with aiohttp.ClientSession() as session:
        await connect(HttpBrowser(session, stack.login.origin), stack, link, person="carol")
    assert await asyncio.wait_for(running, 10) == 0
    assert "Connected." in capsys.readouterr().out
    code, out, _ = await run(argv, capsys, monkeypatch)
    assert code == 0 and "already connected" in out


async def test_the_connect_api_takes_only_a_valid_mcp_token(stack: UserOAuthStack) -> None:
    url = stack.login.url("/connections/api/accounts")
    session = stack.stack.session
    async with session.post(url, json={"link": True}) as response:
        assert response.status == 401 and "Bearer" in response.headers["WWW-Authenticate"]
    headers = {"Authorization": "Bearer not-a-token"}
    async with session.post(url, json={"link": True}, headers=headers) as response:
        assert response.status == 401
    headers = {"Authorization": f"Bearer {stack.token('alice')}"}
    async with session.post(url, json={"link": "yes", "x": 1}, headers=headers) as response:
        assert response.status == 400
    async with session.post(url, json={}, headers=headers) as response:
        assert response.status == 200 and await response.json() == {
            "backend": "accounts",
            "state": "missing",
        }
    unknown = stack.login.url("/connections/api/nothing")
    async with session.post(unknown, json={}, headers=headers) as response:
        assert response.status == 404
