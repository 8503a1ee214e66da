"""Browserless OAuth 2.1 client steps, as Claude Code and Codex perform them (RFC 7591, 7636, 8707).

Used by the development issuer tests and the end-to-end tests: register a public native client,
follow the (auto-approving) authorization endpoint's redirect by hand, exchange the code.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.support.dev_http import HttpClient

__all__ = [
    "AuthorizationResult",
    "CodeFlow",
    "Pkce",
    "authorize",
    "code_flow",
    "dev_endpoints",
    "exchange_code",
    "register_public_client",
]

REDIRECT_URI = "http://127.0.0.1:53682/callback"


@dataclass(frozen=True, slots=True)
class Pkce:
    verifier: str
    challenge: str

    @classmethod
    def new(cls) -> Pkce:
        verifier = secrets.token_urlsafe(48)
        digest = hashlib.sha256(verifier.encode("ascii")).digest()
        return cls(verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii"))


@dataclass(frozen=True, slots=True)
class AuthorizationResult:
    status: int
    location: str | None
    params: dict[str, str]
    """Query parameters of the redirect back to the client (code, state, iss, error...)."""


async def register_public_client(
    http: HttpClient,
    registration_endpoint: str,
    *,
    redirect_uri: str = REDIRECT_URI,
    scope: str = "mcp:access",
    client_name: str = "Claude Code (test)",
) -> dict[str, Any]:
    """RFC 7591 registration with the body Claude Code sends (client-behaviour.md §3)."""
    response = await http.post(
        registration_endpoint,
        json={
            "client_name": client_name,
            "redirect_uris": [redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
            "application_type": "native",
            "scope": scope,
        },
    )
    body: dict[str, Any] = await response.json()
    assert response.status == 201, body
    return body


async def authorize(
    http: HttpClient,
    authorization_endpoint: str,
    *,
    client_id: str,
    pkce: Pkce | None,
    scope: str = "mcp:access",
    resource: str | None = None,
    redirect_uri: str = REDIRECT_URI,
    state: str = "state-123",
    extra: dict[str, str] | None = None,
) -> AuthorizationResult:
    """GET the authorization endpoint and read the redirect without following it."""
    params = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": redirect_uri,
        "scope": scope,
        "state": state,
    }
    if pkce is not None:
        params |= {"code_challenge": pkce.challenge, "code_challenge_method": "S256"}
    if resource is not None:
        params["resource"] = resource
    params |= extra or {}
    response = await http.get(authorization_endpoint, params=params, allow_redirects=False)
    await response.read()
    location = response.headers.get("Location")
    query = parse_qs(urlsplit(location).query) if location else {}
    return AuthorizationResult(response.status, location, {k: v[0] for k, v in query.items()})


async def exchange_code(
    http: HttpClient,
    token_endpoint: str,
    *,
    client_id: str,
    code: str,
    verifier: str,
    resource: str | None = None,
    redirect_uri: str = REDIRECT_URI,
) -> tuple[int, dict[str, Any]]:
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": redirect_uri,
        "client_id": client_id,
        "code_verifier": verifier,
    }
    if resource is not None:
        form["resource"] = resource
    response = await http.post(token_endpoint, data=form)
    return response.status, await response.json()


def dev_endpoints(issuer_url: str) -> dict[str, str]:
    """The development issuer's endpoints, named as its metadata names them."""
    return {
        "registration_endpoint": f"{issuer_url}/register",
        "authorization_endpoint": f"{issuer_url}/authorize",
        "token_endpoint": f"{issuer_url}/token",
    }


@dataclass(frozen=True, slots=True)
class CodeFlow:
    client: dict[str, Any]
    authorization: AuthorizationResult
    status: int
    """The token endpoint's status."""
    token: dict[str, Any]


async def code_flow(
    http: HttpClient,
    metadata: dict[str, Any],
    *,
    scope: str = "mcp:access",
    resource: str | None = None,
    token_resource: str | None = None,
) -> CodeFlow:
    """Register a public client, authorize with PKCE (``resource`` in the request) and exchange
    the code (``token_resource`` in the token request): each step's answer, for the caller to
    check. ``metadata`` names the three endpoints (the issuer's metadata, or
    :func:`dev_endpoints`)."""
    client = await register_public_client(http, metadata["registration_endpoint"], scope=scope)
    pkce = Pkce.new()
    result = await authorize(
        http,
        metadata["authorization_endpoint"],
        client_id=client["client_id"],
        pkce=pkce,
        scope=scope,
        resource=resource,
    )
    assert result.status == 302, result
    status, token = await exchange_code(
        http,
        metadata["token_endpoint"],
        client_id=client["client_id"],
        code=result.params["code"],
        verifier=pkce.verifier,
        resource=token_resource,
    )
    return CodeFlow(client, result, status, token)
