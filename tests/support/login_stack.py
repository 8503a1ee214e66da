"""The production gateway with its browser login surface, a development issuer with several
people, and a plain-HTTP "browser" that keeps the surface's cookies.

``async with login_stack(tmp_path, aiohttp_server, monkeypatch) as stack`` starts a
:class:`~gateway.dev.dev_issuer.DevIssuer` whose sign-in page offers :data:`USERS`, registers
the gateway's sign-in client there (confidential, ``client_secret_basic``, the callback as its
only redirect URI), and starts the gateway on a port fixed in advance so that ``resource`` is its
real origin (``http://127.0.0.1:<port>/mcp``: loopback, where browsers treat ``Secure`` cookies
as on https). The stack registers the test page of the pending-action API, kind
:data:`CHECK`: a GET peeks at the record and shows it with a form, the form's POST redeems it.

:class:`HttpBrowser` is a minimal user agent for the protocol-level tests: it follows nothing
by itself, keeps the cookies the gateway sets (``Secure`` and ``__Host-`` honoured on loopback
as Chromium does) and sends them back to the gateway only.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import html
import re
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

import aiohttp
import pytest
from aiohttp import web

from gateway.dev.dev_issuer import DevIssuer
from gateway.login.login_surface import LoginSurface, Visit
from gateway.login.pages import html as markup
from gateway.login.pages import page
from tests.support.live_stack import LiveStack, ServerFactory, live_stack
from tests.support.ports import free_port
from tests.support.redis_server import RedisServer, unique_prefix

__all__ = [
    "CHECK",
    "LOGIN_CLIENT",
    "LOGIN_SECRET",
    "SEAL_KEY",
    "USERS",
    "HttpBrowser",
    "LoginStack",
    "login_gateway",
    "login_stack",
    "replica_places",
    "sign_in",
]

USERS: Final = ("alice", "bob", "carol")
LOGIN_CLIENT: Final = "gateway-login"
LOGIN_SECRET: Final = "login-client-secret-7f3a"
SEAL_KEY: Final = base64.b64encode(bytes(range(32))).decode()
CHECK: Final = "check"
"""The test page's kind of pending action."""


def login_gateway(port: int, **login: Any) -> dict[str, Any]:
    """The ``gateway.yaml`` keys of a gateway with the login surface on ``port``."""
    return {
        "resource": f"http://127.0.0.1:{port}/mcp",
        "listen": {"host": "127.0.0.1", "port": port},
        "input_requests": {"seal_keys": [{"id": "t1", "key": {"env": "LOGIN_SEAL_KEY"}}]},
        "login": {
            # An external verifier needs no client at the issuer.
            **(
                {}
                if "verifier" in login
                else {"client_id": LOGIN_CLIENT, "client_secret": {"env": "LOGIN_CLIENT_SECRET"}}
            ),
            **login,
        },
    }


async def check_page(request: web.Request, visit: Visit) -> web.StreamResponse:
    """The pending-action API's test page: GET shows the record (peek), POST redeems it."""
    if visit.form is None:
        body = await visit.peek()
        return page(
            "Check",
            markup(
                '<p id="record">{}</p><form method="post">{}<button id="redeem">Redeem</button>'
                "</form>",
                body.decode(),
                visit.csrf_field(),
            ),
        )
    body = await visit.redeem()
    return page("Checked", markup('<p id="redeemed">{}</p>', body.decode()))


@dataclass
class LoginStack:
    stack: LiveStack
    port: int

    @property
    def issuer(self) -> DevIssuer:
        return self.stack.issuer

    @property
    def surface(self) -> LoginSurface:
        surface = self.stack.server.services.login
        assert surface is not None
        return surface

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        return f"{self.origin}{self.surface.prefix}{path}"


@contextlib.asynccontextmanager
async def replica_places(
    tmp_path: Path,
    aiohttp_server: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
    redis: RedisServer,
) -> AsyncIterator[tuple[dict[str, Any], dict[str, Any]]]:
    """Where two replicas of one gateway stand: the keyword arguments of :func:`login_stack`
    (and of :func:`~tests.support.user_oauth_stack.user_oauth_stack`) of each, a directory and a
    port of its own, one public origin (the first's), the state on ``redis``, and one issuer of
    the gateway's (started and stopped here)."""
    monkeypatch.setenv("REPLICAS_REDIS_URL", redis.url)
    first, second = free_port("127.0.0.1"), free_port("127.0.0.1")
    shared = {
        "resource": f"http://127.0.0.1:{first}/mcp",  # one public origin for both replicas
        "state": {
            "backend": "redis",
            # A generous deadline, as tests/support/replicas.py's: on a loaded 2-core host a
            # healthy read can take longer than the default, and a timed-out one is a 503
            # (fail closed), which is not what replica tests are about.
            "redis": {
                "url": {"env": "REPLICAS_REDIS_URL"},
                "key_prefix": unique_prefix(),
                "timeout_ms": 3000,
            },
        },
    }
    issuer = DevIssuer(users=USERS, token_format="jwt")
    await issuer.start()
    try:
        (tmp_path / "a").mkdir()
        (tmp_path / "b").mkdir()
        common = {"aiohttp_server": aiohttp_server, "monkeypatch": monkeypatch, "dev": issuer}
        yield (
            {**common, "tmp_path": tmp_path / "a", "port": first, "gateway": shared},
            {
                **common,
                "tmp_path": tmp_path / "b",
                "port": second,
                "gateway": {**shared, "listen": {"host": "127.0.0.1", "port": second}},
            },
        )
    finally:
        await issuer.stop()


@contextlib.asynccontextmanager
async def login_stack(
    tmp_path: Path,
    aiohttp_server: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
    *,
    gateway: Mapping[str, Any] | None = None,
    dev: DevIssuer | None = None,
    port: int | None = None,
    policy: str | None = None,
    upstream: Any = None,
    **login: Any,
) -> AsyncIterator[LoginStack]:
    """The stack of the module docstring; ``login`` keys override the ``login:`` section and
    ``gateway`` keys the rest (as :func:`~tests.support.live_stack.live_stack`'s; ``upstream``
    and ``policy`` are its). ``dev``: the
    development issuer (started here unless it runs already; then it is the caller's to stop)."""
    port = port or free_port("127.0.0.1")
    dev = dev or DevIssuer(users=USERS, token_format="jwt")
    running = _started(dev)
    if not running:
        await dev.start()
    prefix = login.get("path_prefix", "/gateway")
    resource = (gateway or {}).get("resource", f"http://127.0.0.1:{port}/mcp")
    callback = resource.rsplit("/", 1)[0] + f"{prefix}/callback"
    known = dev.store.clients.get(LOGIN_CLIENT)
    if known is None:
        dev.register_client(
            LOGIN_CLIENT,
            LOGIN_SECRET,
            grant_types=["authorization_code"],
            redirect_uris=[callback],
        )
    elif callback not in known.redirect_uris:  # another replica's stack, or another prefix
        known.redirect_uris = (*known.redirect_uris, callback)
    monkeypatch.setenv("LOGIN_CLIENT_SECRET", LOGIN_SECRET)
    monkeypatch.setenv("LOGIN_SEAL_KEY", SEAL_KEY)
    keys = {**login_gateway(port, **login), **(gateway or {})}
    try:
        more: dict[str, Any] = {"policy": policy} if policy is not None else {}
        if upstream is not None:
            more["upstream"] = upstream
        async with live_stack(
            tmp_path, aiohttp_server, monkeypatch, issuer=dev, gateway=keys, **more
        ) as s:
            result = LoginStack(s, port)
            result.surface.add_action(CHECK, check_page)
            await _until_ready(result.surface)
            yield result
    finally:
        if not running:
            await dev.stop()


def _started(issuer: DevIssuer) -> bool:
    try:
        return bool(issuer.url)
    except RuntimeError:
        return False


async def _until_ready(surface: LoginSurface) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    while not surface.prover.ready:
        if loop.time() > deadline:
            pytest.fail(f"the login surface never became ready: {surface.prover.failure}")
        await asyncio.sleep(0.02)


_HIDDEN: Final = re.compile(r'<input type=.hidden. name=.([^"\']*). value=.([^"\']*).>')


@dataclass
class HttpBrowser:
    """A user agent for one gateway origin (module docstring)."""

    session: aiohttp.ClientSession
    origin: str
    cookies: dict[str, str] = field(default_factory=dict)
    aliases: tuple[str, ...] = ()
    """Other origins that get the same cookies (the replicas of one gateway, on other ports)."""
    set_cookie_headers: list[str] = field(default_factory=list)
    """Every ``Set-Cookie`` the gateway sent (attribute checks)."""

    def _ours(self, url: str) -> bool:
        return any(url.startswith(origin + "/") for origin in (self.origin, *self.aliases))

    def _cookie_header(self, url: str) -> dict[str, str]:
        if not self._ours(url) or not self.cookies:
            return {}
        return {"Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items())}

    def _keep(self, url: str, response: aiohttp.ClientResponse) -> None:
        if not self._ours(url):
            return
        for header in response.headers.getall("Set-Cookie", []):
            self.set_cookie_headers.append(header)
            parsed: SimpleCookie = SimpleCookie()
            parsed.load(header)
            for name, morsel in parsed.items():
                if morsel["max-age"] == "0" or morsel.value == "":
                    self.cookies.pop(name, None)
                else:
                    self.cookies[name] = morsel.value

    async def request(
        self, method: str, url: str, *, headers: Mapping[str, str] | None = None, **kwargs: Any
    ) -> tuple[int, Mapping[str, str], str]:
        sent = {**self._cookie_header(url), **(headers or {})}
        async with self.session.request(
            method, url, headers=sent, allow_redirects=False, **kwargs
        ) as response:
            self._keep(url, response)
            return response.status, response.headers, await response.text()

    async def get(self, url: str, **kwargs: Any) -> tuple[int, Mapping[str, str], str]:
        return await self.request("GET", url, **kwargs)

    async def post(
        self, url: str, form: Mapping[str, str], *, origin: str | None = "same", **kwargs: Any
    ) -> tuple[int, Mapping[str, str], str]:
        """A form post; ``origin``: ``same`` sends the browser's ``Origin: null`` and
        ``Sec-Fetch-Site: same-origin`` (a page under ``no-referrer``), else that Origin."""
        headers = (
            {"Origin": "null", "Sec-Fetch-Site": "same-origin"}
            if origin == "same"
            else ({"Origin": origin} if origin is not None else {})
        )
        return await self.request("POST", url, data=dict(form), headers=headers, **kwargs)


def hidden_fields(page: str) -> dict[str, str]:
    return {html.unescape(k): html.unescape(v) for k, v in _HIDDEN.findall(page)}


async def sign_in(
    browser: HttpBrowser, stack: LoginStack, user: str, *, next_path: str = ""
) -> str:
    """Sign in as ``user`` at the development issuer; the page the gateway sends the browser
    to afterwards (its path)."""
    start = stack.url("/login") + (f"?next={next_path}" if next_path else "")
    status, headers, _ = await browser.get(start)
    assert status == 303, status
    answer = await authorize(browser, headers["Location"], user)
    status, headers, body = await browser.get(answer)
    assert status == 303, (status, body[:300])
    return urlsplit(headers["Location"]).path


async def authorize(browser: HttpBrowser, authorize_url: str, user: str) -> str:
    """At the development issuer's sign-in page, pick ``user`` and sign in; the callback URL
    the issuer answers with."""
    status, _, page = await browser.get(authorize_url)
    assert status == 200, (status, page[:300], _)
    form = {**hidden_fields(page), "signin_user": user, "approve": "yes"}
    status, headers, _ = await browser.post(authorize_url.partition("?")[0], form, origin=None)
    assert status == 302, status
    return headers["Location"]


def csrf_of(page: str) -> str:
    return hidden_fields(page)["csrf"]
