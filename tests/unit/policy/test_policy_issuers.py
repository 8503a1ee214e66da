"""Whose names a rule's ``subjects`` and ``clients`` are (gateway/policy/issuers.py, issue 43
item 5): a plain entry is the first configured issuer's, a qualified one the named issuer's."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.errors import ConfigError
from gateway.policy.warnings import issuer_warnings
from tests.support.policy import ISSUER, policy_from, who

OTHER = "https://other.example.com"
POLICY = f"""
version: 1
baseline_scopes: [mcp:access]
tools:
  "admin_*": {{scopes: [admin], clients: [ops-console, cli]}}
  "me_*": {{scopes: [], subjects: ["*@example.com", alice]}}
  shared:
    scopes: []
    subjects: [alice, {{issuer: "{OTHER}", subject: "b*"}}]
    clients: [cli, {{issuer: "{OTHER}", client: partner-app}}]
"""


def decision(tmp_path: Path, tool: str, *, issuers: tuple[str, ...], **principal: str) -> str:
    policy = policy_from(POLICY, tmp_path, issuers=issuers)
    return policy.decide_tool(who("mcp:access admin", **principal), tool).reason


@pytest.mark.parametrize(
    ("tool", "principal", "reason"),
    [
        ("admin_reset", {"client_id": "ops-console"}, "allow"),
        ("admin_reset", {"client_id": "ops-console", "issuer": OTHER}, "client"),
        ("me_x", {"sub": "alice"}, "allow"),
        ("me_x", {"sub": "alice", "issuer": OTHER}, "subject"),
        ("me_x", {"sub": "carol@example.com", "issuer": OTHER}, "subject"),
        ("shared", {"sub": "alice", "client_id": "cli"}, "allow"),
        ("shared", {"sub": "bob", "client_id": "partner-app", "issuer": OTHER}, "allow"),
        ("shared", {"sub": "bob", "client_id": "cli", "issuer": OTHER}, "client"),
        ("shared", {"sub": "alice", "client_id": "partner-app", "issuer": OTHER}, "subject"),
        ("shared", {"sub": "bob", "client_id": "cli"}, "subject"),  # the first issuer's bob
    ],
)
def test_each_entry_admits_the_names_of_one_issuer(
    tmp_path: Path, tool: str, principal: dict[str, str], reason: str
) -> None:
    assert decision(tmp_path, tool, issuers=(ISSUER, OTHER), **principal) == reason


def test_a_single_issuer_reads_plain_entries_exactly_as_before(tmp_path: Path) -> None:
    assert decision(tmp_path, "me_x", issuers=(ISSUER,), sub="alice") == "allow"
    assert decision(tmp_path, "admin_x", issuers=(ISSUER,), client_id="cli") == "allow"
    # The version of a policy of plain entries is the one it had before entries named issuers.
    plain = POLICY.split("  shared:", maxsplit=1)[0]
    assert policy_from(plain, tmp_path).version == "26ac4033f91f"


def test_without_configured_issuers_a_plain_entry_admits_nobody(tmp_path: Path) -> None:
    assert decision(tmp_path, "me_x", issuers=(), sub="alice") == "subject"
    assert decision(tmp_path, "admin_x", issuers=(), client_id="cli") == "client"


def test_the_version_covers_the_entries_as_written(tmp_path: Path) -> None:
    one = policy_from(POLICY, tmp_path / "a", issuers=(ISSUER, OTHER))
    same = policy_from(POLICY, tmp_path / "b", issuers=(OTHER, ISSUER))  # configuration only
    assert one.version == same.version
    moved = POLICY.replace(f'issuer: "{OTHER}", subject', 'issuer: "https://x", subject')
    assert policy_from(moved, tmp_path / "c").version != one.version


def test_a_qualified_entry_is_checked_like_a_plain_one(tmp_path: Path) -> None:
    bad = POLICY.replace('subject: "b*"', 'subject: "b[0]"').replace(
        "client: partner-app", "client: partner-app, extra: 1"
    )
    with pytest.raises(ConfigError) as raised:
        policy_from(bad, tmp_path)
    problems = "\n".join(raised.value.problems)
    assert "tools.shared.subjects[1]: character classes ([...]) are not supported" in problems
    assert "tools.shared.clients[1]" in problems


def test_warnings_name_plain_entries_under_several_issuers_and_unknown_issuers(
    tmp_path: Path,
) -> None:
    assert issuer_warnings(policy_from(POLICY, tmp_path, issuers=(ISSUER, OTHER + "/"))) == [
        f"{tmp_path / 'policy.yaml'}:4:3: tools.admin_*: client 'ops-console', client 'cli' "
        f"name no issuer, so they apply to the first issuer only ({ISSUER}) of the 2 "
        "configured; write {issuer: <url>, client: ...} to say whose",
        f"{tmp_path / 'policy.yaml'}:5:3: tools.me_*: subject '*@example.com', subject 'alice' "
        f"name no issuer, so they apply to the first issuer only ({ISSUER}) of the 2 "
        "configured; write {issuer: <url>, subject: ...} to say whose",
        f"{tmp_path / 'policy.yaml'}:6:3: tools.shared: client 'cli', subject 'alice' name no "
        f"issuer, so they apply to the first issuer only ({ISSUER}) of the 2 configured; write "
        "{issuer: <url>, client: ...} to say whose",
        f"{tmp_path / 'policy.yaml'}:8:23: tools.shared.subjects: issuer {OTHER} is not "
        f"configured (did you mean {OTHER}/? issuers are compared exactly): 'b*' applies to "
        "no caller",
        f"{tmp_path / 'policy.yaml'}:9:20: tools.shared.clients: issuer {OTHER} is not "
        f"configured (did you mean {OTHER}/? issuers are compared exactly): 'partner-app' "
        "applies to no caller",
    ]
    # One issuer: plain entries are unambiguous; nothing to say.
    plain = POLICY.split("  shared:", maxsplit=1)[0]
    assert issuer_warnings(policy_from(plain, tmp_path)) == []
