"""Tokens shaped exactly like two providers', signed by a development issuer standing in for them.

- Microsoft Entra ID v2.0 (``tokens: jwt``; the issuer has no introspection endpoint): a user's
  token (delegated ``scp``, a space-separated string of short scope names) and an application's
  client-credentials token (``roles``, no ``scp``, ``sub`` = ``oid`` of the service principal).
  Header ``typ: JWT``, ``aud`` = the API's client id, ``ver: 2.0``.
- Keycloak (``tokens: introspection`` over real RFC 7662 at the development issuer, whose answer is
  the token's own claims, as Keycloak's is: :meth:`~gateway.dev.dev_issuer.DevIssuer.mint_signed`):
  a service account's access token (``typ: Bearer``, ``azp``, ``realm_access``, ``scope``), and a
  user's ID token whose ``aud`` also names the resource (an Audience mapper added to ID tokens),
  which Keycloak introspects as ``active: true``.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from gateway.dev.dev_issuer import DevIssuer

__all__ = [
    "ENTRA_API_CLIENT_ID",
    "ENTRA_TENANT_ID",
    "entra_app_token",
    "entra_user_token",
    "keycloak_id_token",
    "keycloak_service_token",
]

ENTRA_API_CLIENT_ID = "66666666-7777-8888-9999-000000000000"
ENTRA_TENANT_ID = "11111111-2222-3333-4444-555555555555"


def _entra(dev: DevIssuer, claims: dict[str, Any]) -> str:
    now = int(time.time())
    body = {
        "aud": ENTRA_API_CLIENT_ID,
        "iss": dev.url,
        "iat": now,
        "nbf": now,
        "exp": now + 3600,
        "aio": "AXQAi/8TAAAA",
        "rh": "0.AXQA",
        "tid": ENTRA_TENANT_ID,
        "uti": uuid.uuid4().hex[:22],
        "ver": "2.0",
        **claims,
    }
    return dev.sign_jwt({k: v for k, v in body.items() if v is not None}, header={"typ": "JWT"})


def entra_user_token(dev: DevIssuer, scp: str = "mcp.access", **claims: Any) -> str:
    """A v2.0 delegated token: ``scp`` holds the short names (``mcp.access``), ``sub`` is
    pairwise per application, ``oid`` the user's object id, ``azp`` the client app."""
    return _entra(
        dev,
        {
            "azp": "claude-code-app",
            "azpacr": "0",
            "name": "Erin Example",
            "oid": "9f3c0b1e-user-object-id",
            "preferred_username": "erin@acme.example",
            "sub": "pairwise-per-app-subject",
            "scp": scp,
            **claims,
        },
    )


def entra_app_token(dev: DevIssuer, roles: list[str], **claims: Any) -> str:
    """A v2.0 client-credentials token: application permissions in ``roles``, no ``scp``;
    ``sub`` and ``oid`` are the service principal's object id."""
    principal = "5e1c2d3f-service-principal-oid"
    return _entra(
        dev,
        {
            "azp": "nightly-report-app",
            "azpacr": "1",
            "idp": dev.url,
            "oid": principal,
            "sub": principal,
            "roles": roles,
            **claims,
        },
    )


def keycloak_service_token(
    dev: DevIssuer, resource: str, scope: str = "mcp:access", **claims: Any
) -> str:
    """A service account's access token (client credentials), introspected as Keycloak answers:
    the token's claims plus ``active``, ``client_id`` and ``username``."""
    now = int(time.time())
    client = claims.pop("azp", "ci-bot")
    body = {
        "exp": now + 300,
        "iat": now,
        "jti": str(uuid.uuid4()),
        "iss": dev.url,
        "aud": [resource, "account"],
        "sub": "0c5f8a4e-service-account-ci-bot",
        "typ": "Bearer",
        "azp": client,
        "acr": "1",
        "allowed-origins": ["/*"],
        "realm_access": {"roles": ["offline_access", "uma_authorization"]},
        "scope": scope,
        "clientHost": "10.0.0.7",
        "client_id": client,
        "preferred_username": f"service-account-{client}",
        "email_verified": False,
        **claims,
    }
    return dev.mint_signed(body, header={"typ": "JWT"})


def keycloak_id_token(dev: DevIssuer, resource: str, **claims: Any) -> str:
    """A user's ID token (``typ: ID``, ``nonce``, ``at_hash``) whose ``aud`` names the client and,
    through an Audience mapper added to ID tokens too, the resource; Keycloak introspects it as
    ``active: true`` with its claims."""
    now = int(time.time())
    body = {
        "exp": now + 300,
        "iat": now,
        "auth_time": now,
        "jti": str(uuid.uuid4()),
        "iss": dev.url,
        "aud": ["claude-code", resource],
        "sub": "f2b1c0de-user-erin",
        "typ": "ID",
        "azp": "claude-code",
        "nonce": "n-0S6_WzA2Mj",
        "sid": str(uuid.uuid4()),
        "at_hash": "77QmUPtjPfzWtF2AnpK9RQ",
        "acr": "1",
        "email_verified": True,
        "preferred_username": "erin",
        **claims,
    }
    return dev.mint_signed(body, header={"typ": "JWT"})
