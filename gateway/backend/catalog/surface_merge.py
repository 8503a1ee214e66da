"""Prompts, resources and templates of every backend behind one endpoint, and their URIs.

:func:`merge_surface`: prompts merge like tools (exposed, prefixed names; an ambiguous name is
hidden from every backend involved). With one backend, resource URIs and templates are the
upstream's own. With several, every URI and template is rewritten into a gateway-owned form
naming its backend, ``mcp-gw://<backend>/<the upstream's URI>`` (:data:`GATEWAY_SCHEME`), so a
``resources/read`` is routed by the URI alone, on any replica, without state, and the backend
sees its own URI again; an upstream that lists or returns a URI already in that form is refused
(it would be another backend's). The ``resource_link`` and embedded ``resource`` content of tool
results, prompt messages and read results is rewritten the same way (:func:`rewrite_links`),
so a link a tool returns can be read through the gateway.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any, Final

from gateway.backend.catalog.surface_catalog import SurfacePart
from gateway.observability.logging import get_logger
from gateway.seams import GATEWAY_SCHEME, PromptDef, ResourceDef, Surface

__all__ = ["GATEWAY_SCHEME", "gateway_uri", "merge_surface", "rewrite_links", "upstream_uri"]

_log = get_logger("gateway.backend.federation")


def gateway_uri(backend: str, uri: str) -> str | None:
    """The exposed form of a backend's URI (or template); None when the upstream sent one
    that is already in the gateway's form (refused: it would be another backend's)."""
    if uri[: len(GATEWAY_SCHEME) + 1].lower() == GATEWAY_SCHEME + ":":
        return None
    return f"{GATEWAY_SCHEME}://{backend}/{uri}"


def upstream_uri(uri: str) -> tuple[str, str] | None:
    """(backend, the backend's own URI) for an exposed URI, or None when it is not ours.

    The scheme and the host compare case-insensitively (RFC 3986 §6.2.2.1), the rest exactly.
    """
    head = GATEWAY_SCHEME + "://"
    if uri[: len(head)].lower() != head:
        return None
    backend, slash, original = uri[len(head) :].partition("/")
    if not slash or not original:
        return None
    return backend.lower(), original


_LINKED: Final = frozenset({"resource_link", "resource"})


def rewrite_links(result: dict[str, Any], backend: str) -> dict[str, Any] | None:
    """A tool result with the URIs of its ``resource_link`` and embedded ``resource`` content
    in the gateway's form (so the client can read them through the gateway); None when the
    upstream already used that form (garbled: another backend's URI). Untouched otherwise."""
    content = result.get("content")
    if not isinstance(content, list) or not any(
        isinstance(block, dict) and block.get("type") in _LINKED for block in content
    ):
        return result
    blocks = []
    for original in content:
        block = original
        if isinstance(block, dict) and block.get("type") == "resource_link":
            uri = block.get("uri")
            exposed = gateway_uri(backend, uri) if isinstance(uri, str) else None
            if exposed is None:
                return None
            block = {**block, "uri": exposed}
        elif isinstance(block, dict) and block.get("type") == "resource":
            inner = block.get("resource")
            uri = inner.get("uri") if isinstance(inner, dict) else None
            exposed = gateway_uri(backend, uri) if isinstance(uri, str) else None
            if exposed is None or not isinstance(inner, dict):
                return None
            block = {**block, "resource": {**inner, "uri": exposed}}
        blocks.append(block)
    return {**result, "content": blocks}


def merge_surface(
    parts: Sequence[tuple[str, SurfacePart, frozenset[str], bool]], *, rewrite: bool
) -> Surface:
    """Merge (backend, part, offers, subscribe) of every backend (module docstring)."""
    owners: dict[str, list[PromptDef]] = {}
    resources: list[ResourceDef] = []
    templates: list[ResourceDef] = []
    offers: set[str] = set()
    subscribe = False
    digest = hashlib.sha256()
    for backend, part, offered, subscribes in parts:
        offers |= offered
        subscribe = subscribe or subscribes
        for prompt in part.prompts:
            owners.setdefault(prompt.name, []).append(prompt)
        for kind, items in (("r", part.resources), ("t", part.templates)):
            for item in items:
                exposed = gateway_uri(backend, item.uri) if rewrite else item.uri
                if exposed is None:
                    reason = "uri in the gateway's own form"
                    _log.warning(
                        "backend_item_dropped",
                        backend=backend,
                        kind="resource",
                        item=item.uri[:128],
                        reason=reason,
                    )
                    continue
                key = "uriTemplate" if kind == "t" else "uri"
                definition = {**item.definition, key: exposed}
                target = templates if kind == "t" else resources
                target.append(ResourceDef(exposed, definition, item.upstream_uri, backend))
                digest.update(f"{kind}\0{exposed}\n".encode())
    prompts = []
    for name in sorted(owners):
        found = owners[name]
        if len(found) > 1:  # offered by several backends: hidden from all (never misrouted)
            continue
        prompts.append(found[0])
        digest.update(f"p\0{name}\0{found[0].backend}\n".encode())
    return Surface(
        prompts=tuple(prompts),
        resources=tuple(sorted(_unique(resources), key=lambda r: r.uri)),
        templates=tuple(sorted(_unique(templates), key=lambda r: r.uri)),
        offers=frozenset(offers),
        subscribe=subscribe,
        version=digest.hexdigest()[:16],
    )


def _unique(items: list[ResourceDef]) -> list[ResourceDef]:
    """Drop every URI listed by more than one backend (one backend, unrewritten: none)."""
    counts: dict[str, int] = {}
    for item in items:
        counts[item.uri] = counts.get(item.uri, 0) + 1
    return [item for item in items if counts[item.uri] == 1]
