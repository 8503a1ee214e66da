"""``mcp-gateway check`` and ``policy explain`` on whose names a rule's ``subjects`` and
``clients`` are (issue 43 item 5), run as operators run them (``python -m gateway.commands``).

With several issuers a plain entry applies to the first one only: ``check`` warns about such a
rule (exit 0: it only ever grants less) and about an entry naming an issuer that is not
configured; ``policy explain`` shows each entry's issuer and decides for the issuer ``--issuer``
names.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.unit.test_check_command import run, write

FIRST = "https://login.example.com/tenant/v2.0"
SECOND = "https://partner.example.com"
GATEWAY = f"""\
resource: https://mcp.example.com/mcp
issuers:
  - url: {FIRST}
    tokens: jwt
  - url: {SECOND}
    tokens: jwt
backend:
  url: https://tools.example.com/mcp
  credential: {{type: bearer, token: {{env: CHECK_TEST_TOKEN}}}}
policy: policies
"""
POLICY = f"""\
version: 1
baseline_scopes: [mcp:access]
tools:
  admin_reset: {{scopes: [], clients: [ops-console]}}
  shared:
    scopes: []
    subjects: [{{issuer: "{FIRST}", subject: alice}}, {{issuer: "{SECOND}/", subject: bob}}]
"""


def warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("warning: ")]


def test_check_warns_about_a_plain_entry_under_several_issuers_and_an_unknown_issuer(
    tmp_path: Path,
) -> None:
    write(tmp_path, GATEWAY, POLICY)
    result = run("check", "--config", "gateway.yaml", "--skip-secrets", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr  # a warning, not a refusal
    policy = tmp_path / "policies" / "main.yaml"
    assert warnings(result.stderr) == [
        f"warning: {policy}:4:3: tools.admin_reset: client 'ops-console' name no issuer, so "
        f"they apply to the first issuer only ({FIRST}) of the 2 configured; write "
        "{issuer: <url>, client: ...} to say whose",
        f"warning: {policy}:7:83: tools.shared.subjects: issuer {SECOND}/ is not configured "
        f"(did you mean {SECOND}? issuers are compared exactly): 'bob' applies to no caller",
    ]
    # Qualified as written (and one issuer's url exact): nothing to say.
    write(
        tmp_path,
        GATEWAY,
        POLICY.replace("[ops-console]", f"[{{issuer: {FIRST}, client: ops-console}}]").replace(
            f"{SECOND}/", SECOND
        ),
    )
    result = run("check", "--config", "gateway.yaml", "--skip-secrets", cwd=tmp_path)
    assert (result.returncode, warnings(result.stderr)) == (0, [])


def test_a_single_issuer_reads_plain_entries_without_a_warning(tmp_path: Path) -> None:
    single = GATEWAY.replace(f"  - url: {SECOND}\n    tokens: jwt\n", "")
    write(tmp_path, single, POLICY.replace(f', {{issuer: "{SECOND}/", subject: bob}}', ""))
    result = run("check", "--config", "gateway.yaml", "--skip-secrets", cwd=tmp_path)
    assert (result.returncode, warnings(result.stderr)) == (0, []), result.stderr


def test_explain_shows_each_entrys_issuer_and_decides_for_the_issuer_named(
    tmp_path: Path,
) -> None:
    write(tmp_path, GATEWAY, POLICY.replace(f"{SECOND}/", SECOND))
    base = ("policy", "explain", "--config", "gateway.yaml", "--scopes", "mcp:access")
    first = run(*base, "--client-id", "ops-console", "--tool", "admin_reset", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    lines = first.stdout.splitlines()
    assert f"principal: sub=- client_id=ops-console issuer={FIRST} scopes=mcp:access" in lines
    assert lines[4].split()[:4] == ["admin_reset", "allow", "admin_reset", "allow"]
    assert f"who: admin_reset: clients 'ops-console' of the first issuer ({FIRST})" in lines
    second = run(
        *base,
        "--client-id",
        "ops-console",
        "--issuer",
        SECOND,
        "--tool",
        "admin_reset",
        "--json",
        cwd=tmp_path,
    )
    assert second.returncode == 0, second.stderr
    report = json.loads(second.stdout)
    assert report["principal"]["issuer"] == SECOND
    (row,) = report["results"]
    assert (row["decision"], row["reason"]) == ("hidden", "client")
    assert row["clients"] == [{"name": "ops-console", "issuer": FIRST, "qualified": False}]
    bob = run(*base, "--sub", "bob", "--issuer", SECOND, "--tool", "shared", cwd=tmp_path)
    assert "shared  allow" in bob.stdout
    assert f"who: shared: subjects 'alice' of {FIRST}, 'bob' of {SECOND}" in bob.stdout.splitlines()
