"""docs/user-authorization.md's provider recipes (issue 45: GitHub-, Google- and Entra-shaped
authorization servers) as written: each loads as a ``user_oauth`` backend credential without a
problem or a warning, and the requests the gateway then sends carry each provider's quirks: the
authorization request (PKCE, ``resource`` or not, ``prompt``, the extra parameters) and the token
requests (client authentication, ``resource`` or not), against a token endpoint on loopback
standing in for the provider's.

The recipes are read from the document itself, so a recipe that drifts from the configuration
or from what the gateway sends fails here."""

from __future__ import annotations

import base64
import re
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any, Final
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml
from aiohttp import web

from gateway.backend.credentials.upstream_grants import UpstreamClient
from gateway.backend.credentials.upstream_server import (
    OAUTH_DESTINATION,
    AuthorizationServer,
    ServerDiscovery,
)
from gateway.config import BackendConfig, load_config
from gateway.outbound.client import Destination, Outbound
from tests.support.live_stack import ServerFactory

ROOT: Final = Path(__file__).resolve().parents[3]
DOC: Final = (ROOT / "docs" / "user-authorization.md").read_text(encoding="utf-8")
FIXTURES: Final = ROOT / "tests" / "fixtures" / "config"
UPSTREAM: Final = "https://tools.example.com/mcp"
REDIRECT: Final = "https://mcp.example.com/gateway/oauth/callback"
SECRET: Final = "recipe-client-secret-5e1b"
ENV: Final = {
    "TEST_INTROSPECTION_SECRET": "introspection-secret",
    "SEAL": base64.b64encode(bytes(range(32))).decode(),
    "UPSTREAM_SEAL": base64.b64encode(bytes(range(32, 64))).decode(),
}


def recipes() -> dict[str, dict[str, Any]]:
    """Each recipe's ``credential`` mapping, by the provider its heading names."""
    section = DOC.split("### Provider recipes", 1)[1].split("\n### ", 1)[0]
    found: dict[str, dict[str, Any]] = {}
    for heading, block in re.findall(r"\*\*([^*]+)-shaped\*\*.*?```yaml\n(.*?)```", section, re.S):
        found[heading] = yaml.safe_load(block)["credential"]
    return found


RECIPES: Final = recipes()


def test_the_chapter_has_the_three_recipes_the_issue_asks_for() -> None:
    assert set(RECIPES) == {"GitHub", "Google", "Microsoft Entra ID"}


def load(tmp_path: Path, provider: str) -> BackendConfig:
    """The recipe as the backend of a gateway.yaml (its secret files written, the tenant
    placeholder filled), loaded without a problem or a warning."""
    text = yaml.safe_dump(RECIPES[provider]).replace("<tenant-id>", "contoso-tenant-id")
    text = text.replace("/run/secrets/mcp-gateway/", f"{tmp_path}/")
    credential = yaml.safe_load(text)
    for key in ("client_secret", "catalog_token"):
        if key in credential:
            Path(credential[key]["file"]).write_text(SECRET if key == "client_secret" else "bot")
    doc: dict[str, Any] = yaml.safe_load((FIXTURES / "minimal.yaml").read_text())
    doc["backend"] = {"url": UPSTREAM, "credential": credential}
    doc["input_requests"] = {"seal_keys": [{"id": "k1", "key": {"env": "SEAL"}}]}
    doc["login"] = {"client_id": "login", "client_secret": {"env": "TEST_INTROSPECTION_SECRET"}}
    doc["user_oauth"] = {"seal_keys": [{"id": "u1", "key": {"env": "UPSTREAM_SEAL"}}]}
    (tmp_path / "policy.yaml").write_text((FIXTURES / "policy.yaml").read_text())
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    config = load_config(path, ENV)
    assert config.warnings == (), config.warnings
    (backend,) = config.backends
    return backend


class TokenEndpoint:
    """The provider's token endpoint on loopback: what each request carried."""

    def __init__(self) -> None:
        self.requests: list[tuple[dict[str, str], dict[str, str]]] = []

    def app(self) -> web.Application:
        async def token(request: web.Request) -> web.Response:
            form = {k: v for k, v in (await request.post()).items() if isinstance(v, str)}
            self.requests.append((dict(request.headers), form))
            answer = {"access_token": "at-1", "token_type": "Bearer", "expires_in": 3600}
            return web.json_response({**answer, "refresh_token": "rt-1"})

        app = web.Application()
        app.router.add_post("/token", token)
        return app


@pytest.fixture
async def endpoint(aiohttp_server: ServerFactory) -> AsyncIterator[tuple[TokenEndpoint, str]]:
    token = TokenEndpoint()
    server = await aiohttp_server(token.app(), host="127.0.0.1")
    yield token, str(server.make_url("/token"))


async def requests_of(
    backend: BackendConfig, server: AuthorizationServer
) -> tuple[dict[str, list[str]], UpstreamClient, Outbound]:
    """The authorization request's parameters, and the client to send token requests."""
    outbound = Outbound()
    outbound.add(Destination(OAUTH_DESTINATION))
    client = UpstreamClient(
        backend,
        outbound,
        redirect_uri=REDIRECT,
        client_document="https://mcp.example.com/gateway/oauth/client.json",
        client_name="gw",
    )
    cred = backend.credential
    assert cred.client_id is not None
    url = client.authorization_url(
        server, cred.client_id, state="st", verifier="v" * 43, scope=cred.scope or ""
    )
    assert url.startswith(server.authorization_endpoint + "?")
    return parse_qs(urlsplit(url).query), client, outbound


def basic_secret(headers: dict[str, str]) -> str:
    scheme, _, value = headers["Authorization"].partition(" ")
    assert scheme == "Basic"
    return base64.b64decode(value).decode().partition(":")[2]


async def test_the_github_recipe_uses_its_endpoints_as_given_and_asks_for_json(
    tmp_path: Path, endpoint: tuple[TokenEndpoint, str]
) -> None:
    token, token_url = endpoint
    backend = load(tmp_path, "GitHub")
    found = await ServerDiscovery(backend, Outbound()).server(time.monotonic() + 1)  # no fetch
    assert found.issuer == "https://github.com/login/oauth" and not found.iss_parameter
    params, client, outbound = await requests_of(backend, found)
    assert params["client_id"] == ["Iv1.0123456789abcdef"]
    assert params["scope"] == ["repo read:user"] and params["code_challenge_method"] == ["S256"]
    assert "prompt" not in params
    try:
        local = replace(found, token_endpoint=token_url)
        deadline = time.monotonic() + 5
        await client.redeem(local, "Iv1.0123456789abcdef", "code-1", "v" * 43, deadline)
    finally:
        await outbound.close()
    headers, form = token.requests[-1]
    assert headers["Accept"] == "application/json"  # GitHub answers form-encoded without it
    assert basic_secret(headers) == SECRET and "client_secret" not in form


async def test_the_google_recipe_asks_offline_access_with_consent(
    tmp_path: Path, endpoint: tuple[TokenEndpoint, str]
) -> None:
    token, token_url = endpoint
    backend = load(tmp_path, "Google")
    google = AuthorizationServer(
        issuer="https://accounts.google.com",
        authorization_endpoint="https://accounts.google.com/o/oauth2/v2/auth",
        token_endpoint=token_url,
    )
    params, client, outbound = await requests_of(backend, google)
    assert params["prompt"] == ["consent"] and params["access_type"] == ["offline"]
    assert params["resource"] == [UPSTREAM]
    try:
        deadline = time.monotonic() + 5
        granted = await client.redeem(
            google, backend.credential.client_id or "", "c", "v" * 43, deadline
        )
        await client.refresh(google, backend.credential.client_id or "", "rt-1", deadline)
    finally:
        await outbound.close()
    assert granted.refresh_token == "rt-1"
    for headers, form in token.requests:
        assert basic_secret(headers) == SECRET
        assert form["resource"] == UPSTREAM  # RFC 8707 on every token request


async def test_the_entra_recipe_sends_no_resource_and_its_secret_in_the_form(
    tmp_path: Path, endpoint: tuple[TokenEndpoint, str]
) -> None:
    token, token_url = endpoint
    backend = load(tmp_path, "Microsoft Entra ID")
    tenant = "https://login.microsoftonline.com/contoso-tenant-id"
    assert backend.credential.authorization_server == tenant + "/v2.0"
    entra = AuthorizationServer(
        issuer=tenant + "/v2.0",
        authorization_endpoint=tenant + "/oauth2/v2.0/authorize",
        token_endpoint=token_url,
    )
    params, client, outbound = await requests_of(backend, entra)
    assert "resource" not in params  # AADSTS9010010
    assert "prompt" not in params  # fails where an administrator consented for the tenant
    assert params["scope"] == ["api://tools-api/.default offline_access"]
    client_id = backend.credential.client_id or ""
    try:
        deadline = time.monotonic() + 5
        await client.redeem(entra, client_id, "c", "v" * 43, deadline)
        await client.refresh(entra, client_id, "rt-1", deadline)
    finally:
        await outbound.close()
    for headers, form in token.requests:
        assert "resource" not in form and "Authorization" not in headers
        assert (form["client_id"], form["client_secret"]) == (client_id, SECRET)
