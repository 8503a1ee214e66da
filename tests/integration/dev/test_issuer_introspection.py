"""The development issuer's RFC 7662 introspection, RFC 7009 revocation and minting endpoint."""

from __future__ import annotations

import time
import uuid
from typing import Any

import aiohttp
import pytest
from joserfc import jwt
from joserfc.jwk import ECKey, RSAKey

from gateway.dev.dev_issuer import DevIssuer
from tests.integration.dev.conftest import GATEWAY_ID, GATEWAY_SECRET, RESOURCE
from tests.support.dev_http import HttpClient, basic

ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"


def _assertion(key: RSAKey | ECKey, alg: str, client_id: str, audience: str, jti: str) -> str:
    now = int(time.time())
    claims = {"iss": client_id, "sub": client_id, "aud": audience, "iat": now, "exp": now + 60}
    return jwt.encode({"alg": alg, "kid": "k1"}, {**claims, "jti": jti}, key)


async def _post_introspect(
    http: HttpClient, issuer: DevIssuer, token: str, **kwargs: Any
) -> aiohttp.ClientResponse:
    return await http.post(f"{issuer.url}/introspect", data={"token": token}, **kwargs)


class TestIntrospection:
    async def test_client_secret_basic_introspection_returns_the_rfc_7662_members(
        self, issuer: DevIssuer, http: HttpClient
    ) -> None:
        token = issuer.mint_token(sub="alice", scopes="mcp:access notes:read", audience=RESOURCE)
        response = await _post_introspect(
            http, issuer, token, headers=basic(GATEWAY_ID, GATEWAY_SECRET)
        )
        info = await response.json()
        assert response.status == 200
        assert info["active"] is True
        assert info["sub"] == "alice"
        assert info["scope"] == "mcp:access notes:read"
        assert info["aud"] == RESOURCE
        assert info["iss"] == issuer.url
        assert info["token_type"] == "Bearer"
        assert {"exp", "iat", "nbf", "client_id"} <= set(info)
        assert issuer.introspection_calls == 1
        assert issuer.store.introspection_calls_by_client == {GATEWAY_ID: 1}

    @pytest.mark.parametrize(
        ("alg", "make_key"),
        [
            ("RS256", lambda: RSAKey.generate_key(2048)),
            ("ES256", lambda: ECKey.generate_key("P-256")),
        ],
        ids=["RS256 key", "ES256 key"],
    )
    async def test_private_key_jwt_introspection_is_accepted_once_per_jti(
        self, issuer: DevIssuer, http: HttpClient, alg: str, make_key: Any
    ) -> None:
        key = make_key()
        public = {**key.as_dict(private=False), "kid": "k1", "alg": alg}
        issuer.register_client(
            "gw-jwt", auth_method="private_key_jwt", jwks={"keys": [public]}, can_introspect=True
        )
        token = issuer.mint_token(sub="bob", scopes="mcp:access", audience=RESOURCE)
        assertion = _assertion(key, alg, "gw-jwt", f"{issuer.url}/introspect", str(uuid.uuid4()))
        form = {
            "token": token,
            "client_assertion_type": ASSERTION_TYPE,
            "client_assertion": assertion,
        }
        response = await http.post(f"{issuer.url}/introspect", data=form)
        assert response.status == 200
        assert (await response.json())["active"] is True
        replay = await http.post(f"{issuer.url}/introspect", data=form)
        assert replay.status in {400, 401}
        assert (await replay.json())["error"] == "invalid_client"

    async def test_an_assertion_signed_by_another_key_is_refused(
        self, issuer: DevIssuer, http: HttpClient
    ) -> None:
        registered = RSAKey.generate_key(2048)
        issuer.register_client(
            "gw-jwt",
            auth_method="private_key_jwt",
            jwks={"keys": [{**registered.as_dict(private=False), "kid": "k1"}]},
            can_introspect=True,
        )
        other = RSAKey.generate_key(2048)
        form = {
            "token": "x",
            "client_assertion_type": ASSERTION_TYPE,
            "client_assertion": _assertion(other, "RS256", "gw-jwt", issuer.url, "j1"),
        }
        response = await http.post(f"{issuer.url}/introspect", data=form)
        assert response.status in {400, 401}
        assert (await response.json())["error"] == "invalid_client"

    async def test_introspection_without_client_authentication_is_refused(
        self, issuer: DevIssuer, http: HttpClient
    ) -> None:
        response = await _post_introspect(http, issuer, "anything")
        assert response.status == 401
        assert (await response.json())["error"] == "invalid_client"

    async def test_unknown_and_expired_tokens_introspect_as_inactive_only(
        self, issuer: DevIssuer, http: HttpClient
    ) -> None:
        expired = issuer.mint_token(sub="x", scopes="mcp:access", ttl_s=0)
        for token in ("never-issued", expired):
            response = await _post_introspect(
                http, issuer, token, headers=basic(GATEWAY_ID, GATEWAY_SECRET)
            )
            # RFC 7662 §2.2: inactive tokens SHOULD carry nothing but "active": false.
            assert await response.json() == {"active": False}

    async def test_the_outage_knob_answers_introspection_with_the_configured_status(
        self, issuer: DevIssuer, http: HttpClient
    ) -> None:
        issuer.introspection_status = 503
        response = await _post_introspect(
            http, issuer, "t", headers=basic(GATEWAY_ID, GATEWAY_SECRET)
        )
        assert response.status == 503


class TestRevocation:
    async def test_a_revoked_access_token_introspects_as_inactive(
        self, issuer: DevIssuer, http: HttpClient
    ) -> None:
        token = issuer.mint_token(sub="carol", client_id=GATEWAY_ID, scopes="mcp:access")
        response = await http.post(
            f"{issuer.url}/revoke", data={"token": token}, headers=basic(GATEWAY_ID, GATEWAY_SECRET)
        )
        assert response.status == 200
        info = await _post_introspect(
            http, issuer, token, headers=basic(GATEWAY_ID, GATEWAY_SECRET)
        )
        assert await info.json() == {"active": False}

    async def test_revoking_an_unknown_token_still_answers_200(
        self, issuer: DevIssuer, http: HttpClient
    ) -> None:
        # RFC 7009 §2.2: invalid tokens do not cause an error response.
        response = await http.post(
            f"{issuer.url}/revoke",
            data={"token": "nope"},
            headers=basic(GATEWAY_ID, GATEWAY_SECRET),
        )
        assert response.status == 200

    def test_the_programmatic_revoke_reports_whether_the_token_existed(
        self, issuer: DevIssuer
    ) -> None:
        token = issuer.mint_token(sub="dave", scopes=["mcp:access"])
        assert issuer.revoke(token) is True
        assert issuer.store.tokens[token].revoked is True
        assert issuer.revoke("unknown") is False


class TestMintEndpoint:
    async def test_the_admin_secret_mints_a_token_for_the_configured_resource(
        self, issuer: DevIssuer, http: HttpClient
    ) -> None:
        response = await http.post(
            f"{issuer.url}/dev/tokens",
            json={"scopes": "mcp:access notes:write", "sub": "eve"},
            headers={"Authorization": f"Bearer {issuer.admin_secret}"},
        )
        body = await response.json()
        assert response.status == 200, body
        assert body["scope"] == "mcp:access notes:write"
        record = issuer.store.tokens[body["access_token"]]
        assert record.audience == (RESOURCE,)
        assert record.sub == "eve"

    @pytest.mark.parametrize(
        "headers",
        [{}, {"Authorization": "Bearer wrong"}],
        ids=["no admin secret", "wrong admin secret"],
    )
    async def test_minting_without_the_admin_secret_is_refused(
        self, issuer: DevIssuer, http: HttpClient, headers: dict[str, str]
    ) -> None:
        response = await http.post(
            f"{issuer.url}/dev/tokens", json={"scopes": "admin"}, headers=headers
        )
        assert response.status == 401

    async def test_minting_an_unknown_scope_is_refused(
        self, issuer: DevIssuer, http: HttpClient
    ) -> None:
        response = await http.post(
            f"{issuer.url}/dev/tokens",
            json={"scopes": "root"},
            headers={"Authorization": f"Bearer {issuer.admin_secret}"},
        )
        assert response.status == 400

    @pytest.mark.parametrize(
        ("audience", "error"),
        [(["a", "list"], "invalid_request"), ("https://elsewhere.example/mcp", "invalid_target")],
        ids=["audience not a string", "audience outside the allowlist"],
    )
    async def test_minting_for_a_bad_audience_is_refused(
        self, issuer: DevIssuer, http: HttpClient, audience: object, error: str
    ) -> None:
        response = await http.post(
            f"{issuer.url}/dev/tokens",
            json={"scopes": "mcp:access", "audience": audience},
            headers={"Authorization": f"Bearer {issuer.admin_secret}"},
        )
        assert response.status == 400
        assert (await response.json())["error"] == error


def test_expired_tokens_are_purged_when_new_ones_are_minted(issuer: DevIssuer) -> None:
    old = issuer.mint_token(sub="x", scopes="mcp:access", ttl_s=0)
    issuer.store.tokens[old].expires_at -= 1
    issuer.mint_token(sub="y", scopes="mcp:access")
    assert old not in issuer.store.tokens
