"""The service credential toward the upstream: static bearer (with rotation) and RFC 6749 §4.4."""

from __future__ import annotations

import base64
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
import structlog
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from joserfc import jwt
from joserfc.jwk import ECKey

from gateway.backend.credentials.service_credential import oauth_error_code
from gateway.config import CredentialConfig, IssuerConfig, Secret
from gateway.seams import ToolCall
from tests.integration.backend.helpers import context, make_config, principal
from tests.support.upstreams import ModernUpstream, TokenServer


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def call_of(backend: Any) -> ToolCall:
    tool = backend.catalog().get("echo")
    return ToolCall(tool=tool, arguments={}, era="modern", protocol_version="2026-07-28")


async def invoke(backend: Any) -> dict[str, Any]:
    result: dict[str, Any] = await backend.call_tool(
        call_of(backend), principal(), context(), time.monotonic() + 5
    )
    return result


@pytest.fixture
async def token_setup(aiohttp_server, modern) -> tuple[ModernUpstream, str, TokenServer, str]:
    upstream, url = modern
    upstream.accepted = set()
    tokens = TokenServer(expires_in=120, grant_to=upstream.accepted)
    server = await aiohttp_server(tokens.app())
    tokens.issuer = str(server.make_url("")).rstrip("/")
    return upstream, url, tokens, tokens.issuer


def cc_config(url: str, issuer: str, **cred: Any) -> Any:
    credential = CredentialConfig(
        type="client_credentials",
        client_id="gateway",
        client_secret=Secret("s3cret", "literal"),
        scope="tools:call",
        resource="https://tools.internal/mcp",
        audience="tools-api",
        refresh_margin_s=30,
        **cred,
    )
    issuer_cfg = IssuerConfig(url=issuer, client_id="gw", allow_insecure_http=True)
    return make_config(url, credential=credential, issuer=issuer_cfg)


async def test_a_client_credentials_token_is_fetched_once_and_reused(
    token_setup, backend_factory
) -> None:
    upstream, url, tokens, issuer = token_setup
    backend = await backend_factory(cc_config(url, issuer, token_endpoint=issuer + "/token"))
    for _ in range(3):
        assert (await invoke(backend))["isError"] is False
    assert tokens.issued == ["cc-token-1"]
    assert {r.headers["Authorization"] for r in upstream.requests} == {"Bearer cc-token-1"}
    form = tokens.forms[0]
    assert form == {
        "grant_type": "client_credentials",
        "scope": "tools:call",
        "resource": "https://tools.internal/mcp",
        "audience": "tools-api",
    }
    expected = base64.b64encode(b"gateway:s3cret").decode()
    assert tokens.auth_headers[0] == f"Basic {expected}"


async def test_the_token_endpoint_is_discovered_from_issuer_metadata(
    token_setup, backend_factory
) -> None:
    _, url, tokens, issuer = token_setup
    backend = await backend_factory(cc_config(url, issuer))
    assert backend.ready
    assert tokens.issued == ["cc-token-1"]


async def test_client_secret_basic_form_encodes_id_and_secret(token_setup, backend_factory) -> None:
    # RFC 6749 §2.3.1: each part form-urlencoded before base64; unencoded, "+" reads as a space
    # and "%41" as "A" at the issuer (authlib 1.9 sends them raw).
    _, url, tokens, issuer = token_setup
    tokens.client_secret = "p+ss%41word:x y"
    credential = CredentialConfig(
        type="client_credentials",
        client_id="gateway",
        token_endpoint=issuer + "/token",
        client_secret=Secret(tokens.client_secret, "literal"),
    )
    issuer_cfg = IssuerConfig(url=issuer, client_id="gw", allow_insecure_http=True)
    backend = await backend_factory(make_config(url, credential=credential, issuer=issuer_cfg))
    assert backend.ready
    raw = base64.b64encode(b"gateway:p%2Bss%2541word%3Ax+y").decode()
    assert tokens.auth_headers[0] == f"Basic {raw}"


async def test_client_secret_post_sends_the_secret_in_the_form(
    token_setup, backend_factory
) -> None:
    _, url, tokens, issuer = token_setup
    config = cc_config(
        url, issuer, token_endpoint=issuer + "/token", client_auth="client_secret_post"
    )
    backend = await backend_factory(config)
    assert backend.ready
    assert tokens.auth_headers[0] is None
    assert tokens.forms[0]["client_secret"] == "s3cret"


async def test_the_token_is_refreshed_shortly_before_it_expires(
    token_setup, backend_factory
) -> None:
    _, url, tokens, issuer = token_setup
    clock = FakeClock()
    backend = await backend_factory(
        cc_config(url, issuer, token_endpoint=issuer + "/token"), clock=clock
    )
    assert tokens.issued == ["cc-token-1"]
    clock.now += 120 - 30 - 1  # one second before the refresh margin starts
    await invoke(backend)
    assert tokens.issued == ["cc-token-1"]
    clock.now += 1  # inside the margin: refresh although the token is still valid
    await invoke(backend)
    assert tokens.issued == ["cc-token-1", "cc-token-2"]


async def test_an_upstream_401_fetches_a_fresh_token_and_retries_once(
    token_setup, backend_factory
) -> None:
    upstream, url, tokens, issuer = token_setup
    backend = await backend_factory(cc_config(url, issuer, token_endpoint=issuer + "/token"))
    upstream.fault = "401_once"
    result = await invoke(backend)
    assert result["isError"] is False
    assert tokens.issued == ["cc-token-1", "cc-token-2"]
    calls = upstream.calls("tools/call")
    assert [c.headers["Authorization"] for c in calls] == [
        "Bearer cc-token-1",
        "Bearer cc-token-2",
    ]


async def test_private_key_jwt_authenticates_with_a_signed_assertion(
    token_setup, backend_factory
) -> None:
    _, url, tokens, issuer = token_setup
    key = ec.generate_private_key(ec.SECP256R1())
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    config = cc_config(
        url,
        issuer,
        token_endpoint=issuer + "/token",
        client_auth="private_key_jwt",
        private_key=Secret(pem, "literal"),
        private_key_id="k1",
    )
    backend = await backend_factory(config)
    assert backend.ready
    form = tokens.forms[0]
    assert form["client_assertion_type"] == (
        "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
    )
    header_b64, claims_b64, _ = form["client_assertion"].split(".")
    header = json.loads(base64.urlsafe_b64decode(header_b64 + "=="))
    claims = json.loads(base64.urlsafe_b64decode(claims_b64 + "=="))
    assert header["alg"] == "ES256" and header["kid"] == "k1"
    assert claims["iss"] == claims["sub"] == "gateway"
    assert claims["aud"] == issuer + "/token"
    assert "client_secret" not in form
    public = ECKey.import_key(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    jwt.decode(form["client_assertion"], public, algorithms=["ES256"])  # signature verifies


async def test_a_rotated_bearer_file_is_picked_up_without_restart(
    modern, backend_factory, tmp_path: Path
) -> None:
    upstream, url = modern
    secret_file = tmp_path / "backend-token"
    secret_file.write_text("token-v1\n")
    upstream.accepted = {"token-v1"}
    secret = Secret("token-v1", f"file:{secret_file}", secret_file.stat().st_mtime)
    backend = await backend_factory(
        make_config(url, credential=CredentialConfig(type="bearer", token=secret))
    )
    assert (await invoke(backend))["isError"] is False
    secret_file.write_text("token-v2\n")
    later = secret_file.stat().st_mtime + 5
    os.utime(secret_file, (later, later))
    upstream.accepted = {"token-v2"}
    assert (await invoke(backend))["isError"] is False
    last = upstream.calls("tools/call")[-1]
    assert last.headers["Authorization"] == "Bearer token-v2"


async def test_a_refused_static_bearer_is_not_retried(modern, backend_factory) -> None:
    upstream, url = modern
    backend = await backend_factory(make_config(url))
    upstream.accepted = set()
    ctx = context()
    result = await backend.call_tool(call_of(backend), principal(), ctx, time.monotonic() + 5)
    assert result["content"][0]["text"] == "Upstream tool failed"
    assert ctx.outcome == "upstream_error"
    assert len(upstream.calls("tools/call")) == 1


async def test_concurrent_calls_share_one_token_refresh(token_setup, backend_factory) -> None:
    import asyncio

    _, url, tokens, issuer = token_setup
    clock = FakeClock()
    backend = await backend_factory(
        cc_config(url, issuer, token_endpoint=issuer + "/token"), clock=clock
    )
    clock.now += 1000  # the cached token is past its refresh point
    results = await asyncio.gather(*(invoke(backend) for _ in range(8)))
    assert all(r["isError"] is False for r in results)
    assert tokens.issued == ["cc-token-1", "cc-token-2"]


async def test_a_refusal_is_logged_with_the_issuers_error_code_and_nothing_else(
    token_setup, backend_factory
) -> None:
    # What an operator needs to fix a wrong secret or resource: the RFC 6749 §5.2 code.
    _, url, tokens, issuer = token_setup
    tokens.client_secret = "rotated-at-the-issuer"
    with structlog.testing.capture_logs() as logs:
        backend = await backend_factory(cc_config(url, issuer, token_endpoint=issuer + "/token"))
    assert not backend.ready
    (refused,) = [line for line in logs if line["event"] == "backend_token_request_refused"]
    assert (refused["status"], refused["error"]) == (401, "invalid_client")
    assert "s3cret" not in repr(logs)


LENIENT_TOKEN_ANSWERS = {
    # Each was a usable token to a lenient reader: the last member wins, NaN and a BOM are
    # accepted, the content type is not looked at. None is one to a strict reader.
    "duplicate member": (
        b'{"access_token": "{token}", "token_type": "N_A", "token_type": "Bearer"}',
        "application/json",
    ),
    "NaN expires_in": (
        b'{"access_token": "{token}", "token_type": "Bearer", "expires_in": NaN}',
        "application/json",
    ),
    "byte order mark": (
        b'\xef\xbb\xbf{"access_token": "{token}", "token_type": "Bearer"}',
        "application/json",
    ),
    "text/plain": (b'{"access_token": "{token}", "token_type": "Bearer"}', "text/plain"),
}


@pytest.mark.parametrize("answer", list(LENIENT_TOKEN_ANSWERS))
async def test_a_token_answer_is_read_strictly(token_setup, backend_factory, answer: str) -> None:
    upstream, url, tokens, issuer = token_setup
    tokens.raw_token = LENIENT_TOKEN_ANSWERS[answer]
    backend = await backend_factory(cc_config(url, issuer, token_endpoint=issuer + "/token"))
    assert tokens.issued == ["cc-token-1"]  # asked, answered, and the answer refused
    assert not backend.ready
    assert upstream.requests == []


LENIENT_METADATA = {
    "duplicate member": (
        b'{"issuer": "{issuer}", "token_endpoint": "https://elsewhere.example/token", '
        b'"token_endpoint": "{issuer}/token"}',
        "application/json",
    ),
    "byte order mark": (
        b'\xef\xbb\xbf{"issuer": "{issuer}", "token_endpoint": "{issuer}/token"}',
        "application/json",
    ),
    "UTF-16": (
        '{"issuer": "{issuer}", "token_endpoint": "{issuer}/token"}'.encode("utf-16"),
        "application/json",
    ),
    "text/plain": (b'{"issuer": "{issuer}", "token_endpoint": "{issuer}/token"}', "text/plain"),
}


@pytest.mark.parametrize("answer", list(LENIENT_METADATA))
async def test_issuer_metadata_is_read_strictly_when_discovering_the_token_endpoint(
    token_setup, backend_factory, answer: str
) -> None:
    upstream, url, tokens, issuer = token_setup
    body, content_type = LENIENT_METADATA[answer]
    if answer == "UTF-16":  # the placeholder is spelled in UTF-16 too
        body = body.decode("utf-16").replace("{issuer}", issuer).encode("utf-16")
    tokens.raw_metadata = (body, content_type)
    backend = await backend_factory(cc_config(url, issuer))
    assert not backend.ready
    assert tokens.issued == []  # no token endpoint was found, so none was asked
    assert upstream.requests == []


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b'{"error": "invalid_target", "error_description": "no"}', "invalid_target"),
        (b'{"error": "Invalid Client <script>"}', "other"),
        (b'{"error": "' + b"a" * 65 + b'"}', "other"),
        (b'{"error": 7}', "other"),
        (b'{"error_description": "only"}', None),
        (b"<html>503</html>", None),
        (b"[1]", None),
    ],
)
def test_the_logged_error_code_is_bounded(body: bytes, code: str | None) -> None:
    assert oauth_error_code(body) == code
