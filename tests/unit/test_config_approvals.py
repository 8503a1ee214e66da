"""``approvals:`` (gateway.yaml) and a tools rule's ``approval:`` (policy): read, checked at
their keys, and part of the policy version (a changed approval rule is another policy)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gateway.config import ApprovalsConfig, load_config
from gateway.errors import ConfigError
from gateway.policy.policy_loader import inspect_policy, load_policy
from gateway.seams import ApprovalRule

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "config"
ENV = {"TEST_INTROSPECTION_SECRET": "s", "TEST_BACKEND_TOKEN": "t"}
POLICY = """\
version: 1
baseline_scopes: [mcp:access]
tools:
  pay:
    scopes: []
    approval:
      by: {claim: groups, value: payments-approvers}
      ttl_s: 300
      preview: {redact: [card.number, cvc]}
  wipe: {scopes: [], approval: {by: self}}
  echo: {scopes: []}
"""


def _write(tmp_path: Path, section: str) -> Path:
    shutil.copy(FIXTURES / "policy.yaml", tmp_path / "policy.yaml")
    target = tmp_path / "gateway.yaml"
    target.write_text((FIXTURES / "minimal.yaml").read_text() + section)
    return target


def test_without_the_section_the_defaults_apply(tmp_path: Path) -> None:
    config = load_config(_write(tmp_path, ""), ENV).approvals
    assert config == ApprovalsConfig()
    assert config.approver_claims == ("groups",) and config.webhook is None


def test_the_section_and_its_webhook(tmp_path: Path) -> None:
    section = (
        "approvals:\n  approver_claims: [roles]\n  wait_s: 0\n"
        "  webhook: {url: 'http://127.0.0.1:9/hook', allow_insecure_http: true}\n"
    )
    config = load_config(_write(tmp_path, section), ENV).approvals
    assert config.approver_claims == ("roles",) and config.wait_s == 0
    assert config.webhook is not None and config.webhook.url == "http://127.0.0.1:9/hook"


@pytest.mark.parametrize(
    ("section", "where"),
    [
        ("approvals:\n  webhook: {url: 'http://hooks.example.com/x'}\n", "approvals.webhook.url"),
        ("approvals:\n  wait_s: 61\n", "approvals.wait_s"),
        ("approvals:\n  approver_claims: ['a b']\n", "approvals.approver_claims"),
        ("approvals:\n  webhook: {}\n", "approvals.webhook"),
        (
            "approvals:\n  webhook:\n    url: https://hooks.example.com/x\n"
            "    credential: {type: token_exchange}\n",
            "approvals.webhook.credential",
        ),
    ],
)
def test_each_mistake_is_a_finding_at_its_key(tmp_path: Path, section: str, where: str) -> None:
    with pytest.raises(ConfigError) as refused:
        load_config(_write(tmp_path, section), ENV)
    assert any(where in problem for problem in refused.value.problems), refused.value.problems


def test_a_rules_approval_is_read(tmp_path: Path) -> None:
    (tmp_path / "policy.yaml").write_text(POLICY)
    tools = load_policy([tmp_path / "policy.yaml"])
    assert tools.exact["pay"].approval == ApprovalRule(
        by="claim",
        claim="groups",
        value="payments-approvers",
        ttl_s=300,
        redact=("card.number", "cvc"),
    )
    assert tools.exact["pay"].approval.approvers == "groups=payments-approvers"  # type: ignore[union-attr]
    assert tools.exact["wipe"].approval == ApprovalRule()
    assert tools.exact["echo"].approval is None


def test_an_approval_rule_is_part_of_the_policy_version(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    versions = set()
    for text in (
        POLICY,
        POLICY.replace("ttl_s: 300", "ttl_s: 301"),
        POLICY.replace("[card.number, cvc]", "[cvc]"),
        POLICY.replace("payments-approvers", "ops"),
        POLICY.replace(", approval: {by: self}", ""),
    ):
        path.write_text(text)
        versions.add(load_policy([path]).version)
    assert len(versions) == 5


@pytest.mark.parametrize(
    "entry",
    [
        "approval: {}",
        "approval: {by: everyone}",
        "approval: {by: {claim: groups}}",
        "approval: {by: self, ttl_s: 5}",
        "approval: {by: self, preview: {redact: []}, extra: 1}",
    ],
)
def test_a_rules_approval_is_checked_at_its_key(tmp_path: Path, entry: str) -> None:
    (tmp_path / "policy.yaml").write_text(
        f"version: 1\nbaseline_scopes: [mcp:access]\ntools:\n  echo: {{scopes: [], {entry}}}\n"
    )
    problems = inspect_policy([tmp_path / "policy.yaml"]).problems
    assert problems and all("tools.echo.approval" in p for p in problems), problems


def test_approval_is_a_tools_rules_setting(tmp_path: Path) -> None:
    (tmp_path / "policy.yaml").write_text(
        "version: 1\nbaseline_scopes: [mcp:access]\ntools: {}\n"
        "prompts:\n  greet: {scopes: [], approval: {by: self}}\n"
    )
    problems = inspect_policy([tmp_path / "policy.yaml"]).problems
    assert problems and "prompts.greet.approval" in problems[0], problems
