"""Every page of one list an upstream serves (``tools/list``, ``prompts/list``, ...), bounded.

MCP 2026-07-28 server/utilities/pagination.mdx, client side: follow ``nextCursor`` until it is
absent, at most :data:`MAX_LIST_PAGES` pages of at most :data:`LIST_PAGE_MAX_BYTES` each, and
keep one item more than the caller keeps (so its builder can report the overflow). A cursor seen
before, a page without the list, or too many pages is a ``garbled`` fault: the caller keeps what
it had. The first page's ``ttlMs`` (server/utilities/caching.mdx) comes back with the items.
"""

from __future__ import annotations

import time
from typing import Any, Final

from gateway.backend.upstream.era import LinkState, modern_meta
from gateway.backend.upstream.link import UpstreamLink
from gateway.backend.upstream.rpc import UpstreamFault
from gateway.observability.logging import get_logger

__all__ = ["LIST_PAGE_MAX_BYTES", "MAX_LIST_PAGES", "fetch_list", "fetch_surface_lists"]

MAX_LIST_PAGES: Final = 64
"""Pages followed per fetch; more fails the fetch (the last good catalog stays)."""
LIST_PAGE_MAX_BYTES: Final = 8 * 1_048_576
"""Cap on one page (tool schemas can be large; results use limits instead)."""

_log = get_logger("gateway.backend")


async def fetch_list(
    link: UpstreamLink, method: str, key: str, most: int, *, timeout_s: float, backend: str
) -> tuple[list[Any], int | None]:
    """The items of ``result[key]`` over every page of ``method`` (at most ``most`` + 1), and
    the advertised ``ttlMs``; each page has its own ``timeout_s``. Raises :class:`UpstreamFault`."""
    items: list[Any] = []
    ttl_ms: int | None = None
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(MAX_LIST_PAGES):
        deadline = time.monotonic() + timeout_s

        def prepare(
            state: LinkState, cursor: str | None = cursor
        ) -> tuple[dict[str, Any], dict[str, str]]:
            params: dict[str, Any] = {"_meta": modern_meta()} if state.era == "modern" else {}
            if cursor is not None:
                params["cursor"] = cursor
            return params, {}

        reply = await link.request(
            method, prepare, deadline=deadline, max_bytes=LIST_PAGE_MAX_BYTES
        )
        result = reply.message.get("result") if reply.message is not None else None
        if not isinstance(result, dict) or not isinstance(result.get(key), list):
            raise UpstreamFault("garbled")
        if ttl_ms is None and _is_ttl(result.get("ttlMs")):
            ttl_ms = int(result["ttlMs"])
        # Keep one more than the most kept, so the builder can report the overflow.
        items.extend(result[key][: most + 1 - len(items)])
        next_cursor = result.get("nextCursor")
        if next_cursor is None or len(items) > most:
            return items, ttl_ms
        if not isinstance(next_cursor, str) or next_cursor in seen:
            raise UpstreamFault("garbled")  # a cursor loop would never end
        seen.add(next_cursor)
        cursor = next_cursor
    _log.warning(
        "backend_catalog_too_many_pages", backend=backend, pages=MAX_LIST_PAGES, method=method
    )
    raise UpstreamFault("garbled")


async def fetch_surface_lists(
    link: UpstreamLink, offers: frozenset[str], most: int, *, timeout_s: float, backend: str
) -> tuple[list[Any], list[Any], list[Any]]:
    """The prompts, resources and resource templates of an upstream that ``offers`` them.
    Raises :class:`UpstreamFault`, but not for the templates: servers without templates often
    lack the method, which leaves none (the resources are kept)."""
    prompts: list[Any] = []
    resources: list[Any] = []
    templates: list[Any] = []
    if "prompts" in offers:
        prompts, _ = await fetch_list(
            link, "prompts/list", "prompts", most, timeout_s=timeout_s, backend=backend
        )
    if "resources" in offers:
        resources, _ = await fetch_list(
            link, "resources/list", "resources", most, timeout_s=timeout_s, backend=backend
        )
        try:
            templates, _ = await fetch_list(
                link,
                "resources/templates/list",
                "resourceTemplates",
                most,
                timeout_s=timeout_s,
                backend=backend,
            )
        except UpstreamFault as fault:
            _log.info(
                "backend_templates_unavailable",
                backend=backend,
                kind=fault.kind,
                status=fault.status,
            )
    return prompts, resources, templates


def _is_ttl(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
