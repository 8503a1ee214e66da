"""The ``mcp-gateway`` command line: check, version, --help, every subcommand, serve errors."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.commands import cli
from gateway.commands.cli import main
from gateway.config import Config
from gateway.policy import policy_loader

pytestmark = pytest.mark.usefixtures("restore_logging")

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "config"
ENV = {"TEST_INTROSPECTION_SECRET": "introspection-secret", "TEST_BACKEND_TOKEN": "backend-token"}


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv(cli.CONFIG_ENV, raising=False)


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gateway.commands", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        check=False,
    )


class TestCheck:
    def test_check_lists_an_unknown_key_a_wrong_type_and_a_missing_key_with_lines_and_exits_1(
        self,
    ) -> None:
        bad = "tests/fixtures/config/bad.yaml"
        result = _run("check", "--config", bad, env=ENV)
        assert result.returncode == 1
        assert result.stdout.splitlines() == [
            f"{bad}:3:25: listen.prot: unknown key",
            f'{bad}:4:1: issuer: required key "client_id" is missing',
            f'{bad}:10:3: backend.timeout_s: "ten seconds" is not a number',
        ]
        assert f"{bad}: 3 problems" in result.stderr

    def test_check_of_a_valid_file_exits_0_and_says_ok(
        self, env: None, capsys: pytest.CaptureFixture[str]
    ) -> None:
        assert main(["check", "--config", str(FIXTURES / "minimal.yaml")]) == 0
        assert capsys.readouterr().out.startswith(f"{FIXTURES / 'minimal.yaml'}: OK")

    def test_check_warns_about_a_literal_secret_on_stderr_without_printing_it(
        self, env: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        shutil.copy(FIXTURES / "policy.yaml", tmp_path / "policy.yaml")
        text = (FIXTURES / "minimal.yaml").read_text(encoding="utf-8")
        target = tmp_path / "gateway.yaml"
        target.write_text(text.replace("{env: TEST_BACKEND_TOKEN}", "s3cr3t-literal"), "utf-8")
        assert main(["check", "--config", str(target)]) == 0
        out, err = capsys.readouterr()
        assert "backend.credential.token: literal secret" in err
        assert "s3cr3t-literal" not in out + err

    def test_the_config_path_may_come_from_mcp_gateway_config(
        self, env: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        monkeypatch.setenv(cli.CONFIG_ENV, str(FIXTURES / "minimal.yaml"))
        assert main(["check"]) == 0
        assert ": OK" in capsys.readouterr().out

    def test_check_without_any_config_is_a_usage_error(
        self, env: None, capsys: pytest.CaptureFixture[str]
    ) -> None:
        with pytest.raises(SystemExit) as info:
            main(["check"])
        assert info.value.code == 2
        assert "pass --config PATH or set MCP_GATEWAY_CONFIG" in capsys.readouterr().err

    def test_check_reports_the_policy_loaders_problems_and_exits_1(
        self,
        env: None,
        monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        seen: list[object] = []

        def inspect_policy(paths: object, **_: object) -> object:
            seen.append(paths)
            problem = "policy.yaml:3:3: tools.search_docs.scopes: must be a list"
            return policy_loader.PolicyReport((problem,), None)

        monkeypatch.setattr(policy_loader, "inspect_policy", inspect_policy)
        assert main(["check", "--config", str(FIXTURES / "minimal.yaml")]) == 1
        out, err = capsys.readouterr()
        assert out.splitlines() == ["policy.yaml:3:3: tools.search_docs.scopes: must be a list"]
        assert "1 problem" in err
        assert seen == [(FIXTURES / "policy.yaml",)]

    def test_check_names_the_policy_version_when_the_loader_accepts_the_files(
        self, env: None, capsys: pytest.CaptureFixture[str]
    ) -> None:
        version = policy_loader.load_policy((FIXTURES / "policy.yaml",)).version
        assert main(["check", "--config", str(FIXTURES / "minimal.yaml")]) == 0
        assert f"OK (policy version {version})" in capsys.readouterr().out


class TestCommands:
    def test_version_prints_the_distribution_version(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        assert main(["version"]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert lines == [f"mcp-gateway {cli._version()}"]  # one line: no build variants

    @pytest.mark.parametrize(
        "argv",
        [[], ["serve"], ["check"], ["version"], ["demo"], ["policy"]],
        ids=["mcp-gateway", "serve", "check", "version", "demo", "policy"],
    )
    def test_every_command_has_help(
        self, argv: list[str], capsys: pytest.CaptureFixture[str]
    ) -> None:
        with pytest.raises(SystemExit) as info:
            main([*argv, "--help"])
        assert info.value.code == 0
        assert "usage: mcp-gateway" in capsys.readouterr().out

    def test_global_log_options_work_before_and_after_the_command(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        parser = cli.build_parser()
        before = parser.parse_args(["--log-format", "console", "version"])
        after = parser.parse_args(["version", "--log-level", "debug"])
        assert before.log_format == "console"
        assert after.log_level == "debug"

    @pytest.mark.parametrize(
        ("argv", "settings"),
        [
            (["--log-format", "json", "demo"], ("json", "info")),
            (["--log-format", "json", "--log-level", "debug", "demo"], ("json", "debug")),
            (["demo", "--log-format", "json"], ("json", "info")),
            (["demo"], ("console", "info")),
        ],
    )
    def test_the_demo_honours_the_global_log_options(
        self, argv: list[str], settings: tuple[str, str]
    ) -> None:
        from gateway.commands.demo import log_settings

        args = cli.build_parser().parse_args(argv)
        assert log_settings(args) == settings

    def test_an_unknown_command_is_a_usage_error(self, capsys: pytest.CaptureFixture[str]) -> None:
        with pytest.raises(SystemExit) as info:
            main(["frobnicate"])
        assert info.value.code == 2


class TestSubcommands:
    @pytest.mark.parametrize(
        ("argv", "words"),
        [
            (["demo", "--help"], "demo"),
            (["demo", "token", "--help"], "token"),
            (["policy", "explain", "--help"], "--token-file"),
            (["revoke", "--help"], "--key"),
            (["audit", "verify", "--help"], "FILE"),
            (["catalog", "approve", "--help"], "NAME"),
        ],
    )
    def test_each_subcommand_of_another_layer_answers_in_a_fresh_process(
        self, argv: list[str], words: str
    ) -> None:
        result = _run(*argv)
        assert result.returncode == 0, result.stderr
        assert words in result.stdout

    def test_the_subcommands_are_plain_imports_the_layer_test_sees(self) -> None:
        """No module is imported by name at run time (nothing hides a dependency)."""
        source = (ROOT / "gateway" / "commands" / "cli.py").read_text(encoding="utf-8")
        assert "import_module" not in source and "__import__" not in source
        registered = {register.__module__ for register in cli.SUBCOMMANDS}
        commands = (
            "serve",
            "check",
            "cli",
            "demo",
            "policy_explain",
            "revoke",
            "audit_command",
            "catalog_command",
            "upstream_tokens_command",
            "connect_command",
        )
        assert registered == {f"gateway.commands.{name}" for name in commands}


class TestServeRefusesToStart:
    def test_serve_with_an_invalid_config_prints_every_problem_and_exits_1(
        self, env: None, capsys: pytest.CaptureFixture[str]
    ) -> None:
        assert main(["serve", "--config", str(FIXTURES / "bad.yaml")]) == 1
        assert len(capsys.readouterr().out.splitlines()) == 3

    def test_serve_exits_1_when_its_port_is_taken(self, env: None, tmp_path: Path) -> None:
        shutil.copy(FIXTURES / "policy.yaml", tmp_path / "policy.yaml")
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = taken.getsockname()[1]
            text = (FIXTURES / "minimal.yaml").read_text(encoding="utf-8")
            text += f"listen: {{host: 127.0.0.1, port: {port}}}\n"
            text += "ops_listen: {host: 127.0.0.1, port: 0}\n"
            (tmp_path / "gateway.yaml").write_text(text, encoding="utf-8")
            assert main(["serve", "--config", str(tmp_path / "gateway.yaml")]) == 1

    def test_serve_exits_1_when_the_audit_file_cannot_be_opened(
        self, env: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        shutil.copy(FIXTURES / "policy.yaml", tmp_path / "policy.yaml")
        (tmp_path / "audit-is-a-directory").mkdir()
        text = (FIXTURES / "minimal.yaml").read_text(encoding="utf-8")
        text += "audit: {sink: file, path: audit-is-a-directory}\n"
        (tmp_path / "gateway.yaml").write_text(text, encoding="utf-8")
        assert main(["serve", "--config", str(tmp_path / "gateway.yaml")]) == 1
        events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert events[-1]["event"] == "gateway.startup_failed"


def test_the_shipped_example_configuration_and_policy_pass_check(
    env: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # deploy/gateway.example.yaml as mounted in the container: policies/ next to it.
    shutil.copytree(ROOT / "policies", tmp_path / "policies")
    (tmp_path / "backend-token").write_text("token\n", encoding="utf-8")
    text = (ROOT / "deploy" / "gateway.example.yaml").read_text(encoding="utf-8")
    text = text.replace("/run/secrets/backend-token", str(tmp_path / "backend-token"))
    (tmp_path / "gateway.yaml").write_text(text, encoding="utf-8")
    monkeypatch.setenv("GATEWAY_INTROSPECTION_SECRET", "secret")
    assert main(["check", "--config", str(tmp_path / "gateway.yaml")]) == 0
    out, err = capsys.readouterr()
    assert ": OK" in out
    assert "literal secret" not in err


def test_an_unknown_option_of_a_real_command_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as info:
        main(["version", "--verbose"])
    assert info.value.code == 2
    assert "unrecognized arguments: --verbose" in capsys.readouterr().err


class TestContainerImage:
    """Docker cannot run here; these pin what the Dockerfile promises about the command."""

    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")

    def _instruction(self, name: str) -> str:
        lines = [line for line in self.dockerfile.splitlines() if line.startswith(name + " ")]
        assert lines, name
        return lines[-1][len(name) + 1 :]

    def test_the_image_runs_mcp_gateway_serve_with_the_documented_config_path(self) -> None:
        assert json.loads(self._instruction("ENTRYPOINT")) == ["mcp-gateway"]
        command = json.loads(self._instruction("CMD"))
        assert command == ["serve", "--config", "/etc/mcp-gateway/gateway.yaml"]
        args = cli.build_parser().parse_args(command)
        assert (args.command, args.config) == ("serve", "/etc/mcp-gateway/gateway.yaml")

    def test_the_final_stage_is_non_root_and_exposes_both_listeners(self) -> None:
        final_stage = self.dockerfile.rsplit("\nFROM ", 1)[1]
        assert "\nUSER 10001:10001\n" in final_stage
        assert "EXPOSE 8080 9090" in final_stage
        assert "HEALTHCHECK" in final_stage
        # Built in the builder stage; the runtime stage installs nothing.
        assert "pip install" not in final_stage
        assert "apt-get" not in final_stage

    def test_the_image_builds_the_pure_package_without_a_compiler(self) -> None:
        builder, final_stage = self.dockerfile.rsplit("\nFROM ", 1)
        assert "/opt/venv/bin/python -m pip wheel --no-deps" in builder
        assert "/opt/venv/bin/mcp-gateway version" in builder
        for word in ("gcc", "python3-dev", "MCP_GATEWAY_COMPILE", "mypyc", "apt-get"):
            assert word not in self.dockerfile, word
        assert "COPY --from=builder /opt/venv /opt/venv" in final_stage

    def test_the_healthcheck_probes_the_default_ops_listener(self) -> None:
        ops = Config.__dataclass_fields__["ops_listen"].default
        assert f"http://127.0.0.1:{ops.port}/healthz" in self.dockerfile  # type: ignore[attr-defined]
