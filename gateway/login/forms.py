"""Reading what a browser sends the surface, strictly: query parameters, posted forms, and the
two CSRF checks every state-changing form passes.

* **Parameters** are single-valued: a repeated name (``state=a&state=b``) is a request the
  surface will not guess about (``login_bad_request``), as is a form that is not
  ``application/x-www-form-urlencoded``, over :data:`MAX_FORM_BYTES`, or not strict UTF-8.
* **CSRF** (OWASP's synchronizer token pattern plus an origin check): a posted form must carry
  the session's token (``csrf``, compared in constant time), and come from the surface's own
  origin: ``Origin`` equal to the origin of ``resource``; or, because every page says
  ``Referrer-Policy: no-referrer`` and browsers then send ``Origin: null`` with a form post
  (Fetch §"append a request Origin header"), ``Origin: null`` (or none) together with
  ``Sec-Fetch-Site: same-origin``, which only the browser sets (a forbidden header name, so no
  page can). Anything else is ``login_csrf_failed`` and nothing is done.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable
from typing import Final
from urllib.parse import parse_qsl

from aiohttp import web

from gateway.errors import LoginBadRequest, LoginCsrfFailed
from gateway.login.cookies import Session

__all__ = ["CSRF_FIELD", "MAX_FORM_BYTES", "check_csrf", "query", "read_form", "same_origin"]

CSRF_FIELD: Final = "csrf"
MAX_FORM_BYTES: Final = 8192
MAX_FIELDS: Final = 32
FORM_TYPE: Final = "application/x-www-form-urlencoded"


def _single(pairs: Iterable[tuple[str, str]]) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in pairs:
        if name in out:
            raise LoginBadRequest(detail="a parameter given twice")
        out[name] = value
    return out


def query(request: web.Request) -> dict[str, str]:
    """The query's parameters, each at most once."""
    if len(request.query_string) > MAX_FORM_BYTES:
        raise LoginBadRequest(detail="query too long")
    return _single(request.query.items())


async def read_form(request: web.Request) -> dict[str, str]:
    """A posted URL-encoded form, each field at most once, at most :data:`MAX_FORM_BYTES`."""
    if request.content_type != FORM_TYPE:
        raise LoginBadRequest(detail="form is not url-encoded")
    length = request.content_length
    if length is not None and length > MAX_FORM_BYTES:
        raise LoginBadRequest(detail="form too large")
    body = await request.content.read(MAX_FORM_BYTES + 1)
    if len(body) > MAX_FORM_BYTES:
        raise LoginBadRequest(detail="form too large")
    try:
        text = body.decode("utf-8")
        pairs = parse_qsl(
            text,
            keep_blank_values=True,
            strict_parsing=bool(text),
            errors="strict",
            max_num_fields=MAX_FIELDS,
        )
    except (UnicodeDecodeError, ValueError):
        raise LoginBadRequest(detail="form is not strict url-encoded utf-8") from None
    return _single(pairs)


def same_origin(request: web.Request, origin: str) -> bool:
    """The post comes from the surface's own origin (module docstring)."""
    sent = request.headers.getall("Origin", [])
    if len(sent) > 1:
        return False
    if sent and sent[0] != "null":
        return sent[0].lower() == origin.lower()
    return request.headers.get("Sec-Fetch-Site") == "same-origin"


def check_csrf(
    request: web.Request, form: dict[str, str], session: Session | None, origin: str
) -> None:
    """Raise LoginCsrfFailed unless the form is the session's own, from the surface's origin."""
    if session is None:
        raise LoginCsrfFailed(detail="form posted without a session")
    token = form.get(CSRF_FIELD, "")
    if not hmac.compare_digest(token.encode(), session.csrf.encode()):
        raise LoginCsrfFailed(detail="csrf token missing or not the session's")
    if not same_origin(request, origin):
        raise LoginCsrfFailed(detail="form posted from another origin")
