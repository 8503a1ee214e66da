"""``mcp-gateway policy explain --token-file``: the scopes of a real token, from each claim
through the prefix, the role and the issuer's ``scope_map`` to the policy's names, and the
policy's decisions for them (issue 31)."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path
from typing import Any

import pytest

from gateway.commands.cli import main
from tests.support.policy import policy_text, write_text

API = "api://66666666-7777-8888-9999-000000000000/"
ENTRA = "https://login.microsoftonline.com/11111111-2222-3333-4444-555555555555/v2.0"
KEYCLOAK = "https://keycloak.example.com/realms/services"
POLICY = policy_text(tools={"search_notes": "notes:read", "create_note": "notes:write"})


@pytest.fixture(autouse=True)
def _keep_logging_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("gateway.commands.cli.configure", lambda *args, **kwargs: None)


@pytest.fixture
def config(tmp_path: Path) -> Path:
    write_text(tmp_path / "policies" / "main.yaml", POLICY)
    # The secrets are not set: explain reads tokens without them.
    return write_text(
        tmp_path / "gateway.yaml",
        f"""
        resource: https://mcp.example.com/mcp
        issuers:
          - url: {ENTRA}
            tokens: jwt
            audiences: [66666666-7777-8888-9999-000000000000]
            accept_typ: [JWT]
            scope_prefix: "{API}"
            roles: {{claim: roles, prefix: "{API}"}}
            subject_claim: oid
            scope_map:
              "{API}mcp.access": "mcp:access"
              "{API}notes.read": "notes:read"
          - url: {KEYCLOAK}
            client_id: mcp-gateway
            client_secret: {{env: EXPLAIN_TOKEN_UNSET_SECRET}}
            groups: {{claim: groups, prefix: "group:"}}
        backend:
          url: https://tools.example.com/mcp
          credential: {{type: bearer, token: {{env: EXPLAIN_TOKEN_UNSET_SECRET}}}}
        policy: policies
        """,
    )


def entra_claims(**extra: Any) -> dict[str, Any]:
    now = int(time.time())
    return {
        "aud": "66666666-7777-8888-9999-000000000000",
        "iss": ENTRA,
        "iat": now,
        "nbf": now,
        "exp": now + 3600,
        "azp": "claude-code-app",
        "oid": "user-oid",
        "sub": "pairwise",
        "scp": "mcp.access notes.read offline",
        "ver": "2.0",
        **extra,
    }


def compact(claims: dict[str, Any]) -> str:
    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'RS256', 'typ': 'JWT'})}.{part(claims)}.c2ln"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["policy", "explain", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_scope_map_only_issuer_shows_each_scope_it_drops(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = config.read_text().replace(
        "subject_claim: oid\n", "subject_claim: oid\n    scope_map_only: true\n"
    )
    config.write_text(text)
    token = tmp_path / "token.json"
    token.write_text(json.dumps(entra_claims()))
    code, out, err = run(capsys, "--config", str(config), "--token-file", str(token), "--all")
    assert code == 0, err
    lines = out.splitlines()
    assert (
        f"  scp 'offline' -> prefix {API}offline -> dropped: not in scope_map (scope_map_only)"
    ) in lines
    assert "policy scopes: mcp:access notes:read" in lines


def test_a_jwt_file_prints_claim_prefix_role_map_and_the_decisions(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    token = tmp_path / "token.jwt"
    value = compact(entra_claims(roles=["notes.read"]))
    token.write_text(value + "\n")
    code, out, err = run(capsys, "--config", str(config), "--token-file", str(token), "--all")
    assert code == 0, err
    assert value not in out + err and value.split(".")[2] not in out + err  # never the token
    lines = out.splitlines()
    assert f"token: issuer {ENTRA} (tokens: jwt)" in lines
    assert f"  scp 'mcp.access' -> prefix {API}mcp.access -> map -> mcp:access" in lines
    assert f"  scp 'offline' -> prefix {API}offline -> not mapped" in lines
    assert f"  roles 'notes.read' -> role prefix {API}notes.read -> map -> notes:read" in lines
    assert f"policy scopes: {API}offline mcp:access notes:read" in lines
    assert "principal: sub=user-oid client_id=claude-code-app" in out
    decisions = {
        line.split()[0]: line.split()[1] for line in lines if line.startswith(("search", "create"))
    }
    assert decisions == {"search_notes": "allow", "create_note": "step-up"}
    assert "would refuse" not in out


def test_json_names_each_step_and_an_expired_token_is_flagged_not_refused(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    token = tmp_path / "payload.json"
    token.write_text(json.dumps(entra_claims(exp=int(time.time()) - 3600)))
    code, out, err = run(
        capsys,
        "--config",
        str(config),
        "--token-file",
        str(token),
        "--tool",
        "search_notes",
        "--json",
    )
    assert code == 0, err
    report = json.loads(out)
    assert report["token"]["accepted"] is False
    assert report["token"]["refusal"] == "token expired"
    assert report["token"]["derivation"][0] == {
        "source": "scope",
        "claim": "scp",
        "value": "mcp.access",
        "spelled": f"{API}mcp.access",
        "mapped": True,
        "dropped": False,
        "scope": "mcp:access",
    }
    assert report["principal"]["scopes"] == [f"{API}offline", "mcp:access", "notes:read"]
    assert report["results"][0]["decision"] == "allow"


def test_an_introspection_answer_uses_the_issuer_it_names_and_flags_an_id_token(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    now = int(time.time())
    answer = {
        "active": True,
        "iss": KEYCLOAK,
        "aud": ["claude-code", "https://mcp.example.com/mcp"],
        "exp": now + 300,
        "iat": now,
        "sub": "f2b1c0de",
        "typ": "ID",
        "nonce": "n",
        "azp": "claude-code",
        "client_id": "claude-code",
        "scope": "openid mcp:access",
    }
    token = tmp_path / "answer.json"
    token.write_text(json.dumps(answer))
    code, out, err = run(capsys, "--config", str(config), "--token-file", str(token), "--all")
    assert code == 0, err
    assert f"token: issuer {KEYCLOAK} (tokens: introspection)" in out
    assert "  scope 'mcp:access' -> prefix mcp:access -> not mapped" in out
    assert (
        "warning: the gateway would refuse this token now: an ID token presented as bearer" in out
    )


def test_groups_print_their_prefix_and_an_overage_is_flagged(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    now = int(time.time())
    answer = {
        "active": True,
        "iss": KEYCLOAK,
        "aud": "https://mcp.example.com/mcp",
        "exp": now + 300,
        "iat": now,
        "sub": "svc",
        "client_id": "ci-bot",
        "scope": "mcp:access",
        "groups": ["/sre"],
    }
    token = tmp_path / "answer.json"
    token.write_text(json.dumps(answer))
    code, out, err = run(capsys, "--config", str(config), "--token-file", str(token), "--all")
    assert code == 0, err
    assert "  groups '/sre' -> group prefix group:/sre -> not mapped" in out
    assert "policy scopes: group:/sre mcp:access" in out
    assert "would refuse" not in out
    del answer["groups"]
    token.write_text(json.dumps({**answer, "hasgroups": True}))
    code, out, err = run(capsys, "--config", str(config), "--token-file", str(token), "--all")
    assert code == 0, err
    assert "warning: the gateway would refuse this token now: group overage" in out


def test_secret_references_whose_values_are_checked_are_not_read_either(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Issue 43: an unread admin.token was "shorter than 32 characters", an unread
    # state.redis.url "not a redis:// URL", an unread seal key "not 32 bytes": exit 1.
    unset = "{env: EXPLAIN_TOKEN_UNSET_SECRET}"
    (config.parent / "ca.pem").write_text("not read either\n")
    with config.open("a") as extra:
        extra.write(
            f"admin: {{token: {unset}}}\n"
            f"state: {{backend: redis, redis: {{url: {unset}, tls: {{ca_file: ca.pem}}}}}}\n"
            f"input_requests: {{seal_keys: [{{id: k1, key: {unset}}}]}}\n"
        )
    token = tmp_path / "token.jwt"
    token.write_text(compact(entra_claims()) + "\n")
    code, out, err = run(
        capsys, "--config", str(config), "--token-file", str(token), "--tool", "search_notes"
    )
    assert code == 0, err
    assert "search_notes  allow" in out


@pytest.mark.parametrize(
    ("content", "extra", "message"),
    [
        ("not a token", (), "neither a JSON object of claims nor a compact JWT"),
        (
            '{"iss": "https://other.example.com"}',
            (),
            "no configured issuer has url https://other.example.com",
        ),
        ('{"sub": "x"}', ("--issuer", "https://nope.example.com"), "no configured issuer"),
    ],
)
def test_unreadable_token_files_are_clear_errors(
    config: Path,
    capsys: pytest.CaptureFixture[str],
    content: str,
    extra: tuple[str, ...],
    message: str,
) -> None:
    token = config.parent / "token"
    token.write_text(content)
    code, out, err = run(
        capsys, "--config", str(config), "--token-file", str(token), "--all", *extra
    )
    assert code == 1 and out == ""
    assert err.startswith(f"{token}: cannot read the token: ") and message in err


def test_token_file_usage_errors(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    token = tmp_path / "token.json"
    token.write_text("{}")
    both = ("--config", str(config), "--token-file", str(token), "--scopes", "a", "--all")
    assert run(capsys, *both)[0] == 2
    assert run(capsys, "--token-file", str(token), "--all", "--policy", str(config))[0] == 2
    # Without --token-file, --issuer names the principal's issuer: one of the configured.
    code, _, err = run(capsys, "--config", str(config), "--issuer", "https://x.example", "--all")
    assert code == 1 and "--issuer https://x.example: no configured issuer" in err
