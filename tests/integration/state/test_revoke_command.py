"""``mcp-gateway revoke --config`` needs the ops address and the admin token, nothing else.

Issue 32 item 9: the command loaded the whole configuration, so on a machine (or in a shell)
without the issuer's client secret or the backend's token it refused to run. Real processes: a
gateway replica (``tests/support/replicas.py``) and the command, run as an operator runs it.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.support.replicas import ROOT, ReplicaStack, gateway_command, replica_stack

pytestmark = pytest.mark.slow


def revoke(*args: str, stdin: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REVOKE_TEST_")}
    env.pop("MCP_GATEWAY_ADMIN_TOKEN", None)  # the credential must come from admin.token
    env.pop("MCP_GATEWAY_CONFIG", None)
    env["PYTHONPATH"] = str(ROOT)
    return gateway_command("revoke", *args, stdin=stdin, cwd=cwd, env=env)


def without_other_secrets(stack: ReplicaStack, name: str) -> Path:
    """The replica's configuration with every secret but ``admin.token`` unresolvable here."""
    config = json.loads(stack.replicas[0].config_path.read_text())
    config["issuer"]["client_secret"] = {"env": "REVOKE_TEST_UNSET_SECRET"}
    config["backend"]["credential"]["token"] = {"file": "no-such-backend-token"}
    path = stack.workdir / name
    path.write_text(json.dumps(config))
    return path


async def test_revoke_with_only_the_ops_address_and_the_admin_token_readable(
    tmp_path: Path,
) -> None:
    async with replica_stack(tmp_path, None, replicas=1) as stack:
        (replica,) = stack.replicas
        token = stack.mint()
        assert (await stack.post(replica, token, "tools/list"))[0] == 200
        config = without_other_secrets(stack, "ops-only.yaml")
        result = revoke("--config", str(config), "--token-file", "-", stdin=token, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith("revoked (this_replica) until ")
        assert (await stack.post(replica, token, "tools/list"))[0] == 401


def test_revoke_still_names_a_problem_in_the_two_sections_it_reads(tmp_path: Path) -> None:
    base = {
        "resource": "https://mcp.example.com/mcp",
        "issuer": {
            "url": "https://id.example.com",
            "client_id": "c",
            "client_secret": {"env": "REVOKE_TEST_UNSET_SECRET"},
        },
        "backend": {
            "url": "https://b.example.com/mcp",
            "credential": {"type": "bearer", "token": {"file": "missing"}},
        },
        "policy": "policy.yaml",
    }
    path = tmp_path / "gateway.yaml"
    path.write_text(json.dumps({**base, "ops_listen": {"host": "127.0.0.1", "port": "ninety"}}))
    result = revoke("--config", str(path), "--token-file", "-", stdin="t", cwd=tmp_path)
    assert result.returncode == 2
    (problem,) = result.stderr.splitlines()[1:]  # only this one: no secret was missed
    assert problem.startswith(f"{path}:1:")
    assert problem.endswith(': ops_listen.port: "ninety" is not an integer')
    path.write_text(json.dumps({**base, "admin": {"token": {"env": "REVOKE_TEST_UNSET_ADMIN"}}}))
    result = revoke("--config", str(path), "--token-file", "-", stdin="t", cwd=tmp_path)
    assert result.returncode == 2
    assert "admin.token" in result.stderr and "REVOKE_TEST_UNSET_ADMIN" in result.stderr
    assert "client_secret" not in result.stderr and "backend" not in result.stderr
    path.write_text(json.dumps(base))
    result = revoke("--config", str(path), "--token-file", "-", stdin="t", cwd=tmp_path)
    assert result.returncode == 2
    assert "admin.token is not set: the gateway has no admin endpoint" in result.stderr
