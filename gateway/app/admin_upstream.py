"""The ops listener's admin API for the per-user upstream tokens (``user_oauth`` backends; only
with ``admin.token``): ``POST /admin/upstream-tokens/list`` and ``.../purge``, the server side of
``mcp-gateway upstream-tokens`` (docs/operations.md#per-user-upstream-tokens).

Authenticated like ``POST /admin/revoke`` (:func:`~gateway.app.admin.admin_body`). The body is a
JSON object naming what: ``"backend"`` (a ``user_oauth`` backend), and/or a person by
``"issuer"`` and ``"subject"`` (both, the MCP caller's issuer and subject as verified). ``list``
takes either or none (everything); ``purge`` at least one of the two (a backend, a person, or a
person at a backend). Answers (JSON, ``no-store``): ``{"records": [...]}`` with each record's
backend, issuer, subject, state, server, scope and times, never a token; ``{"purged": N}``
(audited: ``upstream_tokens_purged``); 400 for a body that names nothing it can act on.
"""

from __future__ import annotations

from typing import Any, Final

from aiohttp import web

from gateway.app.admin import admin_body, answer
from gateway.config import Config
from gateway.seams import UpstreamTokenAdmin

__all__ = ["LIST_PATH", "PURGE_PATH", "add_upstream_admin_routes"]

LIST_PATH: Final = "/admin/upstream-tokens/list"
PURGE_PATH: Final = "/admin/upstream-tokens/purge"
_KEYS: Final = frozenset({"backend", "issuer", "subject"})


def _selection(doc: Any) -> tuple[str | None, str | None, str | None] | str:
    if not isinstance(doc, dict) or not set(doc) <= _KEYS:
        return 'the body must be a JSON object of "backend", "issuer" and "subject"'
    if not all(isinstance(value, str) and 0 < len(value) <= 1024 for value in doc.values()):
        return '"backend", "issuer" and "subject" are non-empty strings'
    if ("issuer" in doc) != ("subject" in doc):
        return 'a person is named by "issuer" and "subject" together'
    return doc.get("backend"), doc.get("issuer"), doc.get("subject")


def add_upstream_admin_routes(
    app: web.Application, config: Config, tokens: UpstreamTokenAdmin
) -> None:
    """Install both routes when ``admin.token`` is configured (else nothing)."""
    if config.admin.token is None:
        return

    async def listing(request: web.Request) -> web.StreamResponse:
        doc = await admin_body(request, config)
        if isinstance(doc, web.Response):
            return doc
        chosen = _selection(doc)
        if isinstance(chosen, str):
            return answer(400, {"error": "invalid_request", "error_description": chosen})
        return answer(200, {"records": await tokens.records(*chosen)})

    async def purge(request: web.Request) -> web.StreamResponse:
        doc = await admin_body(request, config)
        if isinstance(doc, web.Response):
            return doc
        chosen = _selection(doc)
        if isinstance(chosen, str) or chosen == (None, None, None):
            text = chosen if isinstance(chosen, str) else "name a backend, a person, or both"
            return answer(400, {"error": "invalid_request", "error_description": text})
        return answer(200, {"purged": await tokens.purge(*chosen)})

    app.router.add_post(LIST_PATH, listing)
    app.router.add_post(PURGE_PATH, purge)
