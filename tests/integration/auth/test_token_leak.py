"""SECURITY: the client's token never appears in logs, metrics, error bodies or headers.

Every auth outcome (valid, cached, inactive, malformed, wrong audience, each issuer fault, the
issuer refusing our credentials, stale serving, rate limiting, discovery failure) is driven
through HTTP while structlog events, stdout/stderr and stdlib log records are captured; the
token (and its base64 and URL-encoded forms) must appear nowhere the client or an operator
can see.
"""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import quote_plus

import structlog
from aiohttp import web
from prometheus_client import generate_latest

from gateway.auth.resource_server import ResourceServer
from gateway.config import CacheConfig, Rate, Secret
from gateway.errors import GatewayError
from gateway.http.error_response import render_error
from gateway.observability.metrics import Metrics
from gateway.seams import AuthRequest
from tests.support.auth import FakeClock, MakeRS
from tests.support.printed import Printed
from tests.support.test_issuer import IssuerStub

SECRET_TOKEN = "LeakCanary-7f3a9c1e5b2d4680aa55ee11cc33dd77"


def forms(token: str) -> list[str]:
    return [token, quote_plus(token), base64.b64encode(token.encode()).decode(), token[8:32]]


def app_for(rs: ResourceServer) -> web.Application:
    async def handle(request: web.Request) -> web.StreamResponse:
        auth = AuthRequest(
            tuple(request.headers.getall("Authorization", [])),
            frozenset(request.query.keys()),
            request.remote or "",
        )
        try:
            principal = await rs.authenticate(auth)
        except GatewayError as err:
            return render_error(err, challenge=rs.challenge(err))
        return web.json_response({"sub": principal.subject, "fp": principal.fingerprint})

    app = web.Application()
    app.router.add_post("/mcp", handle)
    return app


async def test_no_outcome_leaks_the_token(  # noqa: PLR0917 - pytest fixtures
    stub: IssuerStub,
    make_rs: MakeRS,
    clock: FakeClock,
    metrics: Metrics,
    aiohttp_server: Any,
    aiohttp_client: Any,
    out: Printed,
) -> None:
    seen: list[str] = []

    async def call(rs: ResourceServer, header: str) -> None:
        server = await aiohttp_server(app_for(rs), max_field_size=16_384, access_log=None)
        http = await aiohttp_client(server)
        response = await http.post("/mcp", headers={"Authorization": header})
        seen.append(f"{response.status} {dict(response.headers)!r} {await response.text()}")

    bearer = "Bearer " + SECRET_TOKEN
    with structlog.testing.capture_logs() as events:
        stub.grant(SECRET_TOKEN)
        rs = await make_rs(cache=CacheConfig(max_ttl_s=1, stale_if_error_s=60, negative_ttl_s=5))
        await call(rs, bearer)  # valid
        await call(rs, bearer)  # cached
        stub.fault = "5xx"
        clock.advance(2)
        await call(rs, bearer)  # stale-if-error
        for fault in ("slow", "oversized", "redirect", "malformed", "wrong_content_type"):
            stub.fault = fault
            stub.slow_s = 0.5
            await call(await make_rs(timeout_s=0.2), bearer)
        stub.fault = "refuse_token"
        await call(await make_rs(), bearer)  # 400 invalid_token from the issuer: 401
        stub.fault = None
        await call(await make_rs(client_secret=Secret("wrong", "literal")), bearer)
        stub.revoke(SECRET_TOKEN)
        await call(rs, bearer)  # inactive (then negative-cached)
        await call(rs, bearer)  # negative cache hit
        stub.grant(SECRET_TOKEN, aud="https://elsewhere.example/mcp")
        await call(await make_rs(), bearer)  # wrong audience
        await call(await make_rs(), "Bearer " + SECRET_TOKEN + " trailing")  # malformed
        await call(await make_rs(), "Bearer " + SECRET_TOKEN + "!" * 9000)  # oversized
        # Without the negative cache each retry is introspected again, so the budget answers.
        sprayed = await make_rs(failed_auth_rate=Rate(1, 60.0), cache=CacheConfig(negative_ttl_s=0))
        for _ in range(3):
            await call(sprayed, bearer)  # 401, 401, 429
        stub.metadata_issuer = "https://mismatch.example"
        await call(await make_rs(), bearer)  # not ready: 503

    statuses = [line.split(" ", 1)[0] for line in seen]
    assert {"200", "401", "429", "503"} <= set(statuses)
    assert events, "structlog capture saw no events; the test would prove nothing"
    haystacks = {
        "structlog events": repr(events),
        "stdout/stderr": out.written(),
        "stdlib logs": out.logged(),
        "responses": "\n".join(seen),
        "metrics": generate_latest(metrics.registry).decode(),
    }
    for where, text in haystacks.items():
        for form in forms(SECRET_TOKEN):
            assert form not in text, f"token leaked into {where}"
