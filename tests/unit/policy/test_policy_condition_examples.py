"""docs/policy.md's five ``when:`` examples load as written and decide as the text says
(Entra app roles, an Okta group, tenant pinning, an argument allow-list, business hours)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest

from gateway.policy import conditions
from gateway.policy.policy_set import PolicySet
from gateway.seams import ACTIONS, AccessQuestion, frozen_claims
from tests.support.policy import policy_from, who

ROOT = Path(__file__).resolve().parents[3]
DOC = (ROOT / "docs" / "policy.md").read_text(encoding="utf-8")
CHAPTER = DOC.split("#### Five examples", 1)[1].split("\n### ", 1)[0]
BLOCKS = re.findall(r"```yaml\n(.*?)```", CHAPTER, re.DOTALL)
TENANT = "72f988bf-86f1-41af-91ab-2d7cd011db47"
WEDNESDAY_NOON = 1795003200.0  # 2026-11-18 12:00Z
SATURDAY_NOON = 1795262400.0  # 2026-11-21 12:00Z


def test_the_chapter_has_five_examples() -> None:
    assert len(BLOCKS) == 5


def _load(index: int, tmp_path: Path) -> PolicySet:
    return policy_from(BLOCKS[index], tmp_path, f"example-{index}.yaml")


def _holds(policy: PolicySet, name: str, claims: dict[str, Any], **kw: Any) -> bool:
    section = kw.pop("section", "tools")
    arguments = kw.pop("arguments", {})
    base = who("mcp:access tickets:write ops pager:write", client_id=kw.pop("client_id", "cli"))
    caller = dataclasses.replace(base, claims=frozen_claims(claims))
    return (
        policy.decide_conditions(caller, AccessQuestion(ACTIONS[section], name, None, arguments))
        is None
    )


def test_entra_app_roles_and_tenant(tmp_path: Path) -> None:
    policy = _load(0, tmp_path)
    writer = {"roles": ["Tickets.Writer"], "tid": TENANT}
    assert _holds(policy, "tickets__create", writer)
    assert not _holds(policy, "tickets__create", {**writer, "roles": ["Tickets.Reader"]})
    assert not _holds(policy, "tickets__create", {**writer, "tid": "another-tenant"})
    assert not _holds(policy, "tickets__create", {"tid": TENANT})  # no roles claim at all


def test_okta_group(tmp_path: Path) -> None:
    policy = _load(1, tmp_path)
    assert _holds(policy, "ops__restart_service", {"groups": ["Everyone", "mcp-sre"]})
    assert not _holds(policy, "ops__restart_service", {"groups": ["Everyone"]})
    assert not _holds(policy, "ops__restart_service", {})
    # Token-only: decided at the listing too (hidden from non-SREs).
    caller = dataclasses.replace(who("mcp:access ops"), claims=frozen_claims({}))
    assert (
        policy.decide_conditions(caller, AccessQuestion("tools/call", "ops__restart_service"))
        is not None
    )


def test_tenant_pinning_on_prompts(tmp_path: Path) -> None:
    policy = _load(2, tmp_path)
    assert _holds(policy, "any_prompt", {"org_id": "org_8Hc2ELqR1"}, section="prompts")
    assert not _holds(policy, "any_prompt", {"org_id": "org_other"}, section="prompts")
    assert not _holds(policy, "any_prompt", {}, section="prompts")


def test_argument_allow_list(tmp_path: Path) -> None:
    policy = _load(3, tmp_path)
    tool = "ops__restart_service"
    assert _holds(policy, tool, {}, client_id="claude-code", arguments={"env": "staging"})
    assert not _holds(policy, tool, {}, client_id="claude-code", arguments={"env": "prod"})
    oncall = {"groups": ["oncall"]}
    assert _holds(policy, tool, oncall, client_id="ops-console", arguments={"env": "prod"})
    assert not _holds(policy, tool, oncall, client_id="curl", arguments={"env": "dev"})
    # At the listing only the client condition is decided: listed for claude-code.
    caller = dataclasses.replace(who("mcp:access ops", client_id="claude-code"))
    assert policy.decide_conditions(caller, AccessQuestion("tools/call", tool)) is None


def test_business_hours(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    policy = _load(4, tmp_path)
    monkeypatch.setattr(conditions, "wall_clock", lambda: WEDNESDAY_NOON)
    assert _holds(policy, "pager__notify", {})
    monkeypatch.setattr(conditions, "wall_clock", lambda: SATURDAY_NOON)
    assert not _holds(policy, "pager__notify", {})
    monkeypatch.setattr(conditions, "wall_clock", lambda: WEDNESDAY_NOON + 6 * 3600)  # 18:00Z
    assert not _holds(policy, "pager__notify", {})


def test_the_type_safe_argument_conditions_refuse_what_a_negative_test_lets_through(
    tmp_path: Path,
) -> None:
    chapter = DOC.split("#### Conditions over arguments", 1)[1].split("\n#### ", 1)[0]
    [block] = re.findall(r"```yaml\n(.*?)```", chapter, re.DOTALL)
    policy = policy_from(block, tmp_path, "arguments.yaml")
    good = {"env": "dev", "replicas": 3}

    def holds(**changed: Any) -> bool:
        arguments = {k: v for k, v in {**good, **changed}.items() if v is not _ABSENT}
        return _holds(policy, "deploy", {}, arguments=arguments)

    assert holds() and holds(env="test", force=False)
    for env in (None, ["dev"], {"name": "dev"}, "Dev", 5, "prod", _ABSENT):
        assert not holds(env=env), env
    for replicas in ("3", 11, 3.0, None, _ABSENT):
        assert not holds(replicas=replicas), replicas
    for force in (True, None, 0, "false", []):
        assert not holds(force=force), force
    # What the chapter warns about: a negative test lets null and lists through.
    negative = policy_from(
        "version: 1\nbaseline_scopes: [mcp:access]\n"
        "tools:\n  deploy: {scopes: [], when: 'arguments.env != \"prod\"'}\n",
        tmp_path,
        "negative.yaml",
    )
    for env in (None, ["prod"], {"name": "prod"}, "Prod"):
        assert _holds(negative, "deploy", {}, arguments={"env": env}), env


_ABSENT = object()
