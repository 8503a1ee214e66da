"""DPoP replay across replicas on a real ``redis-server`` (RFC 9449 §11.1), and the store's
failure rule (``state.on_store_error.dpop_replay``).

Two production gateways (``build_services``) share one development issuer and one Redis key
prefix, as two replicas behind one load balancer: a proof accepted at one is refused at the
other. With Redis unreachable, ``deny`` (the default) answers 503 ``dpop_replay_unavailable``;
``local`` falls back to the replica's own memory.
"""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path

import pytest

from gateway.dev.dev_issuer import DevIssuer
from tests.integration.auth.test_dpop_http import RESOURCE, assert_bad_proof, dpop, send
from tests.support.dpop_client import DpopKey
from tests.support.jwt_stack import jwt_stack, metric, readyz
from tests.support.live_stack import MakeStack, ServerFactory
from tests.support.ports import free_port
from tests.support.redis_server import RedisServer, redis_server, unique_prefix

__all__ = ["redis_server"]  # the fixture, imported for pytest

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


def _state(url: str, prefix: str, **on_error: str) -> dict[str, object]:
    return {
        "state": {
            "backend": "redis",
            "redis": {"url": url, "key_prefix": prefix, "timeout_ms": 200},
            **({"on_store_error": on_error} if on_error else {}),
        }
    }


@pytest.mark.row("invalid_dpop_proof")
async def test_a_proof_used_at_one_replica_is_refused_at_the_other(
    redis_server: RedisServer,
    tmp_path: Path,
    aiohttp_server: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    key = DpopKey("EdDSA")
    dev = DevIssuer(token_format="jwt", introspection=False)
    state = _state(redis_server.url, unique_prefix())
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    async with (
        jwt_stack(
            tmp_path / "a",
            aiohttp_server,
            monkeypatch,
            dev=dev,
            issuer={"dpop": "required"},
            gateway=state,
        ) as a,
        jwt_stack(
            tmp_path / "b",
            aiohttp_server,
            monkeypatch,
            dev=dev,
            issuer={"dpop": "required"},
            gateway=state,
        ) as b,
    ):
        token = a.token(jkt=key.jkt)
        proof = key.proof(RESOURCE, token=token)
        status, _, text = await send(a, dpop(token, proof))
        assert status == 200, text
        status, headers, text = await send(b, dpop(token, proof))
        assert status == 401, text
        assert headers["WWW-Authenticate"].startswith('DPoP algs="')
        assert 'error="invalid_dpop_proof"' in headers["WWW-Authenticate"]
        assert json.loads(text)["error"]["message"] == "Invalid DPoP proof"
        assert await metric(b, "dpop_refusals_total", reason="replay") == 1
        # A fresh proof works at either replica; the record lives under the prefix in Redis.
        status, _, text = await send(b, dpop(token, key.proof(RESOURCE, token=token)))
        assert status == 200, text
        keys = redis_server.client().keys(state["state"]["redis"]["key_prefix"] + "dpop:*")  # type: ignore[index]
        assert len(keys) == 2


@pytest.mark.row("dpop_replay_unavailable")
async def test_an_unreachable_store_fails_closed_unless_told_local(
    tmp_path: Path, aiohttp_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = DpopKey()
    url = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    (tmp_path / "deny").mkdir()
    async with jwt_stack(
        tmp_path / "deny",
        aiohttp_server,
        monkeypatch,
        issuer={"dpop": "allowed"},
        gateway=_state(url, unique_prefix()),
    ) as stack:
        token = stack.token(jkt=key.jkt)
        status, headers, text = await send(stack, dpop(token, key.proof(RESOURCE, token=token)))
        assert status == 503, text
        assert headers["Retry-After"] == "1"
        assert headers["Cache-Control"] == "no-store"
        assert headers["WWW-Authenticate"] == (
            f'Bearer resource_metadata="{stack.config.prm_url}", '
            f'DPoP algs="ES256 ES384 EdDSA Ed25519 PS256 RS256", '
            f'resource_metadata="{stack.config.prm_url}"'
        )
        assert json.loads(text) == {
            "error": "dpop_replay_unavailable",
            "error_description": "Authorization server unavailable, retry later",
        }
        assert await metric(stack, "state_store_errors_total", kind="dpop_replay") >= 1
        # Bearer tokens do not need the replay store.
        status, _, text = await send(stack, [("Authorization", f"Bearer {stack.token()}")])
        assert status == 200, text
    (tmp_path / "local").mkdir()
    async with jwt_stack(
        tmp_path / "local",
        aiohttp_server,
        monkeypatch,
        issuer={"dpop": "allowed"},
        gateway=_state(url, unique_prefix(), dpop_replay="local"),
    ) as stack:
        token = stack.token(jkt=key.jkt)
        proof = key.proof(RESOURCE, token=token)
        status, _, text = await send(stack, dpop(token, proof))
        assert status == 200, text
        assert_bad_proof(*await send(stack, dpop(token, proof)))  # this replica remembers


async def test_a_replica_is_ready_only_once_redis_answered_so_its_first_proof_is_checked(
    tmp_path: Path, make_stack: MakeStack
) -> None:
    # Issue 43: a freshly started replica answered 503 dpop_replay_unavailable while /readyz
    # was 200: its first Redis call (the connection's) timed out on a busy host and put the
    # store in back-off. Redis answering late is made real here: the server is stopped
    # (SIGSTOP) while the replica starts, and resumed a little later.
    server = RedisServer.launch(tmp_path / "redis")
    process = server.process
    assert process is not None
    key = DpopKey()
    try:
        process.send_signal(signal.SIGSTOP)
        resumed = asyncio.get_running_loop().call_later(0.8, process.send_signal, signal.SIGCONT)
        async with make_stack.of(
            jwt_stack,
            issuer={"dpop": "allowed"},
            gateway=_state(server.url, unique_prefix()),
            wait_ready=False,
        ) as stack:
            while (answer := await readyz(stack.server, stack.session))[0] != 200:
                assert answer[1]["checks"].get("state_store") is not True, answer
                await asyncio.sleep(0.02)
            assert answer[1]["checks"]["state_store"] is True
            token = stack.token(jkt=key.jkt)
            status, _, text = await send(stack, dpop(token, key.proof(RESOURCE, token=token)))
            assert status == 200, text
        resumed.cancel()
    finally:
        process.send_signal(signal.SIGCONT)
        server.stop()
