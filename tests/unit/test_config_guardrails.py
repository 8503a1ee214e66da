"""``guardrails:`` in gateway.yaml and a rule's ``guardrails:`` in the policy: defaults, and every
mistake reported with its place (a rule may name only a configured processor)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gateway.config import GUARDRAIL_CHECKS, load_config
from gateway.config.loader import inspect_config
from gateway.errors import ConfigError
from gateway.policy.policy_loader import inspect_policy, load_policy
from gateway.policy.reload import PolicyReloader

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "config"
ENV = {"TEST_INTROSPECTION_SECRET": "s", "TEST_BACKEND_TOKEN": "t", "GUARD_TOKEN": "g"}
POLICY = """\
version: 1
baseline_scopes: [mcp:access]
tools:
  echo: {scopes: [], guardrails: [pii, secrets]}
prompts:
  greet: {scopes: [], guardrails: [pii]}
"""


def _write(tmp_path: Path, section: str, policy: str | None = None) -> Path:
    if policy is None:
        shutil.copy(FIXTURES / "policy.yaml", tmp_path / "policy.yaml")
    else:
        (tmp_path / "policy.yaml").write_text(policy)
    target = tmp_path / "gateway.yaml"
    target.write_text((FIXTURES / "minimal.yaml").read_text() + section)
    return target


def test_without_the_section_there_is_no_processor(tmp_path: Path) -> None:
    assert load_config(_write(tmp_path, ""), ENV).guardrails == ()


def test_the_defaults_fail_closed_with_a_short_deadline_and_every_check(tmp_path: Path) -> None:
    section = "guardrails:\n  pii: {url: https://guard.example.com/check}\n"
    (pii,) = load_config(_write(tmp_path, section), ENV).guardrails
    assert (pii.name, pii.on_error, pii.timeout_s, pii.max_body_bytes) == (
        "pii",
        "deny",
        1.0,
        1_048_576,
    )
    assert pii.checks == frozenset(GUARDRAIL_CHECKS) and len(pii.checks) == 5
    assert (pii.credential, pii.claims, pii.max_connections) == (None, (), 32)


@pytest.mark.parametrize(
    ("section", "where", "says"),
    [
        ("{url: http://guard.example.com/check}", "guardrails.pii.url", "https"),
        ("{url: http://127.0.0.1:8500/check}", "guardrails.pii.url", "https"),
        ("{url: 'https://guard.example.com/c?x=1'}", "guardrails.pii.url", "query"),
        ("{url: https://g.example.com/c, timeout_s: 0}", "guardrails.pii.timeout_s", ""),
        ("{url: https://g.example.com/c, timeout_s: 31}", "guardrails.pii.timeout_s", ""),
        (
            "{url: https://g.example.com/c, max_body_bytes: 1023}",
            "guardrails.pii.max_body_bytes",
            "",
        ),
        ("{url: https://g.example.com/c, on_error: allow_local}", "guardrails.pii.on_error", ""),
        ("{url: https://g.example.com/c, checks: []}", "guardrails.pii.checks", ""),
        ("{url: https://g.example.com/c, checks: [tools/call]}", "guardrails.pii.checks[0]", ""),
        ("{url: https://g.example.com/c, claims: ['']}", "guardrails.pii.claims[0]", ""),
        (
            "{url: https://g.example.com/c, credential: {type: bearer, token: {env: NOPE}}}",
            "guardrails.pii.credential.token",
            "NOPE",
        ),
        (
            "{url: https://g.example.com/c, credential: {type: token_exchange, client_id: gw, "
            "client_secret: {env: GUARD_TOKEN}, audience: guard}}",
            "guardrails.pii.credential.type",
            "never sent to a processor",
        ),
        (
            "{url: https://g.example.com/c, credential: {type: basic}}",
            "guardrails.pii.credential",
            "",
        ),
    ],
)
def test_each_mistake_is_a_finding_at_its_key(
    tmp_path: Path, section: str, where: str, says: str
) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(_write(tmp_path, f"guardrails:\n  pii: {section}\n"), ENV)
    found = [p for p in info.value.problems if f" {where}" in p and says in p]
    assert found, info.value.problems
    assert ":12:" in found[0]  # file:line of the entry (after minimal.yaml and the key)


@pytest.mark.parametrize("name", ["PII", "-pii", "p" * 33, "pii.v2"])
def test_a_processor_name_is_a_bounded_label(tmp_path: Path, name: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(_write(tmp_path, f"guardrails:\n  '{name}': {{url: https://g.example/c}}\n"))
    assert any("guardrails" in p and "a-z, 0-9" in p for p in info.value.problems)


def test_a_credential_as_a_backends_and_plain_http_to_a_sidecar(tmp_path: Path) -> None:
    section = (
        "guardrails:\n"
        "  pii: {url: 'https://guard.example.com/c', credential: {type: client_credentials,\n"
        "        client_id: gw, client_secret: {env: GUARD_TOKEN}, scope: guard}}\n"
        "  local: {url: 'http://127.0.0.1:8500/c', allow_insecure_http: true}\n"
        "  cluster: {url: 'http://10.0.0.7:8500/c', allow_insecure_http: true,\n"
        "            credential: {type: bearer, token: {env: GUARD_TOKEN}}}\n"
    )
    config = load_config(_write(tmp_path, section), ENV)
    pii, local, cluster = config.guardrails
    assert pii.credential is not None and pii.credential.type == "client_credentials"
    assert pii.credential.client_secret is not None
    assert pii.credential.client_secret.reveal() == "g"
    assert (local.name, local.credential, cluster.name) == ("local", None, "cluster")
    assert config.warnings == ()  # a loopback sidecar needs no credential


def test_failing_open_and_an_anonymous_remote_processor_are_warnings(tmp_path: Path) -> None:
    section = "guardrails:\n  pii: {url: 'https://g.example.com/c', on_error: allow}\n"
    warnings = load_config(_write(tmp_path, section), ENV).warnings
    assert any("guardrails.pii.on_error: allow" in w for w in warnings), warnings
    assert any("guardrails.pii: no credential" in w for w in warnings), warnings


def test_a_rule_may_name_only_a_configured_processor(tmp_path: Path) -> None:
    section = "guardrails:\n  pii: {url: 'http://127.0.0.1:8500/c', allow_insecure_http: true}\n"
    report = inspect_config(_write(tmp_path, section, POLICY), ENV)
    assert report.guardrails == ("pii",)
    paths = [tmp_path / "policy.yaml"]
    problems = inspect_policy(paths, guardrails=report.guardrails).problems
    assert problems == (
        f"{tmp_path / 'policy.yaml'}:4:40: tools.echo.guardrails[1]: no guardrail 'secrets' in "
        "gateway.yaml's guardrails: (configured: pii)",
    )
    assert inspect_policy(paths, guardrails=()).problems[0].endswith("(configured: none)")
    # Names unchecked (policy explain without a configuration): the rule reads as written.
    policy = load_policy(paths)
    assert policy.exact["echo"].guardrails == ("pii", "secrets")
    assert policy.prompts.find("greet") is not None
    # A reload that names another processor keeps the policy in force.
    (tmp_path / "policy.yaml").write_text(POLICY.replace(", secrets", ""))
    reloader = PolicyReloader(paths, guardrails=["pii"])
    (tmp_path / "policy.yaml").write_text(POLICY)
    assert reloader.reload() is False
    assert reloader.current().exact["echo"].guardrails == ("pii",)


def test_the_guardrails_of_a_rule_are_part_of_the_policy_version(tmp_path: Path) -> None:
    paths = [tmp_path / "policy.yaml"]
    (tmp_path / "policy.yaml").write_text(POLICY)
    named = load_policy(paths).version
    (tmp_path / "policy.yaml").write_text(POLICY.replace("[pii, secrets]", "[secrets, pii]"))
    reordered = load_policy(paths).version
    (tmp_path / "policy.yaml").write_text(POLICY.replace(", guardrails: [pii, secrets]", ""))
    without = load_policy(paths).version
    assert len({named, reordered, without}) == 3  # the order is the order they are asked in


@pytest.mark.parametrize(
    "entry",
    ["guardrails: []", "guardrails: [Pii]", "guardrails: [pii, pii]", "guardrails: pii"],
)
def test_a_rules_guardrails_is_a_list_of_names(tmp_path: Path, entry: str) -> None:
    (tmp_path / "policy.yaml").write_text(
        f"version: 1\nbaseline_scopes: [mcp:access]\ntools:\n  echo: {{scopes: [], {entry}}}\n"
    )
    problems = inspect_policy([tmp_path / "policy.yaml"]).problems
    assert problems and all("tools.echo.guardrails" in p for p in problems), problems
