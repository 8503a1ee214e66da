"""RFC 6749 §4.1: the development issuer's authorization endpoint and one-click consent page.

DEVELOPMENT ONLY. :class:`AuthorizationHandlers` serves ``/authorize`` for
:class:`~gateway.dev.dev_issuer.DevIssuer`: auto-approve, or (``consent="page"``) a page where the
resource owner (always ``demo-user``) ticks the scopes to grant and approves or denies. The form
re-posts the original authorization request plus a single-use nonce, so it cannot be replayed or
forged cross-site. Every redirect back names the issuer (RFC 9207 §2).
"""

from __future__ import annotations

import html
import secrets
import time
from typing import Literal

from aiohttp import web
from authlib.common.urls import add_params_to_uri
from authlib.oauth2.rfc6749 import OAuth2Error

from gateway.dev.issuer_adapter import IssuerSettings, ParsedRequest, oauth_error
from gateway.dev.issuer_server import DevAuthorizationServer
from gateway.dev.issuer_store import DevClient, DevUser, IssuerStore

__all__ = ["AuthorizationHandlers", "consent_page", "signin_page"]


class AuthorizationHandlers:
    """``GET``/``POST /authorize`` (mixed into the development issuer)."""

    server: DevAuthorizationServer
    store: IssuerStore
    consent: Literal["auto", "page"]
    user_sub: str
    users: tuple[str, ...]
    choose_user: bool
    grant_scopes: tuple[str, ...]
    _settings: IssuerSettings

    @property
    def url(self) -> str:
        raise NotImplementedError

    async def _authorize(self, request: web.Request) -> web.StreamResponse:
        parsed = await ParsedRequest.read(request)
        try:
            grant = self.server.get_consent_grant(request=parsed, end_user=None)
        except OAuth2Error as error:
            return self._authorization_error(parsed, error)
        except ValueError:
            return oauth_error(400, "invalid_request", "Malformed authorization request.")
        requested = (grant.request.scope or "").split()
        nonce = secrets.token_urlsafe(16)
        signing_in = "openid" in requested or self.choose_user
        if signing_in and (self.consent == "page" or len(self.users) > 1):
            self.store.consents[nonce] = time.time() + 600
            return web.Response(
                text=signin_page(grant.request.client, parsed, self.users, self._settings, nonce),
                content_type="text/html",
                headers={"Cache-Control": "no-store", "X-Frame-Options": "DENY"},
            )
        offered = list(dict.fromkeys([*requested, *self.grant_scopes]))
        if self.consent == "auto":
            user = DevUser(self.user_sub, " ".join(offered))
            return self._with_iss(self.server.create_authorization_response(parsed, user, grant))
        self.store.consents[nonce] = time.time() + 600
        return web.Response(
            text=consent_page(grant.request.client, parsed, offered, self._settings, nonce),
            content_type="text/html",
            headers={"Cache-Control": "no-store", "X-Frame-Options": "DENY"},
        )

    async def _consent_submit(self, request: web.Request) -> web.StreamResponse:
        parsed = await ParsedRequest.read(request)
        nonce = (parsed.form.get("consent_nonce") or [""])[0]
        # A one-time nonce: the form cannot be replayed or forged cross-site.
        if self.store.consents.pop(nonce, 0.0) < time.time():
            return oauth_error(400, "invalid_request", "The consent form expired; start again.")
        params = {
            k: v
            for k, v in parsed.form.items()
            if k not in {"consent_nonce", "approve", "scope_choice", "signin_user"}
        }
        original = ParsedRequest("GET", parsed.url, parsed.headers, parsed.query, params)
        try:
            grant = self.server.get_consent_grant(request=original, end_user=None)
        except OAuth2Error as error:
            return self._authorization_error(original, error)
        approved = parsed.form.get("approve", [""])[0] == "yes"
        if "signin_user" in parsed.form:  # the sign-in page: who, and the scopes as requested
            chosen_user = parsed.form["signin_user"][0]
            if chosen_user not in self.users:
                return oauth_error(400, "invalid_request", "Unknown user.")
            signed_in = DevUser(chosen_user) if approved else None
            return self._with_iss(
                self.server.create_authorization_response(original, signed_in, grant)
            )
        supported = set(self._settings.scopes_supported)
        chosen = [s for s in parsed.form.get("scope_choice", []) if s in supported]
        user = DevUser(self.user_sub, " ".join(chosen)) if approved else None
        return self._with_iss(self.server.create_authorization_response(original, user, grant))

    def _authorization_error(self, parsed: ParsedRequest, error: OAuth2Error) -> web.StreamResponse:
        # RFC 6749 §4.1.2.1: redirect only to a redirect URI validated for this client.
        if error.redirect_uri:
            return self._with_iss(self.server.handle_error_response(parsed, error))
        return web.Response(
            status=400,
            text=f"<h1>Authorization request rejected</h1><p>{html.escape(error.error or '')}: "
            f"{html.escape(error.description or '')}</p>",
            content_type="text/html",
        )

    def _with_iss(self, response: web.StreamResponse) -> web.StreamResponse:
        location = response.headers.get("Location")
        if response.status == 302 and location:
            # RFC 9207 §2: every authorization response (errors too) names the issuer.
            response.headers["Location"] = add_params_to_uri(location, {"iss": self.url})
        return response


def consent_page(
    client: DevClient,
    parsed: ParsedRequest,
    offered: list[str],
    settings: IssuerSettings,
    nonce: str,
) -> str:
    """The consent page: tick the scopes to grant, approve or deny."""
    boxes = "".join(
        f'<label><input type="checkbox" name="scope_choice" value="{html.escape(s)}"'
        f"{' checked' if s in offered else ''}> {html.escape(s)}</label><br>"
        for s in settings.scopes_supported
    )
    name = html.escape(client.client_name or client.client_id)
    intro = "Signed in as <b>demo-user</b>. Scopes to grant:"
    return _form_page(
        f"Authorize {name}?", intro, parsed, settings, nonce, inputs=boxes, yes="Approve", no="Deny"
    )


def signin_page(
    client: DevClient,
    parsed: ParsedRequest,
    users: tuple[str, ...],
    settings: IssuerSettings,
    nonce: str,
) -> str:
    """The OpenID Connect sign-in page: pick a user, sign in or cancel."""
    choices = "".join(
        f'<label><input type="radio" name="signin_user" value="{html.escape(user)}"'
        f"{' checked' if index == 0 else ''}> {html.escape(user)}</label><br>"
        for index, user in enumerate(users)
    )
    name = html.escape(client.client_name or client.client_id)
    intro = "choose who you are."
    return _form_page(
        f"Sign in to {name}",
        intro,
        parsed,
        settings,
        nonce,
        inputs=choices,
        yes="Sign in",
        no="Cancel",
    )


def _form_page(
    title: str,
    intro: str,
    parsed: ParsedRequest,
    settings: IssuerSettings,
    nonce: str,
    *,
    inputs: str,
    yes: str,
    no: str,
) -> str:
    """A page whose form re-posts the authorization request with the single-use ``nonce``;
    ``title``, ``intro`` and ``inputs`` are markup (their values escaped by the caller)."""
    hidden = "".join(
        f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(v)}">'
        for k, values in _query_lists(parsed).items()
        for v in values
    )
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>Development issuer</title></head>"
        "<body style='font-family:sans-serif;max-width:40em;margin:2em auto'>"
        f"<h1>{title}</h1><p>Development issuer (not for production): {intro}</p>"
        f"<form method='post' action='{html.escape(settings.issuer)}/authorize'>{hidden}"
        f"<input type='hidden' name='consent_nonce' value='{html.escape(nonce)}'>{inputs}<p>"
        f"<button name='approve' value='yes' type='submit'>{yes}</button> "
        f"<button name='approve' value='no' type='submit'>{no}</button></p></form></body></html>"
    )


def _query_lists(parsed: ParsedRequest) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for key, value in parsed.query.items():
        out.setdefault(key, []).append(value)
    return out
