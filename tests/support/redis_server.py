"""A real ``redis-server`` on 127.0.0.1 for the tests: its own temp dir, no persistence.

``redis_server`` (fixture, one server per test module) yields a :class:`RedisServer`; tests
that stop and restart Redis start their own with :meth:`RedisServer.launch`. Every test should
use its own ``key_prefix`` (:func:`unique_prefix`) rather than flushing a shared server.
The tests skip, saying why, only when the ``redis-server`` binary is really absent
(``.ci/run`` installs the Debian package).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from tests.support.ports import free_port

__all__ = ["RedisServer", "redis_server", "require_redis_server", "unique_prefix"]

START_TIMEOUT_S = 10.0


def require_redis_server() -> str:
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed (Debian: apt-get install -y redis-server)")
    return binary


def unique_prefix() -> str:
    return f"t{os.urandom(6).hex()}:"


@dataclass
class RedisServer:
    port: int
    workdir: Path
    binary: str
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @classmethod
    def launch(cls, workdir: Path | None = None) -> RedisServer:
        binary = require_redis_server()
        server = cls(free_port(), Path(workdir or tempfile.mkdtemp(prefix="redis-test-")), binary)
        server.start()
        return server

    def start(self) -> None:
        """Start (or restart, on the same port) and wait until it answers PING."""
        assert self.process is None, "already running"
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [
                self.binary,
                "--bind",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.workdir),
                "--logfile",
                str(self.workdir / "redis.log"),
                "--daemonize",
                "no",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if self.process.poll() is not None:
                log = (self.workdir / "redis.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"redis-server exited at start:\n{log}")
            with contextlib.suppress(redis.RedisError, OSError):
                if self.client().ping():
                    return
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("redis-server did not answer PING in time")
            time.sleep(0.02)

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=2)

    def stop(self) -> None:
        """Stop by PID (SIGTERM, then SIGKILL) and wait for the port to be free."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)

    def destroy(self) -> None:
        self.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)


@pytest.fixture(scope="module")
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer.launch()
    try:
        yield server
    finally:
        server.destroy()
