"""The development issuer over real HTTP: metadata, registration, code + PKCE, refresh, resource."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest
from authlib.oauth2.rfc8414 import AuthorizationServerMetadata
from authlib.oauth2.rfc9207 import AuthorizationServerMetadata as IssMetadata

from gateway.dev.dev_issuer import DevIssuer
from tests.integration.dev.conftest import GATEWAY_ID, GATEWAY_SECRET, RESOURCE
from tests.support.dev_http import HttpClient, basic
from tests.support.oauth_flow import (
    Pkce,
    authorize,
    code_flow,
    dev_endpoints,
    exchange_code,
    register_public_client,
)


async def _introspect(http: HttpClient, issuer: DevIssuer, token: str) -> dict[str, Any]:
    response = await http.post(
        f"{issuer.url}/introspect", data={"token": token}, headers=basic(GATEWAY_ID, GATEWAY_SECRET)
    )
    assert response.status == 200
    body: dict[str, Any] = await response.json()
    return body


async def _code_flow(
    http: HttpClient, issuer: DevIssuer, *, scope: str = "mcp:access"
) -> tuple[dict[str, Any], dict[str, Any]]:
    flow = await code_flow(
        http, dev_endpoints(issuer.url), scope=scope, resource=RESOURCE, token_resource=RESOURCE
    )
    assert flow.status == 200, flow.token
    return flow.client, flow.token


class TestMetadata:
    async def test_both_discovery_documents_name_the_issuer_exactly_and_validate(
        self, issuer: DevIssuer, http: HttpClient
    ) -> None:
        rfc8414 = await (
            await http.get(f"{issuer.url}/.well-known/oauth-authorization-server")
        ).json()
        oidc = await (await http.get(f"{issuer.url}/.well-known/openid-configuration")).json()
        assert rfc8414 == oidc
        assert rfc8414["issuer"] == issuer.url
        assert not issuer.url.endswith("/")
        AuthorizationServerMetadata(rfc8414).validate(metadata_classes=[IssMetadata])
        assert rfc8414["code_challenge_methods_supported"] == ["S256"]
        assert rfc8414["authorization_response_iss_parameter_supported"] is True
        assert {"client_secret_basic", "private_key_jwt"} <= set(
            rfc8414["introspection_endpoint_auth_methods_supported"]
        )
        assert "none" in rfc8414["token_endpoint_auth_methods_supported"]

    def test_a_non_loopback_bind_address_is_refused_unless_forced(self) -> None:
        with pytest.raises(ValueError, match="loopback"):
            DevIssuer(host="0.0.0.0")
        DevIssuer(host="0.0.0.0", allow_non_loopback=True)


class TestClientCredentials:
    async def test_a_confidential_client_gets_a_token_whose_audience_is_the_resource(
        self, issuer: DevIssuer, http: HttpClient
    ) -> None:
        response = await http.post(
            f"{issuer.url}/token",
            data={"grant_type": "client_credentials", "scope": "mcp:access", "resource": RESOURCE},
            headers=basic(GATEWAY_ID, GATEWAY_SECRET),
        )
        token = await response.json()
        assert response.status == 200, token
        assert response.headers["Cache-Control"] == "no-store"
        assert token["token_type"] == "Bearer"
        assert "refresh_token" not in token
        info = await _introspect(http, issuer, token["access_token"])
        assert info["active"] is True
        assert info["aud"] == RESOURCE
        assert info["client_id"] == GATEWAY_ID
        assert info["sub"] == GATEWAY_ID
        assert info["scope"] == "mcp:access"
        assert info["iss"] == issuer.url
        assert info["token_type"] == "Bearer"
        assert info["iat"] <= info["nbf"] < info["exp"]

    @pytest.mark.parametrize(
        ("data", "secret", "status", "error"),
        [
            ({"resource": "https://elsewhere.example/mcp"}, GATEWAY_SECRET, 400, "invalid_target"),
            ({}, "wrong", 401, "invalid_client"),
            ({"scope": "admin"}, GATEWAY_SECRET, 400, "invalid_scope"),
        ],
        ids=["an unknown resource", "a wrong client secret", "a scope never registered"],
    )
    async def test_a_refused_client_credentials_request_names_the_oauth_error(
        self,
        *,
        issuer: DevIssuer,
        http: HttpClient,
        data: dict[str, str],
        secret: str,
        status: int,
        error: str,
    ) -> None:
        response = await http.post(
            f"{issuer.url}/token",
            data={"grant_type": "client_credentials", **data},
            headers=basic(GATEWAY_ID, secret),
        )
        assert response.status == status
        assert (await response.json())["error"] == error


class TestRegistration:
    async def test_a_public_native_client_registers_without_receiving_a_secret(
        self, issuer: DevIssuer, http: HttpClient
    ) -> None:
        client = await register_public_client(http, f"{issuer.url}/register")
        assert client["token_endpoint_auth_method"] == "none"
        assert "client_secret" not in client
        assert client["client_id"] in issuer.store.clients

    @pytest.mark.parametrize(
        "redirect_uri",
        ["http://example.com/callback", "javascript:alert(1)"],
        ids=["plain http to a public host", "javascript scheme"],
    )
    async def test_an_unsafe_redirect_uri_is_refused_with_invalid_client_metadata(
        self, issuer: DevIssuer, http: HttpClient, redirect_uri: str
    ) -> None:
        response = await http.post(
            f"{issuer.url}/register",
            json={"redirect_uris": [redirect_uri], "token_endpoint_auth_method": "none"},
        )
        assert response.status == 400
        assert (await response.json())["error"] in {
            "invalid_client_metadata",
            "invalid_redirect_uri",
        }

    async def test_a_registration_body_that_is_not_an_object_is_refused(
        self, issuer: DevIssuer, http: HttpClient
    ) -> None:
        response = await http.post(f"{issuer.url}/register", json=["x"])
        assert response.status == 400
        assert (await response.json())["error"] == "invalid_client_metadata"


class TestAuthorizationCode:
    async def test_the_code_flow_with_pkce_yields_a_token_for_the_requested_resource(
        self, issuer: DevIssuer, http: HttpClient
    ) -> None:
        client = await register_public_client(http, f"{issuer.url}/register")
        pkce = Pkce.new()
        result = await authorize(
            http,
            f"{issuer.url}/authorize",
            client_id=client["client_id"],
            pkce=pkce,
            resource=RESOURCE,
            # RFC 8252 §7.3: any port on the registered loopback redirect.
            redirect_uri="http://127.0.0.1:61000/callback",
        )
        assert result.status == 302
        assert result.location is not None
        assert result.location.startswith("http://127.0.0.1:61000/callback?")
        assert result.params["state"] == "state-123"
        assert result.params["iss"] == issuer.url  # RFC 9207 §2
        status, token = await exchange_code(
            http,
            f"{issuer.url}/token",
            client_id=client["client_id"],
            code=result.params["code"],
            verifier=pkce.verifier,
            resource=RESOURCE,
            redirect_uri="http://127.0.0.1:61000/callback",
        )
        assert status == 200, token
        # The auto-approving user adds the configured grant scopes (notes:read).
        assert token["scope"] == "mcp:access notes:read"
        assert "refresh_token" in token
        info = await _introspect(http, issuer, token["access_token"])
        assert info["active"] is True
        assert info["aud"] == RESOURCE
        assert info["sub"] == "demo-user"
        assert info["client_id"] == client["client_id"]

    async def test_an_authorization_request_without_pkce_is_sent_back_with_invalid_request(
        self, issuer: DevIssuer, http: HttpClient
    ) -> None:
        client = await register_public_client(http, f"{issuer.url}/register")
        result = await authorize(
            http, f"{issuer.url}/authorize", client_id=client["client_id"], pkce=None
        )
        assert result.status == 302
        assert result.params["error"] == "invalid_request"
        assert result.params["iss"] == issuer.url
        assert result.params["state"] == "state-123"

    async def test_the_plain_code_challenge_method_is_refused(
        self, issuer: DevIssuer, http: HttpClient
    ) -> None:
        client = await register_public_client(http, f"{issuer.url}/register")
        pkce = Pkce.new()
        result = await authorize(
            http,
            f"{issuer.url}/authorize",
            client_id=client["client_id"],
            pkce=None,
            extra={"code_challenge": pkce.verifier, "code_challenge_method": "plain"},
        )
        assert result.params["error"] == "invalid_request"

    async def test_an_unregistered_redirect_uri_gets_an_error_page_and_no_redirect(
        self, issuer: DevIssuer, http: HttpClient
    ) -> None:
        client = await register_public_client(http, f"{issuer.url}/register")
        result = await authorize(
            http,
            f"{issuer.url}/authorize",
            client_id=client["client_id"],
            pkce=Pkce.new(),
            redirect_uri="https://attacker.example/cb",
        )
        assert result.status == 400
        assert result.location is None

    async def test_an_unknown_resource_is_sent_back_with_invalid_target(
        self, issuer: DevIssuer, http: HttpClient
    ) -> None:
        client = await register_public_client(http, f"{issuer.url}/register")
        result = await authorize(
            http,
            f"{issuer.url}/authorize",
            client_id=client["client_id"],
            pkce=Pkce.new(),
            resource="https://other.example/mcp",
        )
        assert result.params["error"] == "invalid_target"
        assert result.params["iss"] == issuer.url

    async def test_a_wrong_code_verifier_is_refused_with_invalid_grant(
        self, issuer: DevIssuer, http: HttpClient
    ) -> None:
        client = await register_public_client(http, f"{issuer.url}/register")
        result = await authorize(
            http, f"{issuer.url}/authorize", client_id=client["client_id"], pkce=Pkce.new()
        )
        status, body = await exchange_code(
            http,
            f"{issuer.url}/token",
            client_id=client["client_id"],
            code=result.params["code"],
            verifier=Pkce.new().verifier,
        )
        assert status == 400
        assert body["error"] == "invalid_grant"

    async def test_a_replayed_code_is_refused_and_revokes_the_tokens_it_produced(
        self, issuer: DevIssuer, http: HttpClient
    ) -> None:
        client = await register_public_client(http, f"{issuer.url}/register")
        pkce = Pkce.new()
        result = await authorize(
            http, f"{issuer.url}/authorize", client_id=client["client_id"], pkce=pkce
        )
        args = {
            "client_id": client["client_id"],
            "code": result.params["code"],
            "verifier": pkce.verifier,
        }
        status, first = await exchange_code(http, f"{issuer.url}/token", **args)
        assert status == 200
        status, second = await exchange_code(http, f"{issuer.url}/token", **args)
        assert status == 400
        assert second["error"] == "invalid_grant"
        assert (await _introspect(http, issuer, first["access_token"])) == {"active": False}

    async def test_a_token_request_may_not_widen_the_resources_of_the_grant(
        self, issuer: DevIssuer, http: HttpClient
    ) -> None:
        client = await register_public_client(http, f"{issuer.url}/register")
        pkce = Pkce.new()
        result = await authorize(
            http, f"{issuer.url}/authorize", client_id=client["client_id"], pkce=pkce
        )
        status, body = await exchange_code(
            http,
            f"{issuer.url}/token",
            client_id=client["client_id"],
            code=result.params["code"],
            verifier=pkce.verifier,
            resource=RESOURCE,
        )
        assert status == 400
        assert body["error"] == "invalid_target"


class TestConsentPage:
    async def test_the_consent_page_grants_the_chosen_scopes_on_approve(
        self, issuer: DevIssuer, http: HttpClient
    ) -> None:
        issuer.consent = "page"
        client = await register_public_client(http, f"{issuer.url}/register")
        pkce = Pkce.new()
        page = await authorize(
            http, f"{issuer.url}/authorize", client_id=client["client_id"], pkce=pkce
        )
        assert page.status == 200
        nonce = next(iter(issuer.store.consents))
        form = aiohttp.FormData()
        for key, value in {
            "response_type": "code",
            "client_id": client["client_id"],
            "redirect_uri": "http://127.0.0.1:53682/callback",
            "scope": "mcp:access",
            "state": "s1",
            "code_challenge": pkce.challenge,
            "code_challenge_method": "S256",
            "consent_nonce": nonce,
            "approve": "yes",
        }.items():
            form.add_field(key, value)
        form.add_field("scope_choice", "mcp:access")
        form.add_field("scope_choice", "notes:write")
        response = await http.post(f"{issuer.url}/authorize", data=form, allow_redirects=False)
        assert response.status == 302
        location = response.headers["Location"]
        assert "code=" in location
        assert "iss=" in location
        code = location.split("code=")[1].split("&")[0]
        status, token = await exchange_code(
            http,
            f"{issuer.url}/token",
            client_id=client["client_id"],
            code=code,
            verifier=pkce.verifier,
        )
        assert status == 200
        assert token["scope"] == "mcp:access notes:write"

    async def test_a_consent_form_without_a_valid_nonce_is_refused(
        self, issuer: DevIssuer, http: HttpClient
    ) -> None:
        response = await http.post(
            f"{issuer.url}/authorize", data={"consent_nonce": "forged", "approve": "yes"}
        )
        assert response.status == 400


class TestRefresh:
    async def test_refreshing_rotates_the_refresh_token(
        self, issuer: DevIssuer, http: HttpClient
    ) -> None:
        client, token = await _code_flow(http, issuer)
        response = await http.post(
            f"{issuer.url}/token",
            data={
                "grant_type": "refresh_token",
                "refresh_token": token["refresh_token"],
                "client_id": client["client_id"],
            },
        )
        fresh = await response.json()
        assert response.status == 200, fresh
        assert fresh["refresh_token"] != token["refresh_token"]
        info = await _introspect(http, issuer, fresh["access_token"])
        assert info["aud"] == RESOURCE
        refresh_info = await _introspect(http, issuer, fresh["refresh_token"])
        assert refresh_info["active"] is True
        assert refresh_info["token_type"] == "refresh_token"
        assert "aud" not in refresh_info

    async def test_a_replayed_refresh_token_revokes_the_whole_grant(
        self, issuer: DevIssuer, http: HttpClient
    ) -> None:
        client, token = await _code_flow(http, issuer)
        form = {
            "grant_type": "refresh_token",
            "refresh_token": token["refresh_token"],
            "client_id": client["client_id"],
        }
        fresh = await (await http.post(f"{issuer.url}/token", data=form)).json()
        replay = await http.post(f"{issuer.url}/token", data=form)
        assert replay.status == 400
        assert (await replay.json())["error"] == "invalid_grant"
        assert (await _introspect(http, issuer, fresh["access_token"]))["active"] is False
        assert (await _introspect(http, issuer, fresh["refresh_token"]))["active"] is False
