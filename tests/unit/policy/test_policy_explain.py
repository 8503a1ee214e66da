"""``mcp-gateway policy explain`` (text and --json) and ``mcp-gateway check`` on policies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gateway.commands.cli import main
from tests.support.policy import minimal_config, write_text

POLICY = """
version: 1
baseline_scopes: [mcp:access]
methods:
  tools/list: {scopes: [catalog:read]}
tools:
  search_docs: {scopes: [docs:read]}
  "admin_*": {scopes: [admin], clients: [ops-console]}
  "me_*": {scopes: [], subjects: ["*@example.com"]}
  create_ticket: {scopes: [tickets:write], any_of: [[team:a], [team:b]]}
"""

LEGEND = (
    "step-up = 403 insufficient_scope naming every scope the tool needs; "
    "denied = 403 condition_denied (a when: condition refuses; no step-up); "
    "hidden = answered like an unknown tool (-32602)"
)


@pytest.fixture(autouse=True)
def _keep_logging_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    """``main`` configures structlog globally, bound to the captured stdout of this test; later
    tests would then log into a closed stream. Logging is not under test here."""
    monkeypatch.setattr("gateway.commands.cli.configure", lambda *args, **kwargs: None)


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("EXPLAIN_SECRET", "s3cret")
    write_text(tmp_path / "policies" / "main.yaml", POLICY)
    return minimal_config(tmp_path / "gateway.yaml", "EXPLAIN_SECRET")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["policy", "explain", *argv])
    out, err = capsys.readouterr()
    return code, out, err


class TestText:
    def test_one_tool_needing_more_scopes_is_explained_as_step_up(
        self, config: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        code, out, err = run(
            capsys, "--config", str(config), "--scopes", "mcp:access", "--tool", "search_docs"
        )
        assert (code, err) == (0, "")
        lines = out.splitlines()
        assert lines[0].startswith("policy ") and lines[0].endswith(
            f"from {config.parent / 'policies' / 'main.yaml'}"
        )
        assert lines[1:] == [
            "principal: sub=- client_id=- issuer=https://id.example.com scopes=mcp:access",
            "",
            "TOOL         DECISION  RULE         REASON  MISSING SCOPES",
            "search_docs  step-up   search_docs  scope   docs:read",
            "",
            LEGEND,
        ]

    def test_all_without_a_catalog_lists_every_rule_key_and_the_methods(
        self, config: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        code, out, _ = run(
            capsys,
            "--config",
            str(config),
            "--scopes",
            "mcp:access docs:read admin",
            "--client-id",
            "cli",
            "--sub",
            "bob@example.com",
            "--all",
        )
        assert code == 0
        table = out.split("\n\n")[1:3]
        assert table == [
            "RULE KEY       DECISION  RULE           REASON  MISSING SCOPES\n"
            "create_ticket  step-up   create_ticket  scope   tickets:write team:a\n"
            "search_docs    allow     search_docs    allow   -\n"
            "admin_*        hidden    admin_*        client  -\n"
            "me_*           allow     me_*           allow   -",
            "METHOD           DECISION  RULE        REASON  MISSING SCOPES\n"
            "server/discover  allow     -           allow   -\n"
            "tools/list       step-up   tools/list  scope   catalog:read\n"
            "who: admin_*: clients 'ops-console' of the first issuer (https://id.example.com)\n"
            "who: me_*: subjects '*@example.com' of the first issuer (https://id.example.com)",
        ]

    def test_a_catalog_file_is_explained_tool_by_tool_with_warnings(
        self, config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        catalog = tmp_path / "tools.json"
        catalog.write_text(
            json.dumps({"tools": [{"name": "search_docs"}, {"name": "admin_reset"}, {"name": "x"}]})
        )
        code, out, _ = run(
            capsys,
            "--config",
            str(config),
            "--scopes",
            "mcp:access admin",
            "--client-id",
            "ops-console",
            "--all",
            "--catalog-file",
            str(catalog),
        )
        assert code == 0
        assert (
            "TOOL         DECISION  RULE         REASON   MISSING SCOPES\n"
            "admin_reset  allow     admin_*      allow    -\n"
            "search_docs  step-up   search_docs  scope    docs:read\n"
            "x            hidden    -            no_rule  -\n"
        ) in out
        policy_file = config.parent / "policies" / "main.yaml"
        assert out.splitlines()[-3:] == [
            f"warning: {policy_file}:9:3: tools.create_ticket: rule matches no tool in the "
            "backend catalog",
            f"warning: {policy_file}:8:3: tools.me_*: rule matches no tool in the backend catalog",
            "warning: catalog tool 'x' has no rule: denied and hidden",
        ]


class TestJson:
    def test_json_output_carries_the_whole_decision(
        self, config: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        code, out, _ = run(
            capsys,
            "--config",
            str(config),
            "--scopes",
            "mcp:access tickets:write",
            "--tool",
            "create_ticket",
            "--json",
        )
        assert code == 0
        report = json.loads(out)
        assert report["baseline_scopes"] == ["mcp:access"]
        assert report["principal"] == {
            "sub": "",
            "client_id": None,
            "issuer": "https://id.example.com",
            "scopes": ["mcp:access", "tickets:write"],
        }
        assert report["results"] == [
            {
                "name": "create_ticket",
                "decision": "step-up",
                "allowed": False,
                "visible": True,
                "rule": "create_ticket",
                "reason": "scope",
                "required_scopes": ["mcp:access", "tickets:write", "team:a"],
                "missing_scopes": ["team:a"],
                "listed": False,
            }
        ]
        assert report["listing"] == "allowed"
        assert report["methods"] == [] and report["warnings"] == []
        assert len(report["policy_version"]) == 12

    def test_listing_step_up_is_shown_and_says_which_tools_tools_list_shows(
        self, config: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        write_text(config.parent / "policies" / "main.yaml", "listing: step_up\n" + POLICY)
        argv = ("--config", str(config), "--scopes", "mcp:access", "--all")
        code, out, _ = run(capsys, *argv)
        assert code == 0
        assert out.splitlines()[2] == "listing: step_up (tools/list also shows the step-up tools)"
        code, out, _ = run(capsys, *argv, "--json")
        report = json.loads(out)
        assert report["listing"] == "step_up"
        shown = {row["name"]: row["listed"] for row in report["results"]}
        # search_docs is a step-up (listed); admin_* needs a client this caller is not: hidden.
        assert shown["search_docs"] is True and shown["admin_*"] is False
        assert all("listed" not in row for row in report["methods"])

    def test_a_list_of_names_is_accepted_as_catalog(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        policy = write_text(tmp_path / "p.yaml", POLICY)
        catalog = tmp_path / "tools.json"
        catalog.write_text('["search_docs"]')
        code, out, _ = run(
            capsys, "--policy", str(policy), "--all", "--catalog-file", str(catalog), "--json"
        )
        assert code == 0
        assert [r["name"] for r in json.loads(out)["results"]] == ["search_docs"]


class TestErrors:
    def test_an_invalid_policy_exits_1_with_every_problem_on_stderr(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        policy = write_text(tmp_path / "p.yaml", "version: 1\nbaseline_scopes: [a]\nbogus: 1\n")
        code, out, err = run(capsys, "--policy", str(policy), "--all")
        assert (code, out) == (1, "")
        assert err == f"{policy}:3:1: bogus: unknown key\n"

    def test_a_configuration_missing_secrets_still_yields_its_policy_paths(
        self, config: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.delenv("EXPLAIN_SECRET")
        code, out, err = run(capsys, "--config", str(config), "--tool", "search_docs")
        assert code == 0
        assert "search_docs  step-up" in out
        assert err.startswith(f"note: {config} has 2 problem(s) (see mcp-gateway check)")

    def test_no_configuration_at_all_exits_1(
        self, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.delenv("MCP_GATEWAY_CONFIG", raising=False)
        code, _, err = run(capsys, "--tool", "x")
        assert code == 1
        assert "pass --config PATH, --policy PATH" in err

    def test_tool_and_all_together_are_a_usage_error(self, config: Path) -> None:
        with pytest.raises(SystemExit) as caught:
            main(["policy", "explain", "--config", str(config), "--tool", "x", "--all"])
        assert caught.value.code == 2

    def test_an_unreadable_catalog_file_exits_1(
        self, config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        bad = tmp_path / "tools.json"
        bad.write_text('{"tools": 3}')
        code, _, err = run(capsys, "--config", str(config), "--all", "--catalog-file", str(bad))
        assert code == 1
        assert "expected a JSON list of tool names" in err


class TestCheck:
    def test_check_reports_policy_problems_with_their_position(
        self, config: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        policy_file = config.parent / "policies" / "main.yaml"
        policy_file.write_text(POLICY + '  "x*": {scopes: [a]}\n  "*x": {scopes: [b]}\n')
        assert main(["check", "--config", str(config)]) == 1
        out, _ = capsys.readouterr()
        assert out.startswith(f"{policy_file}:12:3: tools.*x: ties with tools.x* at ")

    def test_check_accepts_a_valid_policy_and_names_its_version(
        self, config: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        assert main(["check", "--config", str(config)]) == 0
        out, _ = capsys.readouterr()
        assert out.startswith(f"{config}: OK (policy version ")


def test_a_rules_guardrails_are_named_where_the_rule_allows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = write_text(
        tmp_path / "p.yaml",
        "version: 1\nbaseline_scopes: [mcp:access]\ntools:\n"
        "  send_email: {scopes: [], guardrails: [pii, injection]}\n  plain: {scopes: []}\n",
    )
    argv = ("--policy", str(policy), "--scopes", "mcp:access", "--all")
    code, out, _ = run(capsys, *argv)
    assert code == 0
    assert "guardrails: send_email: pii, injection" in out.splitlines()
    assert "guardrails: plain" not in out
    report = json.loads(run(capsys, *argv, "--json")[1])
    rows = {row["name"]: row for row in report["results"]}
    assert rows["send_email"]["guardrails"] == ["pii", "injection"]
    assert "guardrails" not in rows["plain"]


def test_a_rules_approval_is_named_where_the_rule_allows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = write_text(
        tmp_path / "p.yaml",
        "version: 1\nbaseline_scopes: [mcp:access]\ntools:\n"
        "  pay: {scopes: [], approval: {by: {claim: groups, value: ops}, ttl_s: 60}}\n"
        "  plain: {scopes: []}\n",
    )
    argv = ("--policy", str(policy), "--scopes", "mcp:access", "--all")
    code, out, _ = run(capsys, *argv)
    assert code == 0
    assert "approval: pay: by groups=ops, 60 s" in out.splitlines()
    assert "approval: plain" not in out
    report = json.loads(run(capsys, *argv, "--json")[1])
    rows = {row["name"]: row for row in report["results"]}
    assert rows["pay"]["approval"] == {"by": "groups=ops", "ttl_s": 60, "redact": []}
    assert "approval" not in rows["plain"]
