"""The demo stack: development issuer, demo backend and the production gateway, started together.

DEVELOPMENT ONLY. :func:`start_demo` writes a ``gateway.yaml`` (in a temporary directory) that
points at the development issuer (:mod:`gateway.dev.dev_issuer`) and the demo backend
(:mod:`gateway.dev.demo_backend`, a bearer service token, and a signed caller assertion it
verifies against the gateway's JWK Set) and, as a second backend under ``vault__``, the vault
(:mod:`gateway.dev.demo_vault`, an RFC 8693 ``token_exchange`` credential: it gets a token the
issuer minted for it for each caller), and, as a third under ``accounts__``, the accounts
service (:mod:`gateway.dev.demo_accounts`, a ``user_oauth`` credential: each person's own token
at the service's own authorization server, a second development issuer with people of its own),
with ``gateway/dev/demo-policy.yaml``, and starts the
production :class:`~gateway.app.GatewayServer` on it. ``tokens`` picks how the gateway checks
tokens: ``introspection`` (RFC 7662 with ``client_secret_basic``, the default),
``jwt`` (RFC 9068 JWT access tokens validated locally against the issuer's JWK Set; the issuer
has no introspection endpoint, as Microsoft Entra ID has none) or ``jwt+introspection``.

Programmatic use (the end-to-end tests)::

    stack = await start_demo(port=0, tokens="jwt")
    ... stack.mcp_url, stack.tokens["reader"], stack.issuer ...
    await stack.stop()
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from gateway.app import GatewayServer
from gateway.config import DEFAULT_LOGIN_PREFIX, TokenMode, load_config
from gateway.demo.issuer_clients import (
    ACCOUNTS_CLIENT_ID,
    EXCHANGE_CLIENT_ID,
    GATEWAY_CLIENT_ID,
    LOGIN_CLIENT_ID,
    register_clients,
)
from gateway.demo.ports import free_port
from gateway.dev.demo_accounts import AccountsBackend
from gateway.dev.demo_backend import DemoBackend
from gateway.dev.demo_identity import CallerCheck
from gateway.dev.demo_setup import ACCOUNTS_USERS, DEMO_ROLES, DEMO_USERS, render_gateway_yaml
from gateway.dev.demo_vault import IssuerTokenCheck, VaultBackend
from gateway.dev.dev_issuer import DevIssuer
from gateway.dev.dpop_proofs import new_client_key
from gateway.dev.loopback import check_bind_host
from gateway.errors import ConfigError
from gateway.wiring.production import build_services

__all__ = [
    "DEMO_POLICY",
    "DemoStack",
    "default_policy",
    "default_state_file",
    "start_demo",
    "wait_ready",
    "write_state",
]

DEMO_TOKEN_TTL_S: Final = 12 * 3600
"""The ready-made tokens last a working day; ``demo token`` mints shorter ones by default."""
READY_TIMEOUT_S: Final = 30.0


def default_state_file() -> Path:
    """``$XDG_RUNTIME_DIR/mcp-gateway-demo.json``, else ``~/.cache/mcp-gateway/demo.json``."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        return Path(runtime) / "mcp-gateway-demo.json"
    return Path.home() / ".cache" / "mcp-gateway" / "demo.json"


DEMO_POLICY: Final = Path(__file__).resolve().parent.parent / "dev" / "demo-policy.yaml"
"""The demo's policy (``demo: true``), packaged with the code so an installed ``mcp-gateway demo``
finds it; it lives next to the dev code, not in ``policies/``, so no deployment mounts it."""


def default_policy() -> Path:
    """``gateway/dev/demo-policy.yaml``, installed as package data."""
    return DEMO_POLICY


@dataclass
class DemoStack:
    """A running demo: issuer, backend and gateway, plus the ready-made tokens."""

    issuer: DevIssuer
    backend: DemoBackend
    gateway: GatewayServer
    workdir: Path
    vault: VaultBackend | None = None
    """The second backend (token exchange), exposed as ``vault__<tool>``."""
    tokens: dict[str, str] = field(default_factory=dict)
    auth_mode: TokenMode = "introspection"
    """How the gateway checks tokens (its ``issuer.tokens``)."""
    dpop_key: dict[str, Any] | None = None
    """``dpop=True``: the demo client's DPoP key (private JWK: development only, mode 0600)."""
    dpop_token: str | None = None
    """``dpop=True``: a reader token bound to :attr:`dpop_key` (``cnf.jkt``)."""
    accounts: AccountsBackend | None = None
    """The third backend (``user_oauth``): each person's own account, exposed as
    ``accounts__<tool>``."""
    accounts_issuer: DevIssuer | None = None
    """The accounts service's own authorization server, with people of its own."""

    @property
    def mcp_url(self) -> str:
        return self.gateway.config.resource

    @property
    def issuer_url(self) -> str:
        return self.issuer.url

    @property
    def ops_url(self) -> str:
        return self.gateway.ops_url

    @property
    def account_url(self) -> str:
        """The login surface's account page."""
        login = self.gateway.services.login
        return login.account_url if login is not None else ""

    def state(self) -> dict[str, Any]:
        """The state-file document: URLs, tokens, and how to mint more."""
        return {
            "mcp_url": self.mcp_url,
            "issuer_url": self.issuer_url,
            "ops_url": self.ops_url,
            "account_url": self.account_url,
            "tokens": dict(self.tokens),
            "mint_url": f"{self.issuer_url}/dev/tokens",
            "admin_secret": self.issuer.admin_secret,
            "auth_mode": self.auth_mode,
            "pid": os.getpid(),
            **(
                {"dpop": {"key": self.dpop_key, "token": self.dpop_token}}
                if self.dpop_key is not None
                else {}
            ),
        }

    async def stop(self) -> None:
        """Gateway first (drains in-flight calls), then backends and issuer; remove the workdir."""
        try:
            await self.gateway.stop()
        finally:
            await self.backend.stop()
            if self.vault is not None:
                await self.vault.stop()
            if self.accounts is not None:
                await self.accounts.stop()
            if self.accounts_issuer is not None:
                await self.accounts_issuer.stop()
            await self.issuer.stop()
            shutil.rmtree(self.workdir, ignore_errors=True)


def _url_host(host: str) -> str:
    if host in {"0.0.0.0", "::"}:  # noqa: S104 - mapping an unspecified bind to a usable URL
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host


async def start_demo(
    *,
    host: str = "127.0.0.1",
    port: int = 8080,
    issuer_port: int = 0,
    backend_port: int = 0,
    ops_port: int = 0,
    vault_port: int = 0,
    force_non_loopback: bool = False,
    policy: Path | None = None,
    cache_max_ttl_s: int = 5,
    consent: str = "auto",
    tokens: TokenMode = "introspection",
    dpop: bool = False,
) -> DemoStack:
    """Start issuer, backend and gateway; mint the reader/writer/admin tokens.

    ``dpop``: the gateway's issuer has ``dpop: allowed`` (RFC 9449), and the stack holds a
    demo client key and a reader token bound to it (:attr:`DemoStack.dpop_token`).

    ``tokens`` is the gateway's ``issuer.tokens``: with ``jwt`` the issuer signs JWT access
    tokens and has no introspection endpoint (and the gateway no client credentials); with
    ``jwt+introspection`` it signs JWTs and introspects them too.

    Raises ``ValueError`` for a non-loopback host without ``force_non_loopback``,
    :class:`~gateway.errors.ConfigError` if the generated configuration or policy is invalid,
    and ``OSError`` if a port cannot be bound.
    """
    check_bind_host(host, force_non_loopback)
    policy_path = (policy or default_policy()).resolve()
    if not policy_path.exists():
        raise ConfigError([f"{policy_path}: demo policy not found (pass --policy PATH)"])
    gateway_port = port or free_port(host)
    resource = f"http://{_url_host(host)}:{gateway_port}/mcp"
    # The vault's URL is its RFC 8707 resource at the issuer, so it is known before it binds.
    vault = VaultBackend(host, vault_port or free_port(host), allow_non_loopback=force_non_loopback)
    vault_url = f"http://{_url_host(host)}:{vault.port}{vault.path}"
    issuer = DevIssuer(
        host,
        issuer_port,
        resources=[resource, vault_url],
        allow_non_loopback=force_non_loopback,
        # Clients that ask only for the advertised baseline scope become readers.
        grant_scopes=("mcp:access", "notes:read"),
        default_scopes=("mcp:access",),
        consent="page" if consent == "page" else "auto",
        token_format="opaque" if tokens == "introspection" else "jwt",
        introspection=tokens != "jwt",
        users=DEMO_USERS,  # the sign-in page lets you pick who you are
    )
    # The accounts service (user_oauth) and its own authorization server, with its own people.
    accounts = AccountsBackend(
        host,
        free_port(host),
        allow_non_loopback=force_non_loopback,
        catalog_token=secrets.token_urlsafe(32),
    )
    accounts_url = f"http://{_url_host(host)}:{accounts.port}{accounts.path}"
    accounts_issuer = DevIssuer(
        host,
        0,
        resources=[accounts_url],
        allow_non_loopback=force_non_loopback,
        scopes=("notes:read", "notes:write"),
        token_format="jwt",  # noqa: S106 - a token format, not a secret
        introspection=False,
        users=ACCOUNTS_USERS,
        choose_user=True,
    )
    backend = DemoBackend(
        host,
        backend_port,
        service_token=secrets.token_urlsafe(32),
        allow_non_loopback=force_non_loopback,
    )
    workdir = Path(tempfile.mkdtemp(prefix="mcp-gateway-demo-"))
    started: list[Any] = []
    try:
        await issuer.start()
        started.append(issuer)
        await backend.start()
        started.append(backend)
        await vault.start()
        started.append(vault)
        await accounts_issuer.start()
        started.append(accounts_issuer)
        accounts.issuer_url = accounts_issuer.url
        accounts.token_check = IssuerTokenCheck(
            accounts_issuer.url, audience=accounts_url, introspection=None
        )
        await accounts.start()
        started.append(accounts)
        origin = resource.rsplit("/", 1)[0]
        vault.token_check = register_clients(
            issuer,
            accounts_issuer,
            workdir,
            tokens=tokens,
            vault_url=vault_url,
            callback_base=origin + DEFAULT_LOGIN_PREFIX,
            service_token=backend.service_token,
            catalog_token=accounts.catalog_token,
        )
        config_path = workdir / "gateway.yaml"
        config_path.write_text(
            render_gateway_yaml(
                resource=resource,
                listen_host=host,
                listen_port=gateway_port,
                ops_host=host,
                ops_port=ops_port,
                issuer_url=issuer.url,
                client_id=GATEWAY_CLIENT_ID,
                backend_url=backend.url,
                vault_url=vault_url,
                exchange_client_id=EXCHANGE_CLIENT_ID,
                policy_path=str(policy_path),
                cache_max_ttl_s=cache_max_ttl_s,
                tokens=tokens,
                dpop=dpop,
                login_client_id=LOGIN_CLIENT_ID,
                accounts=(accounts_url, accounts_issuer.url, ACCOUNTS_CLIENT_ID),
            ),
            encoding="utf-8",
        )
        config = load_config(config_path)
        gateway = GatewayServer(config, build_services(config))
        await gateway.start()
        # The backend verifies every call's assertion against the gateway's JWK Set.
        backend.caller_check = CallerCheck(
            gateway.ops_url + "/.well-known/jwks.json", issuer=resource, audience=backend.url
        )
    except BaseException:
        for server in reversed(started):
            await server.stop()
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    stack = DemoStack(
        issuer,
        backend,
        gateway,
        workdir,
        vault=vault,
        auth_mode=tokens,
        accounts=accounts,
        accounts_issuer=accounts_issuer,
    )
    for role, scopes in DEMO_ROLES.items():
        stack.tokens[role] = issuer.mint_token(
            sub=f"demo-{role}", client_id="demo-cli", scopes=scopes, ttl_s=DEMO_TOKEN_TTL_S
        )
    if dpop:
        key = new_client_key()
        stack.dpop_key = dict(key.as_dict(private=True))
        stack.dpop_token = issuer.mint_token(
            sub="demo-reader",
            client_id="demo-cli",
            scopes=DEMO_ROLES["reader"],
            ttl_s=DEMO_TOKEN_TTL_S,
            jkt=key.thumbprint(),
        )
    return stack


async def wait_ready(stack: DemoStack, timeout_s: float = READY_TIMEOUT_S) -> bool:
    """Wait until the gateway's readiness checks pass (startup discovery, first catalog)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if stack.gateway.readiness.evaluate()[0] == "ready":
            return True
        await asyncio.sleep(0.05)
    return False


def write_state(path: Path, state: dict[str, Any]) -> None:
    """Write atomically with mode 0600 (it holds bearer tokens and the admin secret)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(state, handle, indent=2)
        handle.write("\n")
    temporary.replace(path)
