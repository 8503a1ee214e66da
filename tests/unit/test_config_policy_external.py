"""``policy_external:`` in gateway.yaml: defaults, and every mistake reported with its place."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gateway.config import load_config
from gateway.errors import ConfigError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "config"
ENV = {"TEST_INTROSPECTION_SECRET": "s", "TEST_BACKEND_TOKEN": "t", "PDP_TOKEN": "p"}


def _write(tmp_path: Path, section: str) -> Path:
    shutil.copy(FIXTURES / "policy.yaml", tmp_path / "policy.yaml")
    target = tmp_path / "gateway.yaml"
    target.write_text((FIXTURES / "minimal.yaml").read_text() + section)
    return target


def test_without_the_section_nothing_is_configured(tmp_path: Path) -> None:
    assert load_config(_write(tmp_path, ""), ENV).policy_external is None


def test_the_defaults_fail_closed_with_a_short_deadline_and_a_bounded_cache(
    tmp_path: Path,
) -> None:
    config = load_config(
        _write(tmp_path, "policy_external: {url: https://pdp.example.com/access/v1/evaluation}\n"),
        ENV,
    )
    pe = config.policy_external
    assert pe is not None
    assert (pe.on_error, pe.timeout_s, pe.retry_after_s) == ("deny", 1.0, 5)
    assert (pe.cache_ttl_s, pe.cache_max_entries) == (30.0, 10_000)
    assert (pe.credential, pe.send_arguments, pe.subject_properties) == (None, False, ())
    assert pe.subject_type == "user"
    assert pe.methods == {"tools/call", "prompts/get", "resources/read"}
    assert pe.tools is None  # every tool


@pytest.mark.parametrize(
    ("section", "where", "says"),
    [
        ("{url: http://pdp.example.com/access/v1/evaluation}", "policy_external.url", "https"),
        # Plain http only to a loopback or private address, and only when allowed.
        ("{url: http://127.0.0.1:8181/e}", "policy_external.url", "https"),
        ("{url: http://8.8.8.8/e, allow_insecure_http: true}", "policy_external.url", "https"),
        ("{url: 'https://pdp.example.com/e?x=1'}", "policy_external.url", "query"),
        (
            "{url: https://pdp.example.com/e, subject_properties: {scopes: scp}}",
            "policy_external.subject_properties.scopes",
            "sent by the gateway itself",
        ),
        ("{url: https://pdp.example.com/e, on_error: allow}", "policy_external.on_error", ""),
        (
            "{url: https://pdp.example.com/e, credential: {type: bearer}}",
            "policy_external.credential",
            "",
        ),
        (
            "{url: https://pdp.example.com/e, credential: {type: basic, username: 'a:b', "
            "password: {env: PDP_TOKEN}}}",
            "policy_external.credential",
            "",
        ),
        (
            "{url: https://pdp.example.com/e, credential: {type: bearer, token: {env: NOPE}}}",
            "policy_external.credential.token",
            "NOPE",
        ),
        ("{url: https://pdp.example.com/e, timeout_s: 0}", "policy_external.timeout_s", ""),
        (
            "{url: https://pdp.example.com/e, cache: {max_entries: 0}}",
            "policy_external.cache.max_entries",
            "",
        ),
        (
            "{url: https://pdp.example.com/e, methods: [tools/list]}",
            "policy_external.methods[0]",
            "",
        ),
        ("{url: https://pdp.example.com/e, methods: []}", "policy_external.methods", ""),
        (
            "{url: https://pdp.example.com/e, tools: ['tool[12]']}",
            "policy_external.tools[0]",
            "no [ or ]",
        ),
    ],
)
def test_each_mistake_is_a_finding_at_its_key(
    tmp_path: Path, section: str, where: str, says: str
) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(_write(tmp_path, f"policy_external: {section}\n"), ENV)
    found = [p for p in info.value.problems if f" {where}" in p and says in p]
    assert found, info.value.problems
    assert ":11:" in found[0]  # file:line of the section (the line after minimal.yaml)


def test_plain_http_to_a_sidecar_or_in_cluster_pdp_when_allowed(tmp_path: Path) -> None:
    for url in (
        "http://127.0.0.1:8181/v1/data/mcp/authzen",
        "http://10.0.0.7:3592/access/v1/evaluation",
    ):
        section = f"policy_external: {{url: '{url}', allow_insecure_http: true}}\n"
        config = load_config(_write(tmp_path, section), ENV)
        assert config.policy_external is not None and config.policy_external.url == url


def test_failing_open_and_an_anonymous_remote_pdp_are_warnings(tmp_path: Path) -> None:
    section = "policy_external: {url: 'https://pdp.example.com/e', on_error: allow_local}\n"
    warnings = load_config(_write(tmp_path, section), ENV).warnings
    assert any(":11:" in w and "on_error: allow_local" in w for w in warnings), warnings
    assert any("no credential" in w for w in warnings), warnings
    # A sidecar on loopback without a credential, failing closed: nothing to say.
    section = "policy_external: {url: 'http://127.0.0.1:8181/e', allow_insecure_http: true}\n"
    assert load_config(_write(tmp_path, section), ENV).warnings == ()
