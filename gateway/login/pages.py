"""The login surface's HTML: escaped markup, one layout, the security headers of every answer.

Plain server-rendered pages, no script at all. :class:`Html` is markup already escaped;
:func:`html` builds it from a template whose ``{}`` fields are escaped unless they are
:class:`Html` themselves, so text from a token, a record or a request can only ever be text.

Every answer of the surface (pages, redirects, refusals) carries :data:`SECURITY_HEADERS`:

* ``Cache-Control: no-store`` (a page names a person; a redirect carries a state);
* ``Content-Security-Policy``: nothing loads (``default-src 'none'``), the one stylesheet is
  allowed by its hash (no inline script or style otherwise), forms post only to the surface's
  origin (``form-action 'self'``, extended per page when its form's answer redirects on), no
  ``<base>``, and no framing (``frame-ancestors 'none'``: no clickjacking of a button);
* ``Referrer-Policy: no-referrer`` (a link's path holds a pending action's nonce; it never
  travels to the issuer or anywhere else in a ``Referer``);
* ``X-Content-Type-Options: nosniff`` and ``X-Frame-Options: DENY`` (older browsers).
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable, Mapping
from html import escape
from typing import Final

from aiohttp import web

from gateway.errors import (
    GatewayError,
    LoginMethodNotAllowed,
    LoginPageError,
    LoginRateLimited,
    LoginUnavailable,
)

__all__ = [
    "NOTHING",
    "SECURITY_HEADERS",
    "Html",
    "error_page",
    "hidden_field",
    "html",
    "page",
    "redirect",
    "security_headers",
]


class Html(str):
    """Markup that is safe to write as it is (escaped or built by :func:`html`)."""

    __slots__ = ()

    @classmethod
    def concat(cls, parts: Iterable[object]) -> Html:
        """The parts one after the other (text escaped, markup as it is)."""
        return cls("".join(_markup(part) for part in parts))


def _markup(value: object) -> str:
    return value if isinstance(value, Html) else escape(str(value), quote=True)


def html(template: str, *values: object) -> Html:
    """``template`` (trusted markup) with each ``{}`` filled by an escaped value."""
    return Html(template.format(*(_markup(value) for value in values)))


def hidden_field(name: str, value: str) -> Html:
    return html('<input type="hidden" name="{}" value="{}">', name, value)


STYLE: Final = (
    "body{font-family:system-ui,sans-serif;max-width:42em;margin:2em auto;padding:0 1em;"
    "line-height:1.45;color:#1b1b1b}h1{font-size:1.4em}section{border-top:1px solid #ccc;"
    "margin-top:1.5em;padding-top:.5em}.who{color:#444}button{font-size:1em;padding:.3em .9em}"
    "code{word-break:break-all}"
)
_STYLE_HASH: Final = base64.b64encode(hashlib.sha256(STYLE.encode()).digest()).decode()
CSP: Final = (
    f"default-src 'none'; style-src 'sha256-{_STYLE_HASH}'; form-action 'self'; "
    "base-uri 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS: Final[Mapping[str, str]] = {
    "Cache-Control": "no-store",
    "Content-Security-Policy": CSP,
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
}


def security_headers(form_targets: Iterable[str] = ()) -> dict[str, str]:
    """:data:`SECURITY_HEADERS`, with ``form_targets`` (origins) added to ``form-action`` for a
    page whose form's answer redirects there (browsers check the redirect too)."""
    headers = dict(SECURITY_HEADERS)
    extra = " ".join(form_targets)
    if extra:
        headers["Content-Security-Policy"] = CSP.replace(
            "form-action 'self'", f"form-action 'self' {extra}"
        )
    return headers


def page(
    title: str,
    body: Html,
    *,
    status: int = 200,
    headers: Mapping[str, str] | None = None,
    form_targets: Iterable[str] = (),
) -> web.Response:
    """One complete page in the surface's layout."""
    document = html(
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        "<title>{}</title><style>{}</style></head><body><h1>{}</h1>{}</body></html>",
        title,
        Html(STYLE),
        title,
        body,
    )
    return web.Response(
        status=status,
        text=document,
        content_type="text/html",
        charset="utf-8",
        headers={**security_headers(form_targets), **(headers or {})},
    )


def redirect(location: str) -> web.Response:
    """303 See Other (a GET follows, whatever the request was), with the security headers."""
    return web.Response(status=303, headers={**SECURITY_HEADERS, "Location": location})


NOTHING: Final = Html("")


def error_page(error: GatewayError, *, extra: Html = NOTHING) -> web.Response:
    """A refusal: the row's status and fixed message (never anything of the request), its
    ``Retry-After`` or ``Allow``; ``extra``: a way on (a sign-in or sign-out link)."""
    headers: dict[str, str] = {}
    if isinstance(error, LoginUnavailable | LoginRateLimited):
        headers["Retry-After"] = str(max(1, error.retry_after or 5))
    if isinstance(error, LoginMethodNotAllowed):
        headers["Allow"] = ", ".join((error.data or {}).get("allow", ("GET",)))
    body = html("<p>{}</p>{}", error.message, extra)
    title = error.page_title if isinstance(error, LoginPageError) else "Error"
    return page(title, body, status=error.status, headers=headers)
