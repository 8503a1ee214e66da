"""``mcp-gateway check`` reports every problem of every stage in one run (issue 11 item 11).

Run as operators run it: ``python -m gateway.commands`` in a subprocess, reading stdout (one
problem per line) and stderr (warnings, the count). Also: ``--skip-secrets``, the demo-policy
warning, the compose file's policy mount, and ``--version``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

from gateway import __version__
from gateway.policy.policy_loader import load_policy
from tests.support.config_files import issuer_head

ROOT = Path(__file__).resolve().parents[2]

GATEWAY = """\
resource: https://mcp.example.com/mcp
issuer:
  url: https://id.example.com
  client_id: mcp-gateway
  client_auth: basic
  client_secret: {env: CHECK_TEST_UNSET_SECRET}
backend:
  url: https://tools.example.com/mcp
  credential: {type: bearer, token: {file: missing-token-file}}
policy: policies
limits:
  pre_auth_rate: 10 per minute
"""
POLICY = """\
version: 1
baseline_scopes: [mcp:access]
tools:
  a: {scopes: [], rate_limit: fast}
  b: {}
"""


def run(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("CHECK_TEST_")},
        **(env or {}),
    }
    env.pop("MCP_GATEWAY_CONFIG", None)
    return subprocess.run(
        [sys.executable, "-m", "gateway.commands", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        env=env,
        check=False,
    )


def write(tmp_path: Path, gateway: str = GATEWAY, policy: str = POLICY) -> None:
    (tmp_path / "gateway.yaml").write_text(gateway)
    (tmp_path / "policies").mkdir(exist_ok=True)
    (tmp_path / "policies" / "main.yaml").write_text(policy)


def findings(out: str) -> list[str]:
    # file:line:col: key: message -> "key: message" (positions are checked separately).
    return [re.sub(r"^.*?:\d+:\d+: ", "", line) for line in out.splitlines() if line.strip()]


def test_schema_errors_missing_secrets_and_policy_errors_are_all_reported_in_one_run(
    tmp_path: Path,
) -> None:
    write(tmp_path)
    result = run("check", "--config", "gateway.yaml", cwd=tmp_path)
    assert result.returncode == 1
    found = findings(result.stdout)
    # gateway.yaml: the schema's findings, in the gateway's wording...
    assert (
        'issuer.client_auth: "basic" is not one of: client_secret_basic, client_secret_post, '
        "private_key_jwt"
    ) in found
    assert (
        'limits.pre_auth_rate: "10 per minute" is not a rate: write N/second, N/minute or N/hour '
        "(null turns the limit off)"
    ) in found
    # ...the section checks, a missing secret being one finding among the others...
    assert "issuer.client_secret: environment variable CHECK_TEST_UNSET_SECRET is not set" in found
    assert any(f.startswith("backend.credential.token: cannot read secret file") for f in found)
    # ...and the policy files, checked although gateway.yaml has errors.
    assert 'tools.a.rate_limit: "fast" is not a rate: write N/second, N/minute or N/hour' in found
    assert "tools.b: a rule needs scopes (use [] for the baseline only), any_of or deny" in found
    assert len(found) == 6
    assert "6 problems" in result.stderr
    assert "oneOf" not in result.stdout and "^[1-9]" not in result.stdout


def test_skip_secrets_lints_without_the_production_secrets(tmp_path: Path) -> None:
    fixed = GATEWAY.replace("client_auth: basic", "client_auth: client_secret_basic").replace(
        "10 per minute", "10/minute"
    )
    write(tmp_path, fixed, "version: 1\nbaseline_scopes: [mcp:access]\ntools:\n  a: {scopes: []}\n")
    without = run("check", "--config", "gateway.yaml", cwd=tmp_path)
    assert without.returncode == 1
    assert len(findings(without.stdout)) == 2  # the unset variable and the missing file
    skipped = run("check", "--skip-secrets", "--config", "gateway.yaml", cwd=tmp_path)
    assert skipped.returncode == 0, skipped.stdout + skipped.stderr
    version = load_policy([tmp_path / "policies"]).version
    assert skipped.stdout.strip().endswith(f"OK (policy version {version}) (secrets not read)")
    # Everything but the secrets' values is still checked.
    write(tmp_path, fixed.replace("10/minute", "often"), "version: 1\nbaseline_scopes: []\n")
    broken = run("check", "--skip-secrets", "--config", "gateway.yaml", cwd=tmp_path)
    assert broken.returncode == 1
    assert [f.split(":", 1)[0] for f in findings(broken.stdout)] == [
        "limits.pre_auth_rate",
        "baseline_scopes",
    ]


def test_unreadable_yaml_reports_itself_and_says_the_policies_were_not_checked(
    tmp_path: Path,
) -> None:
    write(tmp_path, "resource: [unclosed\n")
    result = run("check", "--config", "gateway.yaml", cwd=tmp_path)
    assert result.returncode == 1
    assert "YAML syntax error" in result.stdout
    assert "the policy files were not checked" in result.stderr


def test_a_policy_file_marked_demo_is_a_warning(tmp_path: Path) -> None:
    fixed = GATEWAY.replace("client_auth: basic", "client_auth: client_secret_basic").replace(
        "10 per minute", "10/minute"
    )
    write(tmp_path, fixed)
    (tmp_path / "policies" / "main.yaml").write_text(
        (ROOT / "gateway" / "dev" / "demo-policy.yaml").read_text()
    )
    result = run("check", "--skip-secrets", "--config", "gateway.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout
    assert (
        "policies/main.yaml: declares itself a demo policy (demo: true): it grants example tools "
        "to anyone with the demo scopes; do not load it in a deployment"
    ) in result.stderr


def test_a_demo_policy_is_a_warning_also_when_another_policy_file_has_errors(
    tmp_path: Path,
) -> None:
    write(tmp_path)  # main.yaml has two problems
    (tmp_path / "policies" / "demo.yaml").write_text(
        (ROOT / "gateway" / "dev" / "demo-policy.yaml").read_text()
    )
    result = run("check", "--skip-secrets", "--config", "gateway.yaml", cwd=tmp_path)
    assert result.returncode == 1
    assert "policies/demo.yaml: declares itself a demo policy (demo: true)" in result.stderr
    assert "tools.b: a rule needs scopes (use [] for the baseline only), any_of or deny" in (
        findings(result.stdout)
    )


FEDERATED = """\
resource: https://mcp.example.com/mcp
issuer: {url: https://id.example.com, client_id: mcp-gateway, client_secret: {env: CHECK_TEST_S}}
backends:
  docs:
    url: https://docs.example.com/mcp
    credential: {type: bearer, token: {env: CHECK_TEST_S}}
  tickets:
    url: https://tickets.example.com/mcp
    credential: {type: bearer, token: {env: CHECK_TEST_S}}
policy: policies
"""
UNREACHABLE = """\
version: 1
baseline_scopes: [mcp:access]
tools:
  docs__search: {scopes: []}
  wiki__search: {scopes: []}
  "tickets__*": {scopes: []}
"""


def test_a_rule_no_configured_backend_can_match_is_a_warning_with_its_position(
    tmp_path: Path,
) -> None:
    # Issue 32 item 6: wiki__search with no wiki backend was found only at runtime.
    write(tmp_path, FEDERATED, UNREACHABLE)
    result = run("check", "--skip-secrets", "--config", "gateway.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout
    warnings = [line for line in result.stderr.splitlines() if "can never match" in line]
    assert warnings == [
        f"warning: {tmp_path / 'policies' / 'main.yaml'}:5:3: tools.wiki__search: can never "
        "match: no configured backend advertises such a name (prefixes: 'docs__', 'tickets__')"
    ]
    # Also when gateway.yaml has problems of its own, as long as its backends can be read.
    write(tmp_path, FEDERATED + "limits: {pre_auth_rate: fast}\n", UNREACHABLE)
    result = run("check", "--skip-secrets", "--config", "gateway.yaml", cwd=tmp_path)
    assert result.returncode == 1
    assert "tools.wiki__search: can never match" in result.stderr
    # A backend with the empty prefix may advertise any name: nothing to warn about.
    write(tmp_path, FEDERATED.replace("  tickets:\n", '  tickets:\n    prefix: ""\n'))
    (tmp_path / "policies" / "main.yaml").write_text(UNREACHABLE.replace('"tickets__*"', "echo"))
    result = run("check", "--skip-secrets", "--config", "gateway.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout
    assert "can never match" not in result.stderr


OVERRIDES = """\
version: 1
baseline_scopes: [mcp:access]
tools:
  docs__search: {scopes: [], override: {rename: tickets__search}}
  docs__echo: {scopes: [], override: {rename: echo_docs}}
  tickets__create: {scopes: [], override: {rename: tickets__open, arguments: {hidden: [x, x]}}}
"""


def test_check_reports_override_problems_and_renames_into_another_prefix(tmp_path: Path) -> None:
    write(tmp_path, FEDERATED, OVERRIDES)
    result = run("check", "--skip-secrets", "--config", "gateway.yaml", cwd=tmp_path)
    assert result.returncode == 1
    assert findings(result.stdout) == [
        "tools.tickets__create.override.arguments.hidden: lists the same value more than once"
    ]
    write(tmp_path, FEDERATED, OVERRIDES.replace("[x, x]", "[x]"))
    result = run("check", "--skip-secrets", "--config", "gateway.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout
    warnings = [line for line in result.stderr.splitlines() if "override.rename" in line]
    assert warnings == [
        f"warning: {tmp_path / 'policies' / 'main.yaml'}:4:30: tools.docs__search.override."
        "rename: 'tickets__search' lies in another backend's prefix 'tickets__': the tool will "
        "be hidden as ambiguous"
    ]


def test_a_value_the_schema_refused_gets_no_findings_derived_from_it(tmp_path: Path) -> None:
    # check's guarded pass runs the section checks on a document the schema refused: an unknown
    # credential type, client_auth or token mode is one finding, not a second one built on it.
    gateway = """\
resource: https://mcp.example.com/mcp
issuers:
  - {url: https://id.example.com, client_id: gw, tokens: jwtx}
  - {url: https://id2.example.com, client_id: gw, client_auth: weird}
backends:
  one:
    url: https://tools.example.com/mcp
    credential: {type: bearerx, client_id: gw}
  other:
    url: https://other.example.com/mcp
    credential: {type: client_credentials, client_id: gw, client_auth: nope}
policy: policies
"""
    policy = "version: 1\nbaseline_scopes: [mcp:access]\ntools:\n  a: {scopes: []}\n"
    write(tmp_path, gateway, policy)
    result = run("check", "--skip-secrets", "--config", "gateway.yaml", cwd=tmp_path)
    assert result.returncode == 1
    found = findings(result.stdout)
    assert not [f for f in found if "is required with client_auth" in f], found
    assert 'issuers[0].tokens: "jwtx" is not one of: introspection, jwt, jwt+introspection' in (
        found
    )
    assert any(f.startswith("backends.one.credential: must be {type: bearer") for f in found)
    assert len(found) == 4, found  # tokens, the two client_auth values, the credential type


def test_the_compose_file_mounts_no_demo_policy(tmp_path: Path) -> None:
    compose = yaml.safe_load((ROOT / "deploy" / "compose.yaml").read_text())
    mounts = [m.split(":") for m in compose["services"]["gateway"]["volumes"]]
    target_root = tmp_path / "etc" / "mcp-gateway"
    for source, target, *_ in mounts:
        src = (ROOT / "deploy" / source).resolve()
        dst = tmp_path / target.lstrip("/")
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            dst.symlink_to(src, target_is_directory=True)
        else:
            dst.write_text(src.read_text())
    config = target_root / "gateway.yaml"
    result = run("check", "--skip-secrets", "--config", str(config), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "demo" not in result.stderr
    policy = load_policy([target_root / "policies"])
    assert policy.demo_sources == ()
    # The demo's tools are not callable in a deployment built from the shipped files.
    assert policy.rule_for("echo") is None and policy.rule_for("time_now") is None


def test_version_flag_prints_the_version() -> None:
    for args in (["--version"], ["version"]):
        result = run(*args, cwd=ROOT)
        assert result.returncode == 0
        assert result.stdout.splitlines()[0] == f"mcp-gateway {__version__}"


SCOPE_MAP_GATEWAY = """\
resource: https://mcp.example.com/mcp
issuers:
  - url: https://login.example.com/tenant/v2.0
    tokens: jwt
    scope_prefix: "api://notes/"
    scope_map:
      "api://notes/mcp.access": "mcp:access"
      "api://notes/Notes.Reader": "notes:read"
      "api://notes/notes.read": "notes:read"
      "api://notes/notes.wirte": "notes:wirte"
  - url: https://keycloak.example.com/realms/acme
    tokens: jwt
    scope_map:
      "notes:write": "notes:admin"
backend:
  url: https://tools.example.com/mcp
  credential: {type: bearer, token: {env: CHECK_TEST_TOKEN}}
policy: policies
"""
SCOPE_MAP_POLICY = """\
version: 1
baseline_scopes: [mcp:access]
tools:
  search_notes: {scopes: [notes:read]}
  create_note: {scopes: [notes:write]}
"""


def test_check_warns_about_scope_map_targets_nobody_names_and_keys_that_are_policy_scopes(
    tmp_path: Path,
) -> None:
    write(tmp_path, SCOPE_MAP_GATEWAY, SCOPE_MAP_POLICY)
    result = run("check", "--config", "gateway.yaml", "--skip-secrets", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    # Two keys with one target (a scope and an app role) are fine; the typo and the ambiguous
    # key are not, each at the key's line.
    assert warnings == [
        "warning: gateway.yaml:10:7: scope_map['api://notes/notes.wirte']: notes:wirte is named "
        "by no policy rule, baseline, method or scope_hierarchy, so the mapping does nothing "
        "(issuer 1, https://login.example.com/tenant/v2.0)",
        "warning: gateway.yaml:14:7: scope_map['notes:write']: notes:admin is named by no "
        "policy rule, baseline, method or scope_hierarchy, so the mapping does nothing "
        "(issuer 2, https://keycloak.example.com/realms/acme)",
        "warning: gateway.yaml:14:7: scope_map['notes:write']: notes:write is also a policy "
        "scope: this issuer's tokens holding it get notes:admin instead, so a rule naming "
        "notes:write never matches them (issuer 2, https://keycloak.example.com/realms/acme)",
    ]


def test_check_counts_scope_hierarchy_names_as_policy_scopes(tmp_path: Path) -> None:
    # notes:admin is named only by the hierarchy: the map targeting it is not a typo.
    policy = SCOPE_MAP_POLICY.replace(
        "tools:\n", "scope_hierarchy:\n  notes:admin: [notes:write, notes:wirte]\ntools:\n"
    )
    write(tmp_path, SCOPE_MAP_GATEWAY, policy)
    result = run("check", "--config", "gateway.yaml", "--skip-secrets", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    assert warnings == [
        "warning: gateway.yaml:14:7: scope_map['notes:write']: notes:write is also a policy "
        "scope: this issuer's tokens holding it get notes:admin instead, so a rule naming "
        "notes:write never matches them (issuer 2, https://keycloak.example.com/realms/acme)",
    ]


def test_check_warns_when_a_scope_map_only_issuer_cannot_reach_the_baseline(
    tmp_path: Path,
) -> None:
    gateway = SCOPE_MAP_GATEWAY.replace(
        '      "notes:write": "notes:admin"\n',
        '      "notes:write": "notes:write"\n    scope_map_only: true\n',
    )
    write(tmp_path, gateway, SCOPE_MAP_POLICY)
    result = run("check", "--config", "gateway.yaml", "--skip-secrets", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (
        "warning: gateway.yaml:14:7: scope_map: with scope_map_only no key maps to the baseline "
        "scope mcp:access, so every request of this issuer's callers is refused (issuer 2, "
        "https://keycloak.example.com/realms/acme)"
    ) in result.stderr.splitlines()


VALID = issuer_head("CHECK_TEST_LOCK_SECRET", "policies") + (
    "backends:\n"
    "  docs:\n"
    "    url: https://tools.example.com/mcp\n"
    "    credential: {type: bearer, token: {env: CHECK_TEST_LOCK_TOKEN}}\n"
    "catalog: {lock: catalog.lock.yaml}\n"
)


def test_check_reads_the_catalog_lock_as_serve_would(tmp_path: Path) -> None:
    write(tmp_path, gateway=VALID, policy="version: 1\nbaseline_scopes: [mcp:access]\n")
    check = ("check", "--config", "gateway.yaml", "--skip-secrets")
    missing = run(*check, cwd=tmp_path)
    assert missing.returncode == 1
    assert "catalog.lock: the lock file does not exist" in missing.stdout
    (tmp_path / "catalog.lock.yaml").write_text("version: 3\nitems: {}\n")
    broken = run(*check, cwd=tmp_path)
    assert broken.returncode == 1
    assert re.search(r"catalog\.lock\.yaml:1:\d+: version: must be 2", broken.stdout), broken.stdout
    assert re.search(r"catalog\.lock\.yaml:2:\d+: items: must be a list", broken.stdout)
    for version in (2, 1):  # 1: an older lock, still read (docs/operations.md)
        (tmp_path / "catalog.lock.yaml").write_text(f"version: {version}\nitems: []\n")
        ok = run(*check, cwd=tmp_path)
        assert ok.returncode == 0, ok.stdout + ok.stderr
        assert "OK" in ok.stdout


HIDDEN = """\
version: 1
baseline_scopes: [mcp:access]
scope_hierarchy:
  admin: [ops]
  ops: [admin]
  writer: [editor]
  editor: [writer]
tools:
  docs__search: {scopes: [], rate_limit: often}
  wiki__search: {scopes: []}
"""


def test_a_mistake_in_one_rule_hides_no_cycle_and_no_rule_that_can_never_match(
    tmp_path: Path,
) -> None:
    # Issue 43: with any other error in the file, check reported neither the hierarchy's
    # cycles nor the rule no backend can match; and of two cycles only the first.
    write(tmp_path, FEDERATED, HIDDEN)
    result = run("check", "--skip-secrets", "--config", "gateway.yaml", cwd=tmp_path)
    assert result.returncode == 1
    assert findings(result.stdout) == [
        'tools.docs__search.rate_limit: "often" is not a rate: write N/second, N/minute or N/hour',
        "scope_hierarchy.admin: is part of a cycle (admin -> ops -> admin); a scope hierarchy "
        "must not lead back to a scope",
        "scope_hierarchy.writer: is part of a cycle (writer -> editor -> writer); a scope "
        "hierarchy must not lead back to a scope",
    ]
    assert "3 problems" in result.stderr
    assert "tools.wiki__search: can never match" in result.stderr
    # A file that is fine still merges with one that is not: a key defined twice is found.
    (tmp_path / "policies" / "other.yaml").write_text(
        "version: 1\ntools:\n  wiki__search: {scopes: []}\n  docs__x: {scopes: [nope nope]}\n"
    )
    result = run("check", "--skip-secrets", "--config", "gateway.yaml", cwd=tmp_path)
    assert any(f.startswith("tools.wiki__search: also defined at") for f in findings(result.stdout))


def test_tracing_without_the_opentelemetry_packages_is_a_problem_check_reports(
    tmp_path: Path,
) -> None:
    # Issue 43: check said OK and serve then exited 1, suggesting a command that is wrong in a
    # clone. An empty `opentelemetry` package ahead on the path hides the installed one.
    hidden = tmp_path / "no-otel" / "opentelemetry"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text("")
    write(
        tmp_path,
        FEDERATED + "tracing: {otlp: {endpoint: http://127.0.0.1:4318}}\n",
        "version: 1\nbaseline_scopes: [mcp:access]\n",
    )
    env = {"PYTHONPATH": str(hidden.parent), "CHECK_TEST_S": "t" * 40}
    result = run("check", "--config", "gateway.yaml", cwd=tmp_path, env=env)
    assert result.returncode == 1
    problem = (
        "tracing: needs the OpenTelemetry packages (the otel extra, which the container image "
        "has): pip install '.[otel]' in a clone of the gateway"
    )
    assert findings(result.stdout) == [problem]
    serve = run("serve", "--config", "gateway.yaml", cwd=tmp_path, env=env)
    assert serve.returncode == 1
    assert findings(serve.stdout) == [problem]
    installed = run(
        "check", "--config", "gateway.yaml", cwd=tmp_path, env={**env, "PYTHONPATH": ""}
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr


def test_check_warns_about_an_approval_no_one_can_give(tmp_path: Path) -> None:
    fixed = GATEWAY.replace("client_auth: basic", "client_auth: client_secret_basic").replace(
        "10 per minute", "10/minute"
    )
    held = (
        "version: 1\nbaseline_scopes: [mcp:access]\ntools:\n"
        "  wipe: {scopes: [], approval: {by: self}}\n"
        "  pay: {scopes: [], approval: {by: {claim: roles, value: payments}}}\n"
    )
    write(tmp_path, fixed, held)
    result = run("check", "--skip-secrets", "--config", "gateway.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout
    warned = findings(result.stderr.replace("warning: ", ""))
    for tool in ("wipe", "pay"):
        assert (
            f"tools.{tool}.approval: no login: section, so no approval page: every call of it "
            "is refused (approval_unavailable)"
        ) in warned, result.stderr
    login = (
        "input_requests:\n  seal_keys: [{id: k1, key: {env: CHECK_TEST_SEAL}}]\n"
        "login: {client_id: gw-login, client_secret: {env: CHECK_TEST_LOGIN}}\n"
    )
    write(tmp_path, fixed + login, held)
    result = run("check", "--skip-secrets", "--config", "gateway.yaml", cwd=tmp_path)
    warned = findings(result.stderr.replace("warning: ", ""))
    assert (
        "tools.pay.approval: claim 'roles' is not in approvals.approver_claims: no one can "
        "approve it"
    ) in warned, result.stderr
    assert not any("tools.wipe.approval" in line for line in warned)
