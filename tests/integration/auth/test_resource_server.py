"""ResourceServer against a real loopback issuer: claims, client auth, faults, discovery."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import get_args

import pytest

from gateway.auth.resource_server import ISSUER_RETRY_AFTER_S, ResourceServer
from gateway.config import Secret
from gateway.errors import (
    InvalidToken,
    IssuerUnavailable,
    NoCredentials,
    TokenInQuery,
)
from gateway.observability.metrics import Metrics
from gateway.seams import AuthRequest
from tests.support.auth import MakeRS, closed_port, sample
from tests.support.test_issuer import Fault, IssuerStub, generate_rsa_key

TOKEN = "tok.valid-0123456789abcdef"


async def became_ready(rs: ResourceServer, within_s: float = 2.0) -> bool:
    for _ in range(int(within_s / 0.02)):
        if rs.ready:
            return True
        await asyncio.sleep(0.02)
    return rs.ready


def req(token: str | None = TOKEN, *, ip: str = "192.0.2.10") -> AuthRequest:
    headers = () if token is None else ("Bearer " + token,)
    return AuthRequest(authorization=headers, query_keys=frozenset(), client_ip=ip)


class TestValidTokens:
    async def test_a_valid_token_yields_its_principal(
        self, stub: IssuerStub, make_rs: MakeRS
    ) -> None:
        stub.grant(TOKEN, scope="mcp:access docs:read", sub="alice", client_id="claude-code")
        rs = await make_rs()
        principal = await rs.authenticate(req())
        assert principal.subject == "alice"
        assert principal.client_id == "claude-code"
        assert principal.scopes == frozenset({"mcp:access", "docs:read"})
        assert principal.issuer == stub.issuer
        assert len(principal.fingerprint) == 12
        assert stub.introspection_calls == 1

    async def test_the_introspection_request_is_a_form_post_with_the_hint_and_accept_json(
        self, stub: IssuerStub, make_rs: MakeRS
    ) -> None:
        stub.grant(TOKEN)
        rs = await make_rs()
        await rs.authenticate(req())
        seen = stub.seen_requests[0]
        assert seen["form"]["token"] == TOKEN
        assert seen["form"]["token_type_hint"] == "access_token"
        assert seen["headers"]["Accept"] == "application/json"
        assert seen["headers"]["Content-Type"].startswith("application/x-www-form-urlencoded")

    async def test_missing_sub_falls_back_to_client_id_when_configured(
        self, stub: IssuerStub, make_rs: MakeRS
    ) -> None:
        stub.grant(TOKEN, sub=..., client_id="ci-bot")
        rs = await make_rs(subject_fallback="client_id")
        assert (await rs.authenticate(req())).subject == "ci-bot"


class TestInvalidTokens:
    @pytest.mark.parametrize(
        "claims",
        [
            {"active": False},
            {"exp": 1_000_000_000},
            {"nbf": 4_000_000_000},
            {"iss": "https://evil.example.com"},
            {"aud": "https://other.example.com/mcp"},
            {"aud": ["https://other.example.com/mcp", "https://mcp.example.com/other"]},
            {"active": True, "token_type": "refresh_token", "aud": ...},
            {"sub": ...},
        ],
        ids=[
            "inactive",
            "expired",
            "nbf in the future",
            "wrong iss",
            "wrong aud string",
            "wrong aud array",
            "refresh token",
            "missing sub",
        ],
    )
    async def test_the_token_is_answered_invalid_token(
        self, stub: IssuerStub, make_rs: MakeRS, claims: dict[str, object]
    ) -> None:
        stub.grant(TOKEN, **claims)
        rs = await make_rs()
        with pytest.raises(InvalidToken):
            await rs.authenticate(req())

    async def test_an_unknown_token_is_invalid_token(self, make_rs: MakeRS) -> None:
        rs = await make_rs()
        with pytest.raises(InvalidToken):
            await rs.authenticate(req("never-issued"))

    async def test_missing_and_malformed_headers_never_reach_the_issuer(
        self, stub: IssuerStub, make_rs: MakeRS
    ) -> None:
        rs = await make_rs()
        with pytest.raises(NoCredentials):
            await rs.authenticate(req(None))
        with pytest.raises(NoCredentials):
            await rs.authenticate(AuthRequest(("Basic Zm9vOmJhcg==",), frozenset(), "192.0.2.1"))
        with pytest.raises(InvalidToken):
            await rs.authenticate(AuthRequest(("Bearer a b",), frozenset(), "192.0.2.1"))
        with pytest.raises(TokenInQuery):
            await rs.authenticate(AuthRequest(("Bearer a", "Bearer b"), frozenset(), "192.0.2.1"))
        with pytest.raises(TokenInQuery):
            await rs.authenticate(AuthRequest((), frozenset({"access_token"}), "192.0.2.1"))
        assert stub.introspection_calls == 0


class TestClientAuthentication:
    async def test_client_secret_basic_form_encodes_id_and_secret(
        self, stub: IssuerStub, make_rs: MakeRS
    ) -> None:
        stub.grant(TOKEN)
        rs = await make_rs(client_auth="client_secret_basic")
        assert (await rs.authenticate(req())).subject == "alice"
        assert stub.auth_failures == 0

    async def test_client_secret_post_sends_the_credentials_in_the_form(
        self, stub: IssuerStub, make_rs: MakeRS
    ) -> None:
        stub.client_auth = "client_secret_post"
        stub.grant(TOKEN)
        rs = await make_rs(client_auth="client_secret_post")
        assert (await rs.authenticate(req())).subject == "alice"
        assert "Authorization" not in stub.seen_requests[0]["headers"]

    async def test_private_key_jwt_signs_a_fresh_assertion_per_call(
        self, stub: IssuerStub, make_rs: MakeRS, tmp_path: Path
    ) -> None:
        private, public = generate_rsa_key()
        key_file = tmp_path / "introspection-key.pem"
        key_file.write_text(private)
        stub.client_auth, stub.public_key_pem = "private_key_jwt", public
        stub.grant(TOKEN)
        stub.grant(TOKEN + "2")
        rs = await make_rs(
            client_auth="private_key_jwt",
            client_secret=None,
            private_key=Secret(key_file.read_text(), f"file:{key_file}"),
            private_key_id="k1",
        )
        assert (await rs.authenticate(req())).subject == "alice"
        assert (await rs.authenticate(req(TOKEN + "2"))).subject == "alice"
        assert stub.auth_failures == 0
        assert len(stub.seen_jti) == 2

    async def test_the_issuer_refusing_our_credentials_is_503_not_401(
        self, stub: IssuerStub, make_rs: MakeRS, metrics: Metrics
    ) -> None:
        stub.grant(TOKEN)
        rs = await make_rs(client_secret=Secret("wrong", "literal"))
        with pytest.raises(IssuerUnavailable) as info:
            await rs.authenticate(req())
        assert info.value.retry_after == ISSUER_RETRY_AFTER_S
        assert sample(metrics, "introspection_total", result="client_auth_rejected") == 1


class TestIssuerFaults:
    # Every fault the stub plays but refuse_token (a refusal of the token, not an outage).
    @pytest.mark.parametrize("fault", [f for f in get_args(Fault) if f != "refuse_token"])
    async def test_an_issuer_fault_is_503_with_retry_after(
        self, stub: IssuerStub, make_rs: MakeRS, fault: str
    ) -> None:
        stub.grant(TOKEN)
        stub.fault = fault  # type: ignore[assignment]
        stub.slow_s = 0.6
        # Only "slow" needs the short deadline; the others must not race it on a busy machine.
        rs = await make_rs(timeout_s=0.2 if fault == "slow" else 5.0)
        with pytest.raises(IssuerUnavailable) as info:
            await rs.authenticate(req())
        assert info.value.retry_after == ISSUER_RETRY_AFTER_S
        assert stub.introspection_calls == 1  # no retries

    async def test_an_issuer_that_is_down_is_503_with_retry_after(
        self, stub: IssuerStub, make_rs: MakeRS
    ) -> None:
        endpoint = f"http://127.0.0.1:{closed_port()}/introspect"
        rs = await make_rs(introspection_endpoint=endpoint)
        assert rs.ready
        with pytest.raises(IssuerUnavailable) as info:
            await rs.authenticate(req())
        assert info.value.retry_after == ISSUER_RETRY_AFTER_S

    async def test_an_issuer_fault_is_not_cached(self, stub: IssuerStub, make_rs: MakeRS) -> None:
        stub.grant(TOKEN)
        stub.fault = "5xx"
        rs = await make_rs()
        with pytest.raises(IssuerUnavailable):
            await rs.authenticate(req())
        stub.fault = None
        assert (await rs.authenticate(req())).subject == "alice"


class TestDiscovery:
    async def test_rfc_8414_metadata_is_used(self, stub: IssuerStub, make_rs: MakeRS) -> None:
        rs = await make_rs()
        assert rs.ready
        assert rs.metadata is not None
        assert rs.metadata.introspection_endpoint == stub.endpoint
        assert "/.well-known/oauth-authorization-server" in rs.metadata.source

    @pytest.mark.parametrize("mode", ["oidc_insert", "oidc_append"])
    async def test_oidc_discovery_is_the_fallback_with_an_issuer_path(
        self, stub: IssuerStub, make_rs: MakeRS, mode: str
    ) -> None:
        stub.path = "/realms/acme"
        stub.metadata_mode = mode  # type: ignore[assignment]
        stub.grant(TOKEN)
        rs = await make_rs()
        assert rs.ready
        assert rs.metadata is not None and "openid-configuration" in rs.metadata.source
        assert (await rs.authenticate(req())).subject == "alice"

    async def test_a_metadata_issuer_mismatch_leaves_the_server_not_ready_and_closed(
        self, stub: IssuerStub, make_rs: MakeRS
    ) -> None:
        stub.metadata_issuer = stub.issuer + "/"
        stub.grant(TOKEN)
        rs = await make_rs()
        assert not rs.ready
        assert rs.last_error == "issuer metadata names a different issuer"
        with pytest.raises(IssuerUnavailable):
            await rs.authenticate(req())
        assert stub.introspection_calls == 0

    async def test_an_endpoint_on_another_origin_is_refused(
        self, stub: IssuerStub, make_rs: MakeRS
    ) -> None:
        stub.introspection_endpoint = "http://localhost:1/introspect"
        rs = await make_rs()
        assert not rs.ready

    @pytest.mark.parametrize(
        "shape",
        [
            "http://evil@{host}/introspect",
            "http://{host}/introspect#frag",
            "http://u:p@{host}/introspect",
            "http://{host}\\@evil.example/introspect",
        ],
        ids=["userinfo", "fragment", "user and password", "backslash"],
    )
    async def test_an_endpoint_with_userinfo_or_a_fragment_is_refused(
        self, stub: IssuerStub, make_rs: MakeRS, shape: str
    ) -> None:
        stub.introspection_endpoint = shape.format(host=stub.base_url.split("//", 1)[1])
        stub.grant(TOKEN)
        rs = await make_rs()
        assert not rs.ready
        assert rs.last_error is not None and "introspection_endpoint" in rs.last_error
        with pytest.raises(IssuerUnavailable):
            await rs.authenticate(req())
        assert stub.introspection_calls == 0

    async def test_an_endpoint_that_cannot_be_requested_is_503_never_a_crash(
        self, stub: IssuerStub, make_rs: MakeRS
    ) -> None:
        # A configured endpoint skips the discovery rules; aiohttp refuses to combine URL
        # credentials with the Basic client authentication header (a ValueError, not a
        # ClientError): the outbound layer maps it to an outbound failure, hence 503.
        stub.grant(TOKEN)
        host = stub.base_url.split("//", 1)[1]
        rs = await make_rs(introspection_endpoint=f"http://evil@{host}/introspect")
        with pytest.raises(IssuerUnavailable):
            await rs.authenticate(req())

    @pytest.mark.parametrize("spelling", ["byte_order_mark", "utf16", "text_plain"])
    async def test_metadata_a_lenient_reader_takes_is_refused(
        self, stub: IssuerStub, make_rs: MakeRS, spelling: str
    ) -> None:
        stub.metadata_spelling = spelling  # type: ignore[assignment]
        stub.grant(TOKEN)
        rs = await make_rs()
        assert not rs.ready
        with pytest.raises(IssuerUnavailable):
            await rs.authenticate(req())
        assert stub.introspection_calls == 0

    async def test_discovery_is_retried_until_the_issuer_answers(
        self, stub: IssuerStub, make_rs: MakeRS
    ) -> None:
        stub.metadata_fault = "5xx"
        rs = await make_rs()
        assert not rs.ready
        stub.metadata_fault = None
        assert await became_ready(rs)

    async def test_a_configured_endpoint_skips_discovery(
        self, stub: IssuerStub, make_rs: MakeRS
    ) -> None:
        stub.metadata_mode = "none"
        stub.grant(TOKEN)
        rs = await make_rs(introspection_endpoint=stub.endpoint)
        assert (await rs.authenticate(req())).subject == "alice"
        assert stub.metadata_calls == 0


async def test_close_stops_the_refresher(stub: IssuerStub, make_rs: MakeRS) -> None:
    rs: ResourceServer = await make_rs(metadata_refresh_s=0.01)
    await asyncio.sleep(0.05)
    calls = stub.metadata_calls
    assert calls >= 2  # refreshed periodically
    await rs.close()
    # A fetch already on the wire when close() began may still reach the stub (counted on
    # arrival): at most that one, and nothing after it, across five refresh periods.
    await asyncio.sleep(0.02)
    settled = stub.metadata_calls
    assert settled <= calls + 1
    await asyncio.sleep(0.05)
    assert stub.metadata_calls == settled


async def test_the_prm_document_and_challenges_use_the_current_baseline(
    stub: IssuerStub, make_rs: MakeRS
) -> None:
    rs = await make_rs(baseline=("mcp:access",))
    doc = rs.protected_resource_metadata()
    assert doc["resource"] == "https://mcp.example.com/mcp"
    assert doc["authorization_servers"] == [stub.issuer]
    assert doc["scopes_supported"] == ["mcp:access"]
    assert rs.challenge(NoCredentials()) == (
        'Bearer resource_metadata="https://mcp.example.com/.well-known/'
        'oauth-protected-resource/mcp", scope="mcp:access"'
    )


async def test_a_server_is_not_ready_before_start_even_with_a_configured_endpoint(
    stub: IssuerStub, make_rs: MakeRS
) -> None:
    rs = await make_rs(introspection_endpoint=stub.endpoint, start=False)
    assert not rs.ready
    await rs.start()
    assert rs.ready
