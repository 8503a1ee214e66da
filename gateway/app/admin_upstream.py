"""The ops listener's admin API for the per-user upstream tokens (``user_oauth`` backends; only
with ``admin.token``): ``POST /admin/upstream-tokens/list`` and ``.../purge``, the server side of
``mcp-gateway upstream-tokens`` (docs/operations.md#per-user-upstream-tokens).

Authenticated like ``POST /admin/revoke`` (:func:`~gateway.app.admin.admin_body`). The body is a
JSON object naming what: ``"backend"`` (a ``user_oauth`` backend), and/or a person by
``"issuer"`` and ``"subject"`` (both, the MCP caller's issuer and subject as verified). ``list``
takes either or none (everything); ``purge`` at least one of the two (a backend, a person, or a
person at a backend). Answers (JSON, ``no-store``): ``{"records": [...]}`` with each record's
backend, issuer, subject, state, server, scope and times, never a token; ``{"purged": N}``
(audited: ``upstream_tokens_purged``); 400 for a body that names nothing it can act on; 503
``{"error": "unavailable"}`` when the records cannot be reached now (Redis did not answer; with
``serve --workers N``, a worker did not): retry, both are idempotent.

With ``serve --workers N`` the supervisor serves these routes on the group's ops listener with
``tokens`` asking the workers (:class:`~gateway.workers.group.GroupUpstreamTokens`), each on its
private socket at :data:`WORKER_LIST_PATH` and :data:`WORKER_PURGE_PATH` (no credential: the
supervisor has checked it), which :func:`add_worker_upstream_routes` installs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final

from aiohttp import web

from gateway.app.admin import admin_body, answer
from gateway.config import Config
from gateway.jsonkit.read import loads
from gateway.seams import UpstreamTokenAdmin
from gateway.state.store import StoreUnavailable

__all__ = [
    "LIST_PATH",
    "PURGE_PATH",
    "WORKER_LIST_PATH",
    "WORKER_PURGE_PATH",
    "Selection",
    "add_upstream_admin_routes",
    "add_worker_upstream_routes",
    "selection_doc",
]

LIST_PATH: Final = "/admin/upstream-tokens/list"
PURGE_PATH: Final = "/admin/upstream-tokens/purge"
WORKER_LIST_PATH: Final = "/worker/upstream-tokens/list"
WORKER_PURGE_PATH: Final = "/worker/upstream-tokens/purge"
_KEYS: Final = frozenset({"backend", "issuer", "subject"})

Selection = tuple[str | None, str | None, str | None]
"""(backend, issuer, subject), None for what is not named."""


def selection_doc(chosen: Selection) -> dict[str, str]:
    """The body that names ``chosen`` (what the supervisor sends a worker)."""
    named = zip(("backend", "issuer", "subject"), chosen, strict=True)
    return {key: value for key, value in named if value is not None}


def _selection(doc: Any) -> Selection | str:
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

    def route(purge: bool) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def handle(request: web.Request) -> web.StreamResponse:
            doc = await admin_body(request, config)
            if isinstance(doc, web.Response):
                return doc
            return await _serve(tokens, _selection(doc), purge=purge)

        return handle

    app.router.add_post(LIST_PATH, route(purge=False))
    app.router.add_post(PURGE_PATH, route(purge=True))


async def _serve(
    tokens: UpstreamTokenAdmin, chosen: Selection | str, *, purge: bool
) -> web.Response:
    """The answer to a list or a purge of ``chosen`` (a purge must name something)."""
    if purge and chosen == (None, None, None):
        chosen = "name a backend, a person, or both"
    if isinstance(chosen, str):
        return answer(400, {"error": "invalid_request", "error_description": chosen})
    try:
        if purge:
            return answer(200, {"purged": await tokens.purge(*chosen)})
        return answer(200, {"records": await tokens.records(*chosen)})
    except StoreUnavailable:
        text = "the records cannot be reached now; retry"
        return answer(503, {"error": "unavailable", "error_description": text})


def add_worker_upstream_routes(app: web.Application, tokens: UpstreamTokenAdmin) -> None:
    """A worker's side of the group's admin API, on its private ops socket: the same bodies
    and answers, without the admin credential (only the supervisor reaches the socket)."""

    async def worker(request: web.Request) -> web.StreamResponse:
        try:
            chosen = _selection(loads(await request.read()))
        except ValueError:
            chosen = "the body is not JSON"
        return await _serve(tokens, chosen, purge=request.path == WORKER_PURGE_PATH)

    app.router.add_post(WORKER_LIST_PATH, worker)
    app.router.add_post(WORKER_PURGE_PATH, worker)
