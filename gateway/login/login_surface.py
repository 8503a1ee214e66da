"""The browser login surface: its pages, and the extension points later features build on.

Every page is under ``login.path_prefix`` (default ``/gateway``) on the origin of ``resource``:

================================  ======  =====================================================
``<prefix>/login``                GET     start a sign-in (``?next=<a page of the surface>``)
``<prefix>/callback``             GET     the issuer's (or the verifier's) answer
``<prefix>/logout``               POST    sign out (CSRF-checked form)
``<prefix>/account``              GET     who is signed in, and the features' sections
``<prefix>/<kind>/<nonce>``       GET     a pending action's page (:meth:`LoginSurface.add_action`)
                                  POST    its forms (CSRF-checked before the page runs)
``<prefix>`` and ``<prefix>/``    GET     to the account page
anything else under the prefix    any     ``login_not_found``
================================  ======  =====================================================

``HEAD`` is answered as ``GET`` (no body) on every page but the callback, whose ``GET`` uses up a
sign-in's state.

A page that needs a signed-in person and has none sends the browser to sign in and back
(``login?next=``); a form without a session is refused. Sessions are the sealed cookie of
:mod:`.cookies`; signing out marks the session ended in the shared store (checked on every page,
so it is ended at every replica). Every answer carries the security headers of :mod:`.pages`,
every refusal is a status-table row rendered as a page and audited (:mod:`.login_events`), but
the per-address budget's, which every request passes first (:mod:`.address_budget`).

**Extension points** (issue 45's connections, issue 46's approvals):

* :meth:`LoginSurface.add_section`: a section of the account page, rendered for the signed-in
  person (``async (request, session) -> Html``);
* :meth:`LoginSurface.add_action`: the page of one kind of pending action
  (``async (request, visit) -> response``); the :class:`Visit` gives the session, the nonce, a
  posted form (already CSRF-checked), the CSRF field for the page's own forms, and
  ``peek()``/``redeem()``, which hand the record out only to the person who started it;
* :attr:`LoginSurface.actions` (the :class:`~gateway.seams.PendingActions` seam): what the MCP
  side calls to start one and get its link.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time
from collections.abc import Callable, Mapping
from typing import Final

from aiohttp import web

from gateway.errors import (
    InternalError,
    LoginBadRequest,
    LoginIdentityMismatch,
    LoginMethodNotAllowed,
    LoginNotFound,
    LoginPageError,
    LoginRateLimited,
    LoginStateInvalid,
    LoginUnavailable,
)
from gateway.login.actions import KIND, ActionRecords
from gateway.login.address_budget import SurfaceAdmission
from gateway.login.cookies import (
    SESSION_COOKIE,
    SIGNIN_COOKIE,
    Cookies,
    Session,
)
from gateway.login.forms import CSRF_FIELD, check_csrf, query, read_form
from gateway.login.login_events import LoginAudit
from gateway.login.page_kinds import (
    AccountSection,
    ActionPage,
    Handler,
    Prover,
    SurfacePage,
    Visit,
)
from gateway.login.pages import NOTHING, Html, error_page, hidden_field, html, page, redirect
from gateway.observability.logging import get_logger
from gateway.state.browser_records import BrowserState
from gateway.state.store import StoreUnavailable

__all__ = ["AccountSection", "ActionPage", "LoginSurface", "Prover", "SurfacePage", "Visit"]

RETRY_AFTER_S: Final = 2
_NEXT: Final = re.compile(r"(/[A-Za-z0-9._~-]+)+")
_SESSION: Final = web.RequestKey("login_session", Session)
_log = get_logger("gateway.login")


class LoginSurface:
    """The pages (module docstring). Built by ``gateway/wiring.py`` from ``login:``."""

    def __init__(
        self,
        *,
        prefix: str,
        origin: str,
        prover: Prover,
        cookies: Cookies,
        store: BrowserState,
        actions: ActionRecords,
        audit: LoginAudit,
        session_ttl_s: int,
        signin_ttl_s: int,
        request_id: Callable[[web.Request], str],
        admission: SurfaceAdmission | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``admission``: the per-address budget every request passes first (None: none)."""
        self.prefix = prefix
        self._admission = admission
        self.origin = origin
        self.prover = prover
        self.cookies = cookies
        self.actions = actions
        self._store = store
        self._audit = audit
        self._session_ttl_s = session_ttl_s
        self._signin_ttl_s = signin_ttl_s
        self._request_id = request_id
        self._clock = clock
        self._sections: list[tuple[str, AccountSection]] = []
        self._pages: dict[str, ActionPage] = {}
        self._fixed: dict[str, dict[str, Handler]] = {}

    # --- extension points ------------------------------------------------------------------

    def add_section(self, title: str, render: AccountSection) -> None:
        """Add a section to the account page (in the order they are added)."""
        self._sections.append((title, render))

    def add_action(self, kind: str, render: ActionPage) -> None:
        """Serve ``<prefix>/<kind>/<nonce>`` with ``render`` (one page per kind)."""
        if not KIND.fullmatch(kind) or kind in _RESERVED or kind in self._pages:
            raise ValueError(f"kind {kind!r} is not a free path segment of the surface")
        self._pages[kind] = render

    def add_page(
        self,
        path: str,
        render: SurfacePage,
        *,
        methods: tuple[str, ...] = ("GET",),
        public: bool = False,
    ) -> None:
        """Serve ``<prefix><path>`` (a fixed path, matched before the pending actions') with
        ``render``, for ``methods``. ``public``: no session is read at all (a document other
        servers fetch)."""
        if not _NEXT.fullmatch(path) or path in _FIXED or path in self._fixed:
            raise ValueError(f"path {path!r} is not a free page of the surface")

        async def run(request: web.Request) -> web.StreamResponse:
            if public:
                return await render(request, None, None)
            form = await read_form(request) if request.method == "POST" else None
            session = await self._session(request)
            if form is not None:
                check_csrf(request, form, session, self.origin)
            return await render(request, session, form)

        self._fixed[path] = dict.fromkeys(methods, run)

    def to_signin(self, request: web.Request) -> web.Response:
        """A page for signed-in people only, without one: sign in, then come back here."""
        return self._to_signin(request)

    @property
    def account_url(self) -> str:
        return f"{self.origin}{self.prefix}/account"

    # --- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        await self.prover.start()

    async def close(self) -> None:
        await self.prover.close()

    def install(self, app: web.Application) -> None:
        """Route every page of the prefix (one resource per path; the methods are the page's)."""
        prefix, routes = self.prefix, app.router
        # HEAD is answered as GET (without the body) where a GET changes nothing; the answer to
        # a sign-in is GET only (it uses up its state).
        pages: dict[str, dict[str, Handler]] = {
            "/login": {"GET": self._start_signin, "HEAD": self._start_signin},
            "/callback": {"GET": self._callback},
            "/logout": {"POST": self._logout},
            "/account": {"GET": self._account, "HEAD": self._account},
            "": {"GET": self._to_account, "HEAD": self._to_account},
            "/": {"GET": self._to_account, "HEAD": self._to_account},
        }
        pages.update(self._fixed)
        for path, methods in pages.items():
            routes.add_route("*", prefix + path, self._dispatch(methods))
        actions = {"GET": self._action, "HEAD": self._action, "POST": self._action}
        routes.add_route(
            "*", prefix + "/{kind:[a-z][a-z0-9-]{0,31}}/{nonce}", self._dispatch(actions)
        )
        routes.add_route("*", prefix + "/{tail:.*}", self._dispatch({}))

    # --- the wrapper every page runs in ----------------------------------------------------

    def _dispatch(self, methods: Mapping[str, Handler]) -> Handler:
        allowed = tuple(methods)

        async def handle(request: web.Request) -> web.StreamResponse:
            handler = methods.get(request.method)
            try:
                if self._admission is not None:
                    await self._admission.admit(request)
                if handler is None:
                    if not methods:
                        raise LoginNotFound(detail="no such page")
                    raise LoginMethodNotAllowed(data={"allow": allowed}, detail=request.method)
                return await handler(request)
            except LoginRateLimited as refused:
                return error_page(refused)  # counted by the admission; not audited one by one
            except LoginPageError as refused:
                return self._refusal(request, refused)
            except Exception:
                _log.exception("login.page_failed", path=request.path)
                return error_page(InternalError())

        return handle

    def _refusal(self, request: web.Request, refused: LoginPageError) -> web.Response:
        session = request.get(_SESSION)
        self._audit.refused(
            refused, session.identity if session else None, self._request_id(request)
        )
        extra = NOTHING
        if isinstance(refused, LoginIdentityMismatch) and session is not None:
            extra = self._logout_form(session, "Sign out")
        elif isinstance(refused, LoginStateInvalid):
            extra = html('<p><a href="{}">Sign in again</a></p>', f"{self.prefix}/login")
        response = error_page(refused, extra=extra)
        if isinstance(refused, LoginStateInvalid):
            Cookies.clear(response, SIGNIN_COOKIE)
        return response

    async def _session(self, request: web.Request) -> Session | None:
        """The signed-in person, or None (no cookie, a bad one, expired, or signed out)."""
        session = self.cookies.session(request)
        if session is None:
            return None
        try:
            ended = await self._store.marked(_digest("session", session.sid))
        except StoreUnavailable:
            raise LoginUnavailable(retry_after=RETRY_AFTER_S, detail="store unavailable") from None
        if ended:
            return None
        request[_SESSION] = session
        return session

    def _to_signin(self, request: web.Request) -> web.Response:
        """A page for signed-in people only, without one: sign in, then come back here."""
        response = redirect(f"{self.prefix}/login?next={request.path}")
        if SESSION_COOKIE in request.cookies:
            Cookies.clear(response, SESSION_COOKIE)  # a tampered, expired or ended one
        return response

    # --- signing in and out ----------------------------------------------------------------

    async def _start_signin(self, request: web.Request) -> web.StreamResponse:
        next_path = query(request).get("next", f"{self.prefix}/account")
        if not self._is_page(next_path):
            raise LoginBadRequest(detail="next is not a page of the surface")
        prover = self.prover
        if not prover.ready:
            raise LoginUnavailable(retry_after=RETRY_AFTER_S, detail=prover.failure or "starting")
        signin = self.cookies.new_signin(
            next_path, prover.method, self._signin_ttl_s, pkce=prover.method == "oidc"
        )
        response = redirect(prover.authorization_url(signin))
        self.cookies.set(
            response, SIGNIN_COOKIE, self.cookies.seal_signin(signin), self._signin_ttl_s
        )
        return response

    async def _callback(self, request: web.Request) -> web.StreamResponse:
        """The answer to a sign-in: this browser's, first use, then the prover's checks."""
        params = query(request)
        signin = self.cookies.signin(request)
        if signin is None:
            raise LoginStateInvalid(detail="no sign-in in progress in this browser")
        state = params.get("state")
        if not state:
            raise LoginBadRequest(detail="answer without state")
        if not hmac.compare_digest(state.encode(), signin.state.encode()):
            raise LoginStateInvalid(detail="state of another sign-in")
        try:
            first = await self._store.mark(_digest("state", state), signin.expires_at)
        except StoreUnavailable:
            raise LoginUnavailable(retry_after=RETRY_AFTER_S, detail="store unavailable") from None
        if not first:
            raise LoginStateInvalid(detail="state already used")
        if signin.method != self.prover.method:
            raise LoginStateInvalid(detail="sign-in started by another method")
        identity = await self.prover.identity(params, signin)
        session = self.cookies.new_session(identity, signin.method, self._session_ttl_s)
        response = redirect(signin.next_path)
        self.cookies.set(
            response, SESSION_COOKIE, self.cookies.seal_session(session), self._session_ttl_s
        )
        Cookies.clear(response, SIGNIN_COOKIE)
        self._audit.signed_in(identity, signin.method, self._request_id(request))
        return response

    async def _logout(self, request: web.Request) -> web.StreamResponse:
        form = await read_form(request)
        session = await self._session(request)
        check_csrf(request, form, session, self.origin)
        assert session is not None  # check_csrf refuses a form without one
        try:
            await self._store.mark(_digest("session", session.sid), session.expires_at)
        except StoreUnavailable:
            raise LoginUnavailable(retry_after=RETRY_AFTER_S, detail="store unavailable") from None
        self._audit.signed_out(session.identity, self._request_id(request))
        body = html(
            '<p>You are signed out.</p><p><a href="{}">Sign in</a></p>', f"{self.prefix}/login"
        )
        response = page("Signed out", body)
        Cookies.clear(response, SESSION_COOKIE)
        return response

    # --- pages -----------------------------------------------------------------------------

    async def _to_account(self, request: web.Request) -> web.StreamResponse:
        return redirect(f"{self.prefix}/account")

    async def _account(self, request: web.Request) -> web.StreamResponse:
        session = await self._session(request)
        if session is None:
            return self._to_signin(request)
        sections = [
            html("<section><h2>{}</h2>{}</section>", title, await render(request, session))
            for title, render in self._sections
        ]
        body = html(
            '<p class="who">Signed in as <code>{}</code> at <code>{}</code>.</p>{}{}',
            session.identity.subject,
            session.identity.issuer,
            Html.concat(sections),
            self._logout_form(session, "Sign out"),
        )
        return page("Your account", body)

    async def _action(self, request: web.Request) -> web.StreamResponse:
        kind, nonce = request.match_info["kind"], request.match_info["nonce"]
        render = self._pages.get(kind)
        if render is None:
            raise LoginNotFound(detail="no such kind of pending action")
        form = await read_form(request) if request.method == "POST" else None
        session = await self._session(request)
        if form is not None:
            check_csrf(request, form, session, self.origin)
        if session is None:
            return self._to_signin(request)
        return await render(request, Visit(session, kind, nonce, form, self.actions))

    # --- helpers ---------------------------------------------------------------------------

    def _is_page(self, path: str) -> bool:
        """``next`` may only name a page of the surface (no open redirect, no other host)."""
        return (
            len(path) <= 512
            and _NEXT.fullmatch(path) is not None
            and path.startswith(self.prefix + "/")
            and path
            not in (f"{self.prefix}/login", f"{self.prefix}/callback", f"{self.prefix}/logout")
        )

    def _logout_form(self, session: Session, label: str) -> Html:
        return html(
            '<form method="post" action="{}">{}<button type="submit">{}</button></form>',
            f"{self.prefix}/logout",
            hidden_field(CSRF_FIELD, session.csrf),
            label,
        )


_RESERVED: Final = frozenset({"login", "callback", "logout", "account"})
_FIXED: Final = frozenset({"/login", "/callback", "/logout", "/account"})


def _digest(kind: str, value: str) -> str:
    """A store key: what a state or session id is marked under (the value itself never is)."""
    return hashlib.sha256(f"{kind}:{value}".encode()).hexdigest()
