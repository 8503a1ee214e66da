"""``mcp-gateway serve --workers``: the option, what the supervisor refuses, the reserved port."""

from __future__ import annotations

import json
import os
import shutil
import socket
from pathlib import Path

import pytest

from gateway.commands import serve
from gateway.commands.cli import build_parser, main
from gateway.workers.supervisor import reserve_port

pytestmark = pytest.mark.usefixtures("restore_logging")

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures" / "config"
ENV = {"TEST_INTROSPECTION_SECRET": "introspection-secret", "TEST_BACKEND_TOKEN": "backend-token"}


@pytest.fixture
def config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    shutil.copy(FIXTURES / "policy.yaml", tmp_path / "policy.yaml")
    path = tmp_path / "gateway.yaml"
    path.write_text((FIXTURES / "minimal.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    return path


@pytest.mark.parametrize("value", ["0", "-1", "many", "257", ""])
def test_a_bad_worker_count_is_a_usage_error(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        main(["serve", "--config", "gateway.yaml", "--workers", value])
    assert info.value.code == 2
    assert "--workers" in capsys.readouterr().err


def test_auto_is_the_number_of_cpus_this_process_may_use() -> None:
    args = build_parser().parse_args(["serve", "--workers", "auto"])
    assert args.workers == len(os.sched_getaffinity(0))
    assert build_parser().parse_args(["serve"]).workers == 1


def test_the_worker_options_go_together(config: Path) -> None:
    with pytest.raises(SystemExit) as info:
        main(["serve", "--config", str(config), "--worker-slot", "0"])
    assert info.value.code == 2


def test_an_audit_file_is_refused_with_several_workers(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with config.open("a", encoding="utf-8") as handle:
        handle.write(f"audit: {{sink: file, path: {config.parent / 'audit.jsonl'}}}\n")
    assert main(["serve", "--config", str(config), "--workers", "2"]) == 1
    out = capsys.readouterr().out
    assert "audit.sink: file cannot be shared by 2 worker processes" in out
    assert not (config.parent / "audit.jsonl").exists()


def test_dpop_with_memory_state_is_refused_with_several_workers(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each worker's own replay record would let a proof replayed at another worker pass."""
    text = config.read_text(encoding="utf-8")
    assert "issuer:\n" in text
    config.write_text(text.replace("issuer:\n", "issuer:\n  dpop: allowed\n", 1), encoding="utf-8")
    assert main(["serve", "--config", str(config), "--workers", "2"]) == 1
    assert (
        "issuer.dpop needs state.backend: redis with 2 worker processes" in capsys.readouterr().out
    )


def _taken_port(config: Path, taken: socket.socket) -> None:
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    with config.open("a", encoding="utf-8") as handle:
        handle.write(f"listen: {{host: 127.0.0.1, port: {port}}}\n")
        handle.write("ops_listen: {host: 127.0.0.1, port: 0}\n")


def test_the_supervisor_exits_1_when_the_public_port_is_taken(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as taken:
        _taken_port(config, taken)
        assert main(["serve", "--config", str(config), "--workers", "2"]) == 1
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert events[-1]["event"] == "gateway.bind_failed"
    assert events[-1]["error"] == "OSError"


def test_one_worker_is_the_single_process_gateway(
    config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_supervisor(*args: object, **kwargs: object) -> None:
        raise AssertionError("--workers 1 must not start a supervisor")

    monkeypatch.setattr(serve, "Supervisor", no_supervisor)
    with socket.socket() as taken:
        _taken_port(config, taken)
        assert main(["serve", "--config", str(config), "--workers", "1"]) == 1


def test_the_reserved_port_takes_reuse_port_listeners_and_refuses_others() -> None:
    reserved, port = reserve_port("127.0.0.1", 0)
    try:
        assert port > 0 and len(reserved) == 1
        listeners = []
        for _ in range(2):  # two workers
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind(("127.0.0.1", port))
            sock.listen()
            listeners.append(sock)
        with socket.socket() as other, pytest.raises(OSError):
            other.bind(("127.0.0.1", port))  # no one else gets the port
        # A connection goes to a listening worker, never to the reserved socket.
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            pass
        for sock in listeners:
            sock.close()
        # With no worker listening the port stays reserved and refuses connections.
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
    finally:
        for sock in reserved:
            sock.close()


def test_a_port_another_group_holds_with_reuse_port_is_refused() -> None:
    with socket.socket() as other:
        other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        other.bind(("127.0.0.1", 0))
        other.listen()
        with pytest.raises(OSError):
            reserve_port("127.0.0.1", other.getsockname()[1])
