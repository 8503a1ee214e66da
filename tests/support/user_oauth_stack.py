"""The production gateway with a ``user_oauth`` backend: a service with people of its own behind
it, and the person's browser.

``async with user_oauth_stack(tmp_path, aiohttp_server, monkeypatch) as stack`` starts, besides
the login stack (:mod:`tests.support.login_stack`: the gateway's own development issuer with
``alice``, ``bob`` and ``carol``, the gateway with its login surface on a port fixed in advance):

* the **accounts service** (:class:`~gateway.dev.demo_accounts.AccountsBackend`), an MCP server
  that takes only tokens its own authorization server issued to a person for it;
* **its authorization server**, a second :class:`~gateway.dev.dev_issuer.DevIssuer` whose sign-in
  page offers its own people (:data:`UPSTREAM_USERS`), at which the gateway's client is
  registered (confidential, the gateway's one redirect URI, code and refresh grants);

and configures the gateway's backend ``accounts`` (tools ``accounts__whoami`` and
``accounts__notes_write``) as ``credential.type: user_oauth`` (its server named, its
pre-registered client, ``scope: notes:read``, the service's catalog token).

:func:`connect` is a person's whole consent through the HTTP browser: the link, the gateway's
sign-in, the consent page, the service's sign-in as one of its people, the answer.
"""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from urllib.parse import parse_qs, urlsplit

import aiohttp
import pytest

from gateway.backend.credentials.user_credential import UserCredential
from gateway.dev.demo_accounts import AccountsBackend
from gateway.dev.demo_vault import IssuerTokenCheck
from gateway.dev.dev_issuer import DevIssuer
from gateway.state.browser_records import owner_digest
from gateway.state.upstream_tokens import UpstreamRecord
from tests.support.live_stack import ServerFactory
from tests.support.login_stack import (
    HttpBrowser,
    LoginStack,
    authorize,
    hidden_fields,
    login_stack,
    sign_in,
)
from tests.support.policy import policy_text
from tests.support.ports import free_port

__all__ = [
    "ADMIN_TOKEN",
    "CATALOG_TOKEN",
    "CLIENT_ID",
    "CLIENT_SECRET",
    "CONSENT_KEY",
    "UPSTREAM_USERS",
    "URL_ELICITATION",
    "WHOAMI",
    "UserOAuthStack",
    "connect",
    "connected",
    "consent_link",
    "user_oauth_stack",
]

UPSTREAM_USERS: Final = ("octo-ann", "octo-ben")
CLIENT_ID: Final = "gateway-accounts"
CLIENT_SECRET: Final = "accounts-client-secret-4d1e"
CATALOG_TOKEN: Final = "accounts-catalog-token-90ab"
UPSTREAM_SEAL_KEY: Final = base64.b64encode(bytes(range(64, 96))).decode()
CONSENT_KEY: Final = "mcp-gateway/connect"
URL_ELICITATION: Final = {"elicitation": {"url": {}}}
"""The client capabilities of a 2026-07-28 client that can open a URL elicitation."""
ADMIN_TOKEN: Final = "a" * 40
"""The admin API's token in the tests' stack (tests/integration/login/conftest.py)."""
WHOAMI: Final = "accounts__whoami"
"""The service's tool that answers who the person is there (a call needs their token)."""
POLICY: Final = policy_text(
    tools={"accounts__whoami": "mcp:access", "accounts__notes_write": "mcp:access"},
    resources={"accounts://me": "mcp:access", "mcp-gw://accounts/**": "mcp:access"},
)


@dataclass
class UserOAuthStack:
    login: LoginStack
    accounts: AccountsBackend
    upstream: DevIssuer
    """The accounts service's authorization server."""

    @property
    def stack(self) -> Any:
        return self.login.stack

    def token(self, sub: str = "alice") -> str:
        """An MCP access token of the gateway's issuer for ``sub``."""
        return self.login.stack.token(scopes="mcp:access", sub=sub)

    @property
    def user(self) -> UserCredential:
        """The gateway's credential of the ``accounts`` backend (its records, its refreshes)."""
        member = self.login.stack.server.services.backend.member("accounts")
        assert member is not None and member.user_credential is not None
        return member.user_credential

    def owner(self, sub: str = "alice") -> bytes:
        """The owner digest of the gateway's caller ``sub``."""
        return owner_digest(self.login.issuer.url, sub)

    async def record(self, sub: str = "alice") -> UpstreamRecord | None:
        stored = await self.user.store.get(self.owner(sub), "accounts")
        return None if stored is None else stored.record


@contextlib.asynccontextmanager
async def user_oauth_stack(
    tmp_path: Path,
    aiohttp_server: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
    *,
    credential: Mapping[str, Any] | None = None,
    gateway: Mapping[str, Any] | None = None,
    upstream: DevIssuer | None = None,
    accounts: AccountsBackend | None = None,
    dev: DevIssuer | None = None,
    port: int | None = None,
    access_token_ttl_s: int = 3600,
) -> AsyncIterator[UserOAuthStack]:
    """The stack of the module docstring. ``credential`` keys override the backend's
    credential (None leaves one out), ``gateway`` keys the rest of ``gateway.yaml``. A second
    replica shares the first's ``upstream`` (the service's server), ``accounts`` (the service)
    and ``dev`` (the gateway's issuer), each started and stopped by its owner; ``port``: the
    gateway's."""
    shared_service = accounts is not None
    if accounts is None:
        accounts = AccountsBackend(port=free_port("127.0.0.1"), catalog_token=CATALOG_TOKEN)
    resource = f"http://127.0.0.1:{accounts.port}/mcp"
    server = upstream or DevIssuer(
        users=UPSTREAM_USERS,
        choose_user=True,
        token_format="jwt",
        introspection=False,
        resources=[resource],
        scopes=("notes:read", "notes:write"),
        access_token_ttl_s=access_token_ttl_s,
    )
    owned = upstream is None
    if owned:
        await server.start()
    if not shared_service:
        await accounts.start()
        accounts.issuer_url = server.url
        accounts.token_check = IssuerTokenCheck(
            server.url, audience=accounts.url, introspection=None
        )
    port = port or free_port("127.0.0.1")
    public = str((gateway or {}).get("resource", f"http://127.0.0.1:{port}/mcp"))
    callback = public.rsplit("/", 1)[0] + "/gateway/oauth/callback"
    known = server.store.clients.get(CLIENT_ID)
    if known is None:
        server.register_client(
            CLIENT_ID,
            CLIENT_SECRET,
            grant_types=["authorization_code", "refresh_token"],
            redirect_uris=[callback],
        )
    elif callback not in known.redirect_uris:
        known.redirect_uris = (*known.redirect_uris, callback)
    monkeypatch.setenv("ACCOUNTS_CLIENT_SECRET", CLIENT_SECRET)
    monkeypatch.setenv("ACCOUNTS_CATALOG_TOKEN", CATALOG_TOKEN)
    monkeypatch.setenv("UPSTREAM_SEAL_KEY", UPSTREAM_SEAL_KEY)
    keys: dict[str, Any] = {
        "backend": None,
        "backends": {
            "accounts": {
                "url": accounts.url,
                "allow_insecure_http": True,
                "credential": {
                    key: value
                    for key, value in {
                        "type": "user_oauth",
                        "authorization_server": server.url,
                        "client_id": CLIENT_ID,
                        "client_secret": {"env": "ACCOUNTS_CLIENT_SECRET"},
                        "scope": "notes:read",
                        "catalog_token": {"env": "ACCOUNTS_CATALOG_TOKEN"},
                        **(credential or {}),
                    }.items()
                    if value is not None  # None: the key left out
                },
            }
        },
        "user_oauth": {"seal_keys": [{"id": "u1", "key": {"env": "UPSTREAM_SEAL_KEY"}}]},
        **(gateway or {}),
    }
    try:
        async with login_stack(
            tmp_path, aiohttp_server, monkeypatch, gateway=keys, port=port, policy=POLICY, dev=dev
        ) as login:
            yield UserOAuthStack(login, accounts, server)
    finally:
        if not shared_service:
            await accounts.stop()
        if owned:
            await server.stop()


async def connect(
    browser: HttpBrowser,
    stack: UserOAuthStack,
    link: str,
    *,
    person: str,
    upstream_person: str = UPSTREAM_USERS[0],
    signed_in: bool = False,
) -> str:
    """Open a consent ``link`` as ``person`` (signing in at the gateway's issuer first unless
    ``signed_in``), press Connect, sign in at the service's server as ``upstream_person``; the
    gateway's answer page (its text)."""
    path = urlsplit(link).path
    if not signed_in:
        assert await sign_in(browser, stack.login, person, next_path=path) == path
    status, _, page = await browser.get(link)
    assert status == 200, (status, page[:300])
    status, headers, _ = await browser.post(link, {"csrf": hidden_fields(page)["csrf"]})
    assert status == 303, status
    callback = await authorize(browser, headers["Location"], upstream_person)
    status, _, page = await browser.get(callback)
    assert status == 200, (status, page[:400])
    return page


async def consent_link(stack: UserOAuthStack, sub: str = "alice") -> str:
    """The link to connect that a call of ``sub``, not connected yet, answers with (by URL
    elicitation)."""
    _, _, text = await stack.stack.call(stack.token(sub), WHOAMI, capabilities=URL_ELICITATION)
    assert "result" in json.loads(text), text
    return str(json.loads(text)["result"]["inputRequests"][CONSENT_KEY]["params"]["url"])


async def connected(
    stack: UserOAuthStack, sub: str = "alice", upstream_person: str = UPSTREAM_USERS[0]
) -> None:
    """``sub`` connects, in a browser of their own, as ``upstream_person`` at the service."""
    link = await consent_link(stack, sub)
    async with aiohttp.ClientSession() as session:
        browser = HttpBrowser(session, stack.login.origin)
        await connect(browser, stack, link, person=sub, upstream_person=upstream_person)


def state_of(url: str) -> str:
    """The ``state`` parameter of an authorization request or answer."""
    return parse_qs(urlsplit(url).query)["state"][0]
