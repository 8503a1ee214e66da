"""The features phase's per-user upstream authorization variants (``make bench``; issue 45: the
cost of a call with a stored token beside a service-credential call, target within 20 µs).

A ``user_oauth`` backend keeps each person's upstream token in the shared store; the bench
token's person has a record in a Redis of its own (``redis-server``, no persistence), sealed
with the gateway's own codec (:mod:`gateway.state.upstream_tokens`) under a key only the bench
knows, whose access token is the bench backend's service token (so the backend accepts the
call as it accepts the defaults'). Two variants, beside the defaults each:

* ``state redis, service credential``: the reference of the next (the same store, the backend's
  service credential);
* ``user_oauth, a stored token (state redis)``: the backend's credential is ``user_oauth``; each
  call looks the person's record up (a replica's memory after the first read) and carries its
  token.

The difference of the two is what a stored token costs per call.
"""

from __future__ import annotations

import asyncio
import base64
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from bench_procs import free_port, wait_port

from gateway.config import RedisConfig, SealKey, Secret
from gateway.state.browser_records import owner_digest
from gateway.state.store import RedisStore
from gateway.state.upstream_tokens import RecordSeal, UpstreamRecord
from gateway.state.upstream_tokens_redis import RedisUpstreamTokens

__all__ = ["UserOAuthBench"]

KEY_PREFIX = "bench:"


class UserOAuthBench:
    """The Redis and the overrides of the two variants (module docstring)."""

    def __init__(self, work: Path, *, resource: str, issuer: str, backend: dict[str, Any]) -> None:
        self.work = work
        self.resource = resource
        self.issuer = issuer
        self.backend = backend
        self.redis: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        binary = shutil.which("redis-server") or "/usr/bin/redis-server"
        port = free_port()
        command = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", ""]
        command += ["--appendonly", "no"]
        self.redis = subprocess.Popen(command, stdout=subprocess.DEVNULL)  # noqa: S603
        wait_port(port, self.redis, "redis-server")
        url = f"redis://127.0.0.1:{port}/0"
        (self.work / "redis-url").write_text(url)
        key = os.urandom(32)
        (self.work / "upstream-key").write_text(base64.b64encode(key).decode())
        asyncio.run(self._seed(url, key))

    def stop(self) -> None:
        if self.redis is not None and self.redis.poll() is None:
            self.redis.terminate()
            self.redis.wait(timeout=10)

    async def _seed(self, url: str, key: bytes) -> None:
        """The bench person's record: the backend's service token, valid for the run."""
        store = RedisStore(RedisConfig(url=Secret(url, "bench"), key_prefix=KEY_PREFIX))
        try:
            seal = RecordSeal((SealKey("bench", key),), "bench", resource=self.resource)
            tokens = RedisUpstreamTokens(store, seal, max_idle_s=86_400.0)
            record = UpstreamRecord(
                issuer=self.issuer,
                subject="bench",
                backend="default",
                server=self.issuer,
                client_id="mcp-gateway",
                access_token=(self.work / "svc-token").read_text().strip(),
                refresh_token=None,
                expires_at=time.time() + 86_400,
                scope="",
                connected_at=int(time.time()),
            )
            await tokens.put(owner_digest(self.issuer, "bench"), record, expect=None)
        finally:
            await store.close()

    def variants(self) -> list[tuple[str, dict[str, Any]]]:
        state = {
            "backend": "redis",
            "redis": {"url": {"file": str(self.work / "redis-url")}, "key_prefix": KEY_PREFIX},
        }
        secret = {"file": str(self.work / "gw-secret")}
        keys = {"seal_keys": [{"id": "bench", "key": {"file": str(self.work / "upstream-key")}}]}
        user = {
            **self.backend,
            "credential": {
                "type": "user_oauth",
                "authorization_server": self.issuer,
                "authorization_endpoint": self.issuer + "/authorize",
                "token_endpoint": self.issuer + "/token",
                "client_id": "mcp-gateway",
                "client_secret": secret,
                "catalog_token": {"file": str(self.work / "svc-token")},
            },
        }
        return [
            ("state redis, service credential", {"state": state}),
            (
                "user_oauth, a stored token (state redis)",
                {
                    "state": state,
                    "backend": user,
                    "user_oauth": keys,
                    "input_requests": keys,
                    "login": {"client_id": "mcp-gateway", "client_secret": secret},
                },
            ),
        ]
