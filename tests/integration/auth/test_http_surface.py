"""The auth rows as clients see them: status, parsed ``WWW-Authenticate``, ``Retry-After``.

A tiny aiohttp app authenticates with the real ResourceServer (against the loopback issuer)
and renders every rejection with the one renderer, ``gateway.http.error_response.render_error``.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from aiohttp import web

from gateway.auth.resource_server import ISSUER_RETRY_AFTER_S, ResourceServer
from gateway.config import Rate
from gateway.errors import (
    BAD_REQUEST_CODE,
    RATE_LIMITED_CODE,
    UNAUTHORIZED_CODE,
    GatewayError,
    InsufficientScope,
)
from gateway.http.error_response import render_error
from gateway.seams import AuthRequest
from tests.support.auth import RESOURCE, MakeRS
from tests.support.test_issuer import IssuerStub

TOKEN = "tok.http-surface-0123456789"
PRM = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
_PARAM = re.compile(r'\s*([a-z_]+)="([^"\\]*)"\s*(?:,|$)')


def parse_challenge(value: str) -> tuple[str, dict[str, str]]:
    """Split ``Bearer k="v", ...`` into the scheme and its params; fail on anything else."""
    scheme, _, rest = value.partition(" ")
    params: dict[str, str] = {}
    position = 0
    while position < len(rest):
        match = _PARAM.match(rest, position)
        assert match is not None, f"unparseable challenge at {rest[position:]!r}"
        assert match.group(1) not in params, "a parameter appears twice"
        params[match.group(1)] = match.group(2)
        position = match.end()
    return scheme, params


def surface_app(rs: ResourceServer, needed: tuple[str, ...] = ("mcp:access",)) -> web.Application:
    async def handle(request: web.Request) -> web.StreamResponse:
        auth = AuthRequest(
            authorization=tuple(request.headers.getall("Authorization", [])),
            query_keys=frozenset(request.query.keys()),
            client_ip=request.remote or "",
        )
        try:
            principal = await rs.authenticate(auth)
            if not set(needed) <= principal.scopes:
                raise InsufficientScope(scopes=needed)
        except GatewayError as err:
            return render_error(err, challenge=rs.challenge(err))
        return web.json_response({"sub": principal.subject})

    app = web.Application()
    app.router.add_post("/mcp", handle)
    return app


@pytest.fixture
async def client(
    stub: IssuerStub, make_rs: MakeRS, aiohttp_server: Any, aiohttp_client: Any
) -> Any:
    async def factory(needed: tuple[str, ...] = ("mcp:access",), **overrides: Any) -> Any:
        rs = await make_rs(**overrides)
        # The gateway's listener must admit an 8 KiB token plus "Bearer " (aiohttp's default
        # field limit is 8190 bytes); no access log, which would print query strings.
        server = await aiohttp_server(
            surface_app(rs, needed), max_field_size=16_384, access_log=None
        )
        return await aiohttp_client(server)

    return factory


async def test_a_valid_token_passes(stub: IssuerStub, client: Any) -> None:
    stub.grant(TOKEN)
    http = await client()
    response = await http.post("/mcp", headers={"Authorization": "Bearer " + TOKEN})
    assert response.status == 200
    assert await response.json() == {"sub": "alice"}


@pytest.mark.row("no_credentials")
async def test_no_credentials_is_401_with_metadata_and_baseline_scope(client: Any) -> None:
    http = await client()
    response = await http.post("/mcp")
    assert response.status == 401
    assert "Retry-After" not in response.headers
    challenge = response.headers["WWW-Authenticate"]
    assert challenge == f'Bearer resource_metadata="{PRM}", scope="mcp:access"'
    assert parse_challenge(challenge) == (
        "Bearer",
        {"resource_metadata": PRM, "scope": "mcp:access"},
    )
    assert "error" not in parse_challenge(challenge)[1]  # RFC 6750 §3.1


@pytest.mark.row("no_credentials")
async def test_a_non_bearer_scheme_is_401_without_an_error_code(client: Any) -> None:
    http = await client()
    response = await http.post("/mcp", headers={"Authorization": "Basic Zm9vOmJhcg=="})
    assert response.status == 401
    assert "error" not in parse_challenge(response.headers["WWW-Authenticate"])[1]


@pytest.mark.row("invalid_token")
@pytest.mark.parametrize(
    ("claims", "header"),
    [
        ({"active": False}, None),
        ({"aud": "https://other.example/mcp"}, None),
        ({}, "Bearer not a token68"),
        ({}, "Bearer " + "a" * 8193),
    ],
    ids=[
        "Bearer <inactive>",
        "Bearer <other audience>",
        "Bearer <three words>",
        "Bearer <8 KiB + 1>",
    ],
)
async def test_a_bad_token_is_401_invalid_token(
    stub: IssuerStub, client: Any, claims: dict[str, Any], header: str | None
) -> None:
    stub.grant(TOKEN, **claims)
    http = await client()
    response = await http.post("/mcp", headers={"Authorization": header or "Bearer " + TOKEN})
    assert response.status == 401
    scheme, params = parse_challenge(response.headers["WWW-Authenticate"])
    assert scheme == "Bearer"
    assert params == {
        "error": "invalid_token",
        "error_description": "Invalid or expired access token",
        "resource_metadata": PRM,
        "scope": "mcp:access",
    }
    body = await response.json()
    assert body["error"]["code"] == UNAUTHORIZED_CODE


@pytest.mark.row("token_in_query")
async def test_a_token_in_the_query_is_400_invalid_request(stub: IssuerStub, client: Any) -> None:
    http = await client()
    response = await http.post("/mcp?access_token=" + TOKEN)
    assert response.status == 400
    _, params = parse_challenge(response.headers["WWW-Authenticate"])
    assert params["error"] == "invalid_request"
    assert params["resource_metadata"] == PRM
    assert (await response.json())["error"] == {
        "code": BAD_REQUEST_CODE,
        "message": "Access tokens are accepted only in the header",
    }
    assert stub.introspection_calls == 0


@pytest.mark.row("token_in_query")
async def test_two_authorization_headers_are_400_invalid_request(client: Any) -> None:
    http = await client()
    response = await http.post(
        "/mcp", headers=[("Authorization", "Bearer a"), ("Authorization", "Bearer b")]
    )
    assert response.status == 400
    assert parse_challenge(response.headers["WWW-Authenticate"])[1]["error"] == "invalid_request"


@pytest.mark.row("issuer_unavailable")
@pytest.mark.parametrize("fault", ["slow", "5xx", "oversized", "redirect"])
async def test_an_issuer_fault_is_503_with_retry_after_and_no_error_code(
    stub: IssuerStub, client: Any, fault: str
) -> None:
    stub.grant(TOKEN)
    stub.fault, stub.slow_s = fault, 0.6  # type: ignore[assignment]
    http = await client(timeout_s=0.2)
    response = await http.post("/mcp", headers={"Authorization": "Bearer " + TOKEN})
    assert response.status == 503
    assert response.headers["Retry-After"] == str(ISSUER_RETRY_AFTER_S)
    assert parse_challenge(response.headers["WWW-Authenticate"]) == (
        "Bearer",
        {"resource_metadata": PRM},
    )


@pytest.mark.row("rate_limited")
async def test_token_spraying_past_the_budget_is_429_with_retry_after(
    stub: IssuerStub, client: Any
) -> None:
    http = await client(failed_auth_rate=Rate(2, 60.0))
    statuses = []
    for n in range(4):
        response = await http.post("/mcp", headers={"Authorization": f"Bearer spray-{n}"})
        statuses.append(response.status)
    assert statuses == [401, 401, 401, 429]
    assert int(response.headers["Retry-After"]) >= 1
    body = await response.json()
    assert (body["id"], body["error"]["code"]) == (None, RATE_LIMITED_CODE)
    assert (
        body["error"]["message"]
        == f"Too many requests, retry in {response.headers['Retry-After']} s"
    )
    assert "WWW-Authenticate" not in response.headers
    assert stub.introspection_calls == 3


@pytest.mark.row("insufficient_scope")
async def test_missing_baseline_scope_is_403_naming_every_needed_scope(
    stub: IssuerStub, client: Any
) -> None:
    stub.grant(TOKEN, scope="docs:read")
    http = await client(needed=("mcp:access", "docs:read"))
    response = await http.post("/mcp", headers={"Authorization": "Bearer " + TOKEN})
    assert response.status == 403
    assert parse_challenge(response.headers["WWW-Authenticate"]) == (
        "Bearer",
        {
            "error": "insufficient_scope",
            "error_description": "Insufficient scope",
            "scope": "mcp:access docs:read",
            "resource_metadata": PRM,
        },
    )


def test_the_prm_url_is_absolute_and_built_from_the_resource() -> None:
    assert PRM.startswith(RESOURCE.rsplit("/mcp", 1)[0])
