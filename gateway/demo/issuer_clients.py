"""The demo gateway's OAuth clients at the development issuers, and the secret files its
generated ``gateway.yaml`` names (``{file:...}``, mode 0600 in the stack's temporary directory).

DEVELOPMENT ONLY. A fresh secret per client and per demo run.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any, Final

from cryptography.hazmat.primitives.asymmetric import ed25519
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

from gateway.config import TOKEN_EXCHANGE_GRANT, TokenMode
from gateway.dev.demo_vault import IssuerTokenCheck
from gateway.dev.dev_issuer import DevIssuer

__all__ = [
    "ACCOUNTS_CLIENT_ID",
    "EXCHANGE_CLIENT_ID",
    "GATEWAY_CLIENT_ID",
    "LOGIN_CLIENT_ID",
    "VAULT_CLIENT_ID",
    "register_clients",
]

GATEWAY_CLIENT_ID: Final = "mcp-gateway"
"""The gateway's introspection (and client-credentials) client at the issuer."""
EXCHANGE_CLIENT_ID: Final = "mcp-gateway-exchange"
"""The gateway's client for the vault's token exchange (it may exchange for the vault only)."""
LOGIN_CLIENT_ID: Final = "mcp-gateway-login"
"""The login surface's client at the issuer (a person signs in at the gateway's pages)."""
ACCOUNTS_CLIENT_ID: Final = "mcp-gateway-accounts"
"""The gateway's client at the accounts service's own authorization server (user_oauth)."""
VAULT_CLIENT_ID: Final = "demo-vault"
"""The vault's own introspection client at the issuer."""


def register_clients(
    issuer: DevIssuer,
    accounts_issuer: DevIssuer,
    workdir: Path,
    *,
    tokens: TokenMode,
    vault_url: str,
    callback_base: str,
    service_token: str,
    catalog_token: str,
) -> IssuerTokenCheck:
    """Register the gateway's clients and write every secret its configuration reads into
    ``workdir``; the vault's token check (with a client of its own where the issuer
    introspects). ``callback_base``: the login surface's origin and prefix."""
    files = {
        "backend-service-token": service_token,
        "accounts-catalog-token": catalog_token,
        "user-oauth-seal-key": secrets.token_hex(32),
        # The gateway seals input rounds' requestState with it.
        "input-seal-key": secrets.token_hex(32),
        # The gateway signs the backend's caller assertions with it (Ed25519, the default alg).
        "assertion-key.pem": _ed25519_pem(),
    }
    if tokens != "jwt":  # a JWT-only gateway has no client at the issuer
        files["issuer-client-secret"] = _client(
            issuer,
            GATEWAY_CLIENT_ID,
            grant_types=["client_credentials"],
            scopes=["mcp:access"],
            can_introspect=True,
        )
    # RFC 8693: the gateway's exchange client may exchange callers' tokens for the vault.
    files["exchange-client-secret"] = _client(
        issuer, EXCHANGE_CLIENT_ID, grant_types=["client_credentials", TOKEN_EXCHANGE_GRANT]
    )
    issuer.exchange_policy.allow(EXCHANGE_CLIENT_ID, vault_url)
    # The login surface's client: a person signs in at the issuer, back at /gateway/callback.
    files["login-client-secret"] = _client(
        issuer,
        LOGIN_CLIENT_ID,
        grant_types=["authorization_code"],
        redirect_uris=[f"{callback_base}/callback"],
    )
    # user_oauth: the gateway's client at the accounts service's server, one redirect URI.
    files["accounts-client-secret"] = _client(
        accounts_issuer,
        ACCOUNTS_CLIENT_ID,
        grant_types=["authorization_code", "refresh_token"],
        redirect_uris=[f"{callback_base}/oauth/callback"],
    )
    for name, value in files.items():
        path = workdir / name
        path.write_text(value + "\n", encoding="utf-8")
        path.chmod(0o600)
    vault_client: tuple[str, str] | None = None
    if tokens != "jwt":  # without introspection the vault checks the JWT's signature
        vault_client = (VAULT_CLIENT_ID, secrets.token_urlsafe(32))
        issuer.register_client(*vault_client, grant_types=[], can_introspect=True)
    return IssuerTokenCheck(issuer.url, audience=vault_url, introspection=vault_client)


def _client(issuer: DevIssuer, client_id: str, **registration: Any) -> str:
    """Register ``client_id`` with a fresh secret; the secret."""
    secret = secrets.token_urlsafe(32)
    issuer.register_client(client_id, secret, **registration)
    return secret


def _ed25519_pem() -> str:
    key = ed25519.Ed25519PrivateKey.generate()
    return key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()).decode().strip()
