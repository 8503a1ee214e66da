"""The container image test's peers on the host: a development issuer and a demo backend.

DEVELOPMENT ONLY (``scripts/image_test.sh`` runs it). Writes, into ``--dir``, a ``gateway.yaml``
for ``mcp-gateway serve`` inside the container (host networking: everything on 127.0.0.1), the
secret files it references, and a copy of ``gateway/dev/demo-policy.yaml``; prints one JSON
line with the URLs and a reader token, then serves until SIGTERM/SIGINT.

The backend's ``echo`` tool sleeps ``--slow-s`` seconds before answering when the text is
``slow``, so the image test can hold a call in flight while it sends SIGTERM (drain check).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import shutil
import signal
import socket
import sys
from pathlib import Path
from typing import Any

from aiohttp import web

from gateway.dev.demo_backend import DemoBackend
from gateway.dev.dev_issuer import DevIssuer

ROOT = Path(__file__).resolve().parents[1]
CONTAINER_UID = 10001


class SlowEchoBackend(DemoBackend):
    """The demo backend, with ``echo {"text": "slow"}`` taking ``slow_s`` seconds."""

    slow_s: float = 3.0

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()  # cached: the parent handler reads it again
        try:
            message: Any = json.loads(body)
        except ValueError:
            message = None
        if isinstance(message, dict):
            params = message.get("params") or {}
            if params.get("name") == "echo" and params.get("arguments") == {"text": "slow"}:
                await asyncio.sleep(self.slow_s)
        return await super()._handle(request)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _write(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")
    # The container runs as uid 10001 and reads the mounted directory.
    if os.geteuid() == 0:
        os.chown(path, CONTAINER_UID, CONTAINER_UID)
        path.chmod(0o400)
    else:
        path.chmod(0o444)


async def main(args: argparse.Namespace) -> int:
    workdir = Path(args.dir)
    workdir.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240 - before serving
    port, ops_port = _free_port(), _free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    issuer = DevIssuer("127.0.0.1", 0, resources=[resource])
    backend = SlowEchoBackend("127.0.0.1", 0, service_token=secrets.token_urlsafe(32))
    backend.slow_s = args.slow_s
    await issuer.start()
    await backend.start()
    client_secret = secrets.token_urlsafe(32)
    issuer.register_client("mcp-gateway", client_secret, scopes=["mcp:access"], can_introspect=True)
    _write(workdir / "issuer-client-secret", client_secret + "\n")
    _write(workdir / "backend-service-token", backend.service_token + "\n")
    shutil.copy(ROOT / "gateway" / "dev" / "demo-policy.yaml", workdir / "policy.yaml")
    (workdir / "policy.yaml").chmod(0o444)
    _write(
        workdir / "gateway.yaml",
        f"""# Written by scripts/image_test_peers.py for the container image test.
resource: {json.dumps(resource)}
listen: {{host: 127.0.0.1, port: {port}}}
ops_listen: {{host: 127.0.0.1, port: {ops_port}}}
issuer:
  url: {json.dumps(issuer.url)}
  client_id: mcp-gateway
  client_secret: {{file: issuer-client-secret}}
  allow_insecure_http: true
backend:
  url: {json.dumps(backend.url)}
  allow_insecure_http: true
  credential: {{type: bearer, token: {{file: backend-service-token}}}}
policy: policy.yaml
limits: {{drain_timeout_s: {args.drain_s}}}
audit: {{sink: stdout}}
"""
        + (
            "state: {backend: redis, redis: {url: {file: redis-url}}, share_token_cache: true}\n"
            if args.redis_url
            else ""
        ),
    )
    if args.redis_url:
        _write(workdir / "redis-url", args.redis_url + "\n")
    token = issuer.mint_token(sub="image-test", scopes="mcp:access notes:read", ttl_s=3600)
    info = {
        "mcp_url": resource,
        "ops_url": f"http://127.0.0.1:{ops_port}",
        "token": token,
        "issuer_url": issuer.url,
    }
    print(json.dumps(info), flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await backend.stop()
    await issuer.stop()
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", required=True, help="where gateway.yaml and secrets are written")
    parser.add_argument("--slow-s", type=float, default=3.0)
    parser.add_argument("--drain-s", type=float, default=8.0)
    parser.add_argument("--redis-url", help="run the gateway with state.backend: redis")
    sys.exit(asyncio.run(main(parser.parse_args())))
