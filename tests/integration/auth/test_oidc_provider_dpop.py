"""A certified issuer's DPoP-bound tokens at the gateway: the node ``oidc-provider`` (RFC 9449).

``tests/interop/oidc-provider/server.mjs`` runs oidc-provider 9 (OpenID Certified) with its DPoP
feature on: a client asks its token endpoint for a token with a proof (``client_credentials``),
and it issues an RFC 9068 JWT (or an opaque token, introspected) bound to the client's key
(``cnf.jkt``). The gateway, with ``dpop: required``, serves the client's request with a fresh
proof, and refuses the token as Bearer and a replayed proof. The proofs come from the tests'
own client (:mod:`tests.support.dpop_client`).

Needs ``node`` and ``npm ci --prefix tests/interop/oidc-provider`` (``.ci/run`` does it and
requires it through ``MCP_GATEWAY_TEST_REQUIRE``); skipped, saying why, otherwise.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import shutil
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, Final

import aiohttp
import pytest
import yaml

from tests.integration.auth.test_dpop_http import RESOURCE, assert_row, dpop, send
from tests.support.dpop_client import DpopKey
from tests.support.jwt_stack import metric
from tests.support.live_stack import LiveStack, ServerFactory
from tests.support.ports import free_port
from tests.support.upstreams import ModernUpstream
from tests.support.wired import wired_gateway

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::ResourceWarning")]

INTEROP: Final = Path(__file__).resolve().parents[2] / "interop" / "oidc-provider"
GATEWAY_SECRET: Final = "oidc-provider-gateway-secret-0123"
CALLER_SECRET: Final = "oidc-provider-caller-secret-01234"
POLICY: Final = (
    "version: 1\nbaseline_scopes: [mcp:access]\ntools:\n  echo: {scopes: [tools:echo]}\n"
)


def require_oidc_provider() -> str:
    node = shutil.which("node")
    if node is None or not (INTEROP / "node_modules" / "oidc-provider").is_dir():
        pytest.skip("oidc-provider is not installed (npm ci --prefix tests/interop/oidc-provider)")
    return node


@contextlib.contextmanager
def oidc_provider(fmt: str) -> Iterator[str]:
    """Start server.mjs on a free loopback port; yield its issuer URL; stop it (by its pid)."""
    node = require_oidc_provider()
    port = free_port()
    process = subprocess.Popen(
        [
            node,
            str(INTEROP / "server.mjs"),
            str(port),
            RESOURCE,
            fmt,
            GATEWAY_SECRET,
            CALLER_SECRET,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=INTEROP,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line, "oidc-provider exited at start"
        yield str(json.loads(line)["issuer"])
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextlib.asynccontextmanager
async def gateway_for(
    tmp_path: Path, aiohttp_server: ServerFactory, monkeypatch: pytest.MonkeyPatch, fmt: str
) -> AsyncIterator[tuple[LiveStack, str]]:
    with oidc_provider(fmt) as issuer_url:
        upstream = ModernUpstream()
        backend = str((await aiohttp_server(upstream.app())).make_url("/mcp"))
        monkeypatch.setenv("OP_GATEWAY_SECRET", GATEWAY_SECRET)
        monkeypatch.setenv("OP_SERVICE", "service-secret")
        issuer: dict[str, Any] = {
            "url": issuer_url,
            "allow_insecure_http": True,
            "dpop": "required",
        }
        if fmt == "jwt":
            issuer["tokens"] = "jwt"
        else:
            # Its introspection answer for a client_credentials token has no sub.
            issuer |= {
                "client_id": "mcp-gateway",
                "client_secret": {"env": "OP_GATEWAY_SECRET"},
                "subject_fallback": "client_id",
            }
        (tmp_path / "policy.yaml").write_text(POLICY)
        config = {
            "resource": RESOURCE,
            "listen": {"host": "127.0.0.1", "port": 0},
            "ops_listen": {"host": "127.0.0.1", "port": 0},
            "issuer": issuer,
            "backend": {
                "url": backend,
                "allow_insecure_http": True,
                "credential": {"type": "bearer", "token": {"env": "OP_SERVICE"}},
            },
            "policy": "policy.yaml",
            "audit": {"sink": "off"},
        }
        path = tmp_path / "gateway.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        async with wired_gateway(path, ready_timeout_s=20) as (server, session):
            yield LiveStack(server, server.config, None, upstream, session, path), issuer_url  # type: ignore[arg-type]


async def _token(issuer_url: str, key: DpopKey) -> dict[str, Any]:
    token_url = f"{issuer_url}/token"
    basic = base64.b64encode(f"dpop-caller:{CALLER_SECRET}".encode()).decode()
    data = {
        "grant_type": "client_credentials",
        "scope": "mcp:access tools:echo",
        "resource": RESOURCE,
    }
    headers = {"Authorization": f"Basic {basic}", "DPoP": key.proof(token_url)}
    async with (
        aiohttp.ClientSession() as session,
        session.post(token_url, data=data, headers=headers) as response,
    ):
        body: dict[str, Any] = await response.json()
        assert response.status == 200, body
        return body


@pytest.mark.parametrize(("fmt", "method"), [("jwt", "jwt+dpop"), ("opaque", "introspection+dpop")])
async def test_oidc_provider_dpop_bound_tokens_work_and_are_refused_without_their_proof(
    tmp_path: Path,
    aiohttp_server: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
    fmt: str,
    method: str,
) -> None:
    key = DpopKey()
    async with gateway_for(tmp_path, aiohttp_server, monkeypatch, fmt) as (stack, issuer_url):
        reply = await _token(issuer_url, key)
        assert reply["token_type"] == "DPoP"
        token = reply["access_token"]
        assert (token.count(".") == 2) is (fmt == "jwt")
        proof = key.proof(RESOURCE, token=token)
        status, _, text = await send(stack, dpop(token, proof))
        assert status == 200, text
        assert json.loads(json.loads(text)["result"]["content"][0]["text"]) == {"text": "hi"}
        assert await metric(stack, "authentications_total", auth_method=method) == 1
        assert_row(
            *await send(stack, dpop(token, proof)),
            error="invalid_dpop_proof",
            message="Invalid DPoP proof",
            bearer=False,
        )
        assert_row(
            *await send(stack, [("Authorization", f"Bearer {token}")]),
            error="invalid_token",
            message="This access token must be used with a DPoP proof",
            bearer=False,
        )
        other = DpopKey()
        assert_row(
            *await send(stack, dpop(token, other.proof(RESOURCE, token=token))),
            error="invalid_dpop_proof",
            message="Invalid DPoP proof",
            bearer=False,
        )
        await asyncio.sleep(0)
