"""Callers' listen streams across every backend: :class:`gateway.seams.Listening`.

Kept beside :mod:`gateway.backend.federation` (which merges catalogs and routes requests): a
listen for one backend goes to that member only, asks for the backend's own URIs (the
gateway's ``mcp-gw://<backend>/`` form stripped, as a ``resources/read`` is routed) and maps
each URI the backend sends back into the exposed form, refusing one already in the gateway's
form (another backend's URI: dropped); a completed task's result in a ``notifications/tasks``
has its resource links mapped as a ``tasks/get`` result's are.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any

from gateway.backend.catalog.surface_merge import rewrite_links
from gateway.backend.federation import FederatedBackend, gateway_uri, upstream_uri
from gateway.backend.listen.caller_listen import Exposure
from gateway.seams import ListenFilter, ListenOffer, ListenRefused, UpstreamListen

__all__ = ["FederatedListening"]


class FederatedListening:
    """Implements :class:`gateway.seams.Listening` over a :class:`FederatedBackend`."""

    def __init__(self, federation: FederatedBackend) -> None:
        self._federation = federation

    def listen_offers(self) -> tuple[ListenOffer, ...]:
        return tuple(member.listen_offer() for member in self._federation.members)

    def listen(
        self, backend: str, wanted: ListenFilter, *, ack_deadline: float, deadline: float
    ) -> AbstractAsyncContextManager[UpstreamListen]:
        member = self._federation.member(backend)
        if member is None:
            raise ListenRefused("unknown_backend")
        rewriting = self._federation.rewrites_uris
        own: list[str] = []
        for uri in wanted.uris:
            found = upstream_uri(uri) if rewriting else (backend, uri)
            if found is None or found[0] != backend:
                raise ListenRefused("foreign_uri")  # the front door routed it here: a bug
            own.append(found[1])

        def expose_uri(found: str) -> str | None:
            return gateway_uri(backend, found) if rewriting else found

        def expose_result(found: Mapping[str, Any]) -> Mapping[str, Any] | None:
            return rewrite_links(dict(found), backend) if rewriting else found

        expose = Exposure(expose_uri, expose_result)
        return member.listen(
            wanted,
            tuple(own),
            expose=expose,
            ack_deadline=ack_deadline,
            deadline=deadline,
        )
