"""Where a ``user_oauth`` backend's authorization server is, and who the gateway is there
(``gateway/backend/credentials/upstream_server.py``, ``upstream_grants.py``), against real HTTP
servers on loopback: the upstream's RFC 9728 metadata (path-inserted, then at the root), the
server's RFC 8414 metadata, and every check that keeps the gateway from using a server, a
document or an endpoint it should not (MCP 2026-07-28 authorization-server-discovery.mdx)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from gateway.backend.credentials.upstream_grants import (
    UNBOUNDED_S,
    GrantRefused,
    GrantUnavailable,
    UpstreamClient,
)
from gateway.backend.credentials.upstream_server import (
    OAUTH_DESTINATION,
    ServerDiscovery,
    ServerUnavailable,
)
from gateway.config import BackendConfig, CredentialConfig, Secret
from gateway.dev.dev_issuer import DevIssuer
from gateway.outbound.client import Destination, Outbound

ServerFactory = Callable[..., Awaitable[TestServer]]


def settings(url: str, **credential: Any) -> BackendConfig:
    return BackendConfig(
        url=url,
        credential=CredentialConfig(type="user_oauth", **credential),
        allow_insecure_http=True,
        name="svc",
    )


class Documents:
    """An upstream MCP server's origin serving metadata documents (path -> JSON or status)."""

    def __init__(self) -> None:
        self.docs: dict[str, Any] = {}
        self.asked: list[str] = []

    def app(self) -> web.Application:
        async def handle(request: web.Request) -> web.Response:
            self.asked.append(request.path)
            doc = self.docs.get(request.path)
            if doc is None:
                return web.Response(status=404)
            if isinstance(doc, int):
                return web.Response(status=doc)
            return web.json_response(doc)

        app = web.Application()
        app.router.add_get("/{tail:.*}", handle)
        return app


async def discovery(backend: BackendConfig) -> tuple[ServerDiscovery, Outbound]:
    outbound = Outbound()
    outbound.add(Destination(OAUTH_DESTINATION))
    return ServerDiscovery(backend, outbound), outbound


@pytest.fixture
async def issuer() -> Any:
    dev = DevIssuer()
    await dev.start()
    yield dev
    await dev.stop()


async def test_the_server_is_found_from_the_upstreams_metadata_then_its_own(
    aiohttp_server: ServerFactory, issuer: DevIssuer
) -> None:
    docs = Documents()
    upstream = await aiohttp_server(docs.app(), host="127.0.0.1")
    url = str(upstream.make_url("/mcp"))
    docs.docs["/.well-known/oauth-protected-resource"] = {  # at the root: the second place
        "resource": url,
        "authorization_servers": [issuer.url, "https://second.example"],
    }
    found, outbound = await discovery(settings(url))
    try:
        server = await found.server(time.monotonic() + 5)
    finally:
        await outbound.close()
    assert docs.asked[:2] == [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ]
    assert server.issuer == issuer.url
    assert server.authorization_endpoint == issuer.url + "/authorize"
    assert server.token_endpoint == issuer.url + "/token"
    assert server.iss_parameter is True and server.registration_endpoint is not None


@pytest.mark.parametrize(
    ("case", "document"),
    [
        ("metadata of another resource", {"resource": "https://elsewhere.example/mcp"}),
        ("no authorization server", {"authorization_servers": []}),
        ("a server that is not a URL", {"authorization_servers": ["not a url"]}),
    ],
)
async def test_a_protected_resource_document_that_does_not_fit_is_not_used(
    aiohttp_server: ServerFactory, issuer: DevIssuer, case: str, document: dict[str, Any]
) -> None:
    docs = Documents()
    upstream = await aiohttp_server(docs.app(), host="127.0.0.1")
    url = str(upstream.make_url("/mcp"))
    base = {"resource": url, "authorization_servers": [issuer.url]}
    docs.docs["/.well-known/oauth-protected-resource/mcp"] = {**base, **document}
    found, outbound = await discovery(settings(url))
    try:
        with pytest.raises(ServerUnavailable):
            await found.server(time.monotonic() + 5)
    finally:
        await outbound.close()
    assert found.known is None


@pytest.mark.parametrize(
    ("case", "change"),
    [
        ("another issuer in the document", {"issuer": "https://attacker.example"}),
        ("a trailing slash is another issuer", "slash"),
        ("no PKCE S256", {"code_challenge_methods_supported": ["plain"]}),
        ("no PKCE advertised", {"code_challenge_methods_supported": None}),
        ("a token endpoint over plain http elsewhere", {"token_endpoint": "http://evil.example/t"}),
        ("no authorization endpoint", {"authorization_endpoint": None}),
    ],
)
async def test_server_metadata_that_does_not_fit_is_refused(
    aiohttp_server: ServerFactory, case: str, change: Any
) -> None:
    docs = Documents()
    server = await aiohttp_server(docs.app(), host="127.0.0.1")
    issuer = str(server.make_url("")).rstrip("/")
    document: dict[str, Any] = {
        "issuer": issuer,
        "authorization_endpoint": issuer + "/authorize",
        "token_endpoint": issuer + "/token",
        "code_challenge_methods_supported": ["S256"],
    }
    if change == "slash":
        document["issuer"] = issuer + "/"
    else:
        document.update(change)
        document = {k: v for k, v in document.items() if v is not None}
    docs.docs["/.well-known/oauth-authorization-server"] = document
    found, outbound = await discovery(
        settings("http://127.0.0.1:9/mcp", authorization_server=issuer)
    )
    try:
        with pytest.raises(ServerUnavailable):
            await found.server(time.monotonic() + 5)
    finally:
        await outbound.close()


async def test_explicit_endpoints_are_used_as_given_and_nothing_is_fetched() -> None:
    backend = settings(
        "https://svc.example/mcp",
        authorization_server="https://github.example/login/oauth",
        authorization_endpoint="https://github.example/login/oauth/authorize",
        token_endpoint="https://github.example/login/oauth/access_token",
        client_id="gw",
    )
    found, outbound = await discovery(backend)
    try:
        server = await found.server(time.monotonic() + 1)
    finally:
        await outbound.close()
    assert server.issuer == "https://github.example/login/oauth"
    assert server.token_endpoint.endswith("/access_token") and not server.iss_parameter


async def test_the_authorization_request_carries_pkce_resource_and_the_knobs() -> None:
    backend = settings(
        "https://svc.example/mcp",
        authorization_server="https://as.example",
        authorization_endpoint="https://as.example/authorize?tenant=t1",
        token_endpoint="https://as.example/token",
        client_id="gw",
        client_secret=Secret("s", "env:S"),
        client_auth="client_secret_post",
        prompt="consent",
        extra_authorize_params=(("access_type", "offline"),),
        scope="read write",
    )
    outbound = Outbound()
    client = UpstreamClient(
        backend,
        outbound,
        redirect_uri="https://gw.example/gateway/oauth/callback",
        client_document="https://gw.example/gateway/oauth/client.json",
        client_name="gw",
    )
    found = ServerDiscovery(backend, outbound)
    server = await found.server(time.monotonic() + 1)
    url = client.authorization_url(server, "gw", state="st", verifier="v" * 43, scope="read write")
    assert url.startswith("https://as.example/authorize?tenant=t1&response_type=code&")
    for part in (
        "client_id=gw",
        "redirect_uri=https%3A%2F%2Fgw.example%2Fgateway%2Foauth%2Fcallback",
        "state=st",
        "code_challenge_method=S256",
        "scope=read+write",
        "resource=https%3A%2F%2Fsvc.example%2Fmcp",
        "prompt=consent",
        "access_type=offline",
    ):
        assert part in url, part
    assert "v" * 43 not in url  # the verifier itself never leaves
    omitted = replace(backend, credential=replace(backend.credential, omit_resource=True))
    other = UpstreamClient(
        omitted,
        outbound,
        redirect_uri="https://gw.example/cb",
        client_document="x",
        client_name="gw",
    )
    assert "resource=" not in other.authorization_url(
        server, "gw", state="st", verifier="v" * 43, scope=""
    )
    await outbound.close()


async def test_a_pre_registered_client_is_never_used_at_another_server(issuer: DevIssuer) -> None:
    backend = settings(
        "https://svc.example/mcp",
        authorization_server="https://the-registered.example",
        client_id="gw",
        client_secret=Secret("s", "env:S"),
    )
    outbound = Outbound()
    outbound.add(Destination(OAUTH_DESTINATION))
    client = UpstreamClient(
        backend,
        outbound,
        redirect_uri="https://gw.example/cb",
        client_document="x",
        client_name="gw",
    )
    found = ServerDiscovery(
        replace(backend, credential=replace(backend.credential, authorization_server=issuer.url)),
        outbound,
    )
    try:
        server = await found.server(time.monotonic() + 5)
        with pytest.raises(ServerUnavailable):
            await client.client_id(server, time.monotonic() + 5)
    finally:
        await outbound.close()


async def test_without_a_client_the_gateway_registers_itself_once_per_server(
    issuer: DevIssuer,
) -> None:
    backend = settings("http://127.0.0.1:9/mcp", authorization_server=issuer.url)
    outbound = Outbound()
    outbound.add(Destination(OAUTH_DESTINATION))
    client = UpstreamClient(
        backend,
        outbound,
        redirect_uri="http://127.0.0.1:8080/gateway/oauth/callback",
        client_document="http://127.0.0.1:8080/gateway/oauth/client.json",
        client_name="gw",
    )
    found = ServerDiscovery(backend, outbound)
    try:
        server = await found.server(time.monotonic() + 5)
        assert not server.client_metadata_documents and server.registration_endpoint
        first = await client.client_id(server, time.monotonic() + 5)
        assert await client.client_id(server, time.monotonic() + 5) == first
    finally:
        await outbound.close()
    registered = issuer.store.clients[first]
    assert registered.redirect_uris == ("http://127.0.0.1:8080/gateway/oauth/callback",)
    # A server that says it takes a client metadata document gets the document's URL.
    documents = replace(server, client_metadata_documents=True)
    assert await client.client_id(documents, time.monotonic() + 1) == (
        "http://127.0.0.1:8080/gateway/oauth/client.json"
    )


class TokenEndpoint:
    """A token endpoint that answers what a test sets, and records each form it got."""

    def __init__(self) -> None:
        self.forms: list[dict[str, str]] = []
        self.status = 200
        self.answer: Any = {"access_token": "access-1", "token_type": "bearer"}
        self.content_type = "application/json"

    def app(self) -> web.Application:
        async def token(request: web.Request) -> web.Response:
            self.forms.append(dict(await request.post()))  # type: ignore[arg-type]
            if self.content_type != "application/json":
                return web.Response(
                    status=self.status, text=str(self.answer), content_type=self.content_type
                )
            return web.json_response(self.answer, status=self.status)

        app = web.Application()
        app.router.add_post("/token", token)
        return app


async def test_the_token_requests_and_their_answers(aiohttp_server: ServerFactory) -> None:
    endpoint = TokenEndpoint()
    server = await aiohttp_server(endpoint.app(), host="127.0.0.1")
    base = str(server.make_url("")).rstrip("/")
    backend = settings(
        "https://svc.example/mcp",
        authorization_server=base,
        authorization_endpoint=base + "/authorize",
        token_endpoint=base + "/token",
    )
    outbound = Outbound()
    outbound.add(Destination(OAUTH_DESTINATION))
    client = UpstreamClient(
        backend,
        outbound,
        redirect_uri="https://gw.example/cb",
        client_document="x",
        client_name="gw",
    )
    found = ServerDiscovery(backend, outbound)
    deadline = time.monotonic() + 5
    try:
        known = await found.server(deadline)
        granted = await client.redeem(known, "public-1", "the-code", "v" * 43, deadline)
        # No expires_in: a token that does not expire (GitHub's classic OAuth apps).
        assert granted.expires_in == UNBOUNDED_S and granted.refresh_token is None
        form = endpoint.forms[-1]
        assert form == {
            "grant_type": "authorization_code",
            "code": "the-code",
            "redirect_uri": "https://gw.example/cb",
            "code_verifier": "v" * 43,
            "resource": "https://svc.example/mcp",
            "client_id": "public-1",
        }
        endpoint.answer = {
            "access_token": "a2",
            "token_type": "Bearer",
            "expires_in": 60,
            "refresh_token": "r2",
            "scope": "repo",
        }
        granted = await client.refresh(known, "public-1", "r1", deadline)
        assert (granted.expires_in, granted.refresh_token, granted.scope) == (60.0, "r2", "repo")
        assert endpoint.forms[-1]["resource"] == "https://svc.example/mcp"  # on a refresh too
        # GitHub answers a refusal with HTTP 200 and an error member.
        endpoint.answer = {"error": "bad_verification_code"}
        with pytest.raises(GrantRefused) as refused:
            await client.redeem(known, "public-1", "old", "v" * 43, deadline)
        assert refused.value.error == "bad_verification_code"
        endpoint.status, endpoint.answer = 400, {"error": "invalid_grant"}
        with pytest.raises(GrantRefused):
            await client.refresh(known, "public-1", "r1", deadline)
        endpoint.status, endpoint.answer = 503, {"error": "temporarily_unavailable"}
        with pytest.raises(GrantUnavailable):
            await client.refresh(known, "public-1", "r1", deadline)
        endpoint.status, endpoint.content_type = 200, "application/x-www-form-urlencoded"
        endpoint.answer = "access_token=a3&token_type=bearer"
        with pytest.raises(GrantUnavailable):  # not JSON: never read as a token
            await client.refresh(known, "public-1", "r1", deadline)
    finally:
        await outbound.close()
