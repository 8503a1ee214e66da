"""The browser login surface's pages (``gateway/login``; rendered as HTML, docs/errors.md)."""

from __future__ import annotations

from typing import ClassVar

from gateway.errors._base import GatewayError

__all__ = [
    "ConnectFailed",
    "ConnectIssuerMismatch",
    "ConnectStateInvalid",
    "ConnectUnavailable",
    "LoginBadRequest",
    "LoginCsrfFailed",
    "LoginFailed",
    "LoginIdentityMismatch",
    "LoginIssuerMismatch",
    "LoginMethodNotAllowed",
    "LoginNotFound",
    "LoginPageError",
    "LoginRateLimited",
    "LoginStateInvalid",
    "LoginUnavailable",
]


class LoginPageError(GatewayError):
    """A refusal on a page of the browser login surface. Rendered as an HTML page (fixed text,
    the surface's security headers) by ``gateway/login``, never as JSON-RPC; nothing of the
    request (a code, a state, a cookie) is echoed."""

    page_title: ClassVar[str] = "Sign-in"


class LoginBadRequest(LoginPageError):
    """A page request the surface cannot read: a form over the size bound or not URL-encoded,
    an authorization response without ``code`` or ``state``, a return path off the surface."""

    row, status, message = "login_bad_request", 400, "The request could not be read."


class LoginCsrfFailed(LoginPageError):
    """A form posted without the session's synchronizer token, with another one, from another
    origin, or without a signed-in session: nothing is done."""

    row, status = "login_csrf_failed", 403
    message = "The form could not be accepted: reload the page and try again."


class LoginStateInvalid(LoginPageError):
    """An answer to a sign-in this browser did not start, or not now: no sign-in cookie (or a
    tampered or expired one), a ``state`` that is not this browser's, or one already used."""

    row, status = "login_state_invalid", 400
    message = "This sign-in was not started here or has already been used: sign in again."


class LoginIssuerMismatch(LoginPageError):
    """RFC 9207 §2.4: the authorization response's ``iss`` is not the issuer the browser was
    sent to, or is missing while that issuer advertises it (a mix-up attack); the code is not
    redeemed."""

    row, status = "login_issuer_mismatch", 400
    message = "The sign-in answer came from another issuer: sign in again."


class LoginFailed(LoginPageError):
    """The sign-in did not prove who is in the browser: the issuer answered an error (the
    person declined), refused the code (another client's, replayed, expired), or its ID token
    (or the verifier's assertion) failed validation."""

    row, status, message = "login_failed", 403, "Sign-in failed."


class LoginIdentityMismatch(LoginPageError):
    """A pending action (a link an MCP client opened) belongs to another person than the one
    signed in: nothing happens to it, and the attempt is audited."""

    row, status = "login_identity_mismatch", 403
    message = "This link was started by another user. Sign out, then sign in as that user."


class LoginNotFound(LoginPageError):
    """No such page under the surface's prefix, or a pending-action link that is unknown,
    expired or already used (the same answer for each)."""

    row, status, message = "login_not_found", 404, "This page or link does not exist (any more)."


class LoginMethodNotAllowed(LoginPageError):
    """A method the page does not take (``Allow`` names those it does)."""

    row, status, message = "login_method_not_allowed", 405, "Method not allowed."


class LoginUnavailable(LoginPageError):
    """The issuer (its metadata, key set or token endpoint), the external verifier or the shared
    store could not answer: fail closed, retry later."""

    row, status = "login_unavailable", 503
    message = "Sign-in is unavailable right now; try again in a moment."


class LoginRateLimited(LoginPageError):
    """Too many requests to the surface from one client address (``login.pre_auth_rate``),
    refused before anything else is done (no session read, no issuer or store asked); counted,
    neither audited nor logged one by one (a flood must not flood the audit trail)."""

    row, status = "login_rate_limited", 429
    message = "Too many requests from your address; try again in a moment."


class ConnectStateInvalid(LoginPageError):
    """An answer of an upstream authorization server that no connect page of this person
    started, or not now: no ``state``, one unknown, expired or already used (a replayed or
    forged answer), or one another signed-in person started. Nothing is stored."""

    page_title: ClassVar[str] = "Connect"
    row, status = "connect_state_invalid", 400
    message = "This connection was not started here or has already been used: start it again."


class ConnectIssuerMismatch(LoginPageError):
    """RFC 9207 §2.4 at the upstream's authorization server: the answer's ``iss`` is not the
    server the browser was sent to, or is missing while that server advertises it (a mix-up).
    The code is never sent to any token endpoint, an error in the answer is not acted on."""

    page_title: ClassVar[str] = "Connect"
    row, status = "connect_issuer_mismatch", 400
    message = "The answer came from another authorization server: start the connection again."


class ConnectFailed(LoginPageError):
    """The upstream's authorization server did not grant access: the person declined (an
    ``error`` answer), or its token endpoint refused the code (another client's, expired,
    replayed) or answered no usable bearer token. Nothing is stored."""

    page_title: ClassVar[str] = "Connect"
    row, status, message = "connect_failed", 403, "The connection was not granted."


class ConnectUnavailable(LoginUnavailable):
    """The upstream's authorization server could not be found or did not answer in time (its
    metadata, its registration or token endpoint), or the shared store did not: retry later."""

    page_title: ClassVar[str] = "Connect"
    row, status = "connect_unavailable", 503
    message = "The connection cannot be made right now; try again in a moment."
