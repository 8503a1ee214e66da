"""``policy explain`` shows each ``when:`` condition of an explained rule, where it is decided
(listing or call) and its result for a token file's claims and ``--arguments`` (issue 25)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gateway.commands.cli import main
from tests.support.policy import write_text
from tests.unit.policy.test_policy_explain_token import ENTRA, compact, config, entra_claims

__all__ = ["config"]  # the fixture, shared with the token-file tests

POLICY = """
version: 1
baseline_scopes: [mcp:access]
tools:
  restart_service:
    scopes: [notes:read]
    when:
      - 'has(claims.groups) && "sre" in claims.groups'
      - 'arguments.env != "prod"'
      - 'claims.department == "ops"'
  deploy: {scopes: [], when: 'arguments.env != "prod"'}
  reports: {scopes: [], when: 'claims.tid == "t-2"'}
prompts:
  brief: {scopes: [], when: 'claims.tid == "t-1"'}
"""


@pytest.fixture(autouse=True)
def _policy_and_logging(config: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_text(config.parent / "policies" / "main.yaml", POLICY)
    monkeypatch.setattr("gateway.commands.cli.configure", lambda *args, **kwargs: None)


def _explain(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], *argv: str
) -> tuple[int, str, str]:
    token = tmp_path / "token.jwt"
    token.write_text(compact(entra_claims(groups=["sre"], tid="t-1", secret="k3ep-0ut")) + "\n")
    code = main(["policy", "explain", "--config", str(config), "--token-file", str(token), *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_each_condition_with_where_it_is_decided_and_its_result(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _explain(config, tmp_path, capsys, "--tool", "restart_service")
    assert code == 0, err
    where = f"{config.parent / 'policies' / 'main.yaml'}"
    assert [line for line in out.splitlines() if line.startswith("condition:")] == [
        "condition: restart_service: true (listing) "
        f'has(claims.groups) && "sre" in claims.groups  [{where}:7:9]',
        "condition: restart_service: not evaluated: needs --arguments (call) "
        f'arguments.env != "prod"  [{where}:8:9]',
        "condition: restart_service: error: no such key 'department' (use has()) (listing) "
        f'claims.department == "ops"  [{where}:9:9]',
    ]
    code, out, err = _explain(
        config,
        tmp_path,
        capsys,
        "--tool",
        "restart_service",
        "--arguments",
        '{"env": "prod"}',
        "--json",
    )
    assert code == 0, err
    shown = json.loads(out)["results"][0]["conditions"]
    assert [c["result"] for c in shown] == [
        "true",
        "false",
        "error: no such key 'department' (use has())",
    ]
    assert [c["decided_at"] for c in shown] == ["listing", "call", "listing"]
    assert shown[1]["reads"] == ["arguments"]
    assert "k3ep-0ut" not in out  # a claim value is never printed


def test_prompt_rules_show_their_conditions_under_all(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _explain(config, tmp_path, capsys, "--all")
    assert code == 0, err
    assert 'condition: brief: true (listing) claims.tid == "t-1"' in out
    assert f"token: issuer {ENTRA}" in out


def test_arguments_must_be_a_json_object(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for bad, message in (("[1]", "must be a JSON object"), ("{", "not JSON")):
        code, _, err = _explain(config, tmp_path, capsys, "--all", "--arguments", bad)
        assert code == 1 and message in err


def test_a_condition_that_refuses_makes_the_decision_denied_and_the_tool_unlisted(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Issue 43: explain said allow and listed: true for a tool whose when: was false for the
    # token, though the gateway hides it from tools/list and refuses the call (403).
    code, out, err = _explain(config, tmp_path, capsys, "--all", "--json")
    assert code == 0, err
    rows = {row["name"]: row for row in json.loads(out)["results"]}
    assert {
        name: (row["decision"], row["reason"], row["listed"]) for name, row in rows.items()
    } == {
        "restart_service": ("denied", "condition_error", False),  # no department claim
        "reports": ("denied", "condition", False),  # tid is t-1
        "deploy": ("allow", "allow", True),  # reads the arguments: decided at the call
    }
    assert rows["reports"]["allowed"] is False and rows["reports"]["visible"] is True
    code, out, err = _explain(
        config, tmp_path, capsys, "--tool", "deploy", "--arguments", '{"env": "prod"}', "--json"
    )
    assert code == 0, err
    (row,) = json.loads(out)["results"]
    # Refused at the call, still listed: tools/list decides no condition that reads arguments.
    assert (row["decision"], row["reason"], row["listed"]) == ("denied", "condition", True)
    code, out, err = _explain(config, tmp_path, capsys, "--tool", "reports")
    assert code == 0, err
    assert "reports  denied    reports  condition  -" in out.splitlines()
