"""Per-user upstream authorization put together (``user_oauth`` backends): the token store of
``state:`` (memory or Redis) sealed under ``user_oauth.seal_keys``, one credential per such
backend, the connect pages on the login surface, and the consent links the front door hands out.
Built only when a backend's ``credential.type`` is ``user_oauth`` (the loader then guarantees
``user_oauth:`` and ``login:``)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from aiohttp import web

from gateway.backend.credentials.upstream_grants import UpstreamClient
from gateway.backend.credentials.upstream_server import ServerDiscovery
from gateway.backend.credentials.user_credential import UserCredential
from gateway.config import Config
from gateway.config.user_oauth import user_oauth_backends
from gateway.connections.connect_api import ConnectApi
from gateway.connections.connect_pages import CALLBACK_PATH, DOCUMENT_PATH, ConnectPages
from gateway.connections.consent_links import ConsentStarter
from gateway.connections.upstream_flows import Flows
from gateway.login.login_surface import LoginSurface
from gateway.observability.audit import AuditSink
from gateway.observability.logging import get_logger
from gateway.observability.metrics import Metrics
from gateway.observability.upstream_events import UpstreamAudit
from gateway.outbound.client import Outbound
from gateway.seams import Authenticator
from gateway.state.browser_records import owner_digest
from gateway.state.shared import SharedState
from gateway.state.store import StoreUnavailable
from gateway.state.upstream_tokens import MemoryUpstreamTokens, RecordSeal, UpstreamTokenStore
from gateway.state.upstream_tokens_redis import RedisUpstreamTokens

__all__ = ["UserConnections", "build_user_connections"]

GAUGE_EVERY_S: Final = 60.0
"""How often ``upstream_connections{backend}`` is counted from the store."""
_log = get_logger("gateway.upstream")


@dataclass(slots=True)
class UserConnections:
    """What the composition root hands out: the credentials (to the backends), the consent links
    (to the front door), and the operators' view of the records (``UpstreamTokenAdmin``)."""

    users: Mapping[str, UserCredential]
    """The credential of each ``user_oauth`` backend, by name."""
    store: UpstreamTokenStore
    links: ConsentStarter
    audit: UpstreamAudit
    metrics: Metrics | None = None

    async def records(
        self, backend: str | None, issuer: str | None, subject: str | None
    ) -> list[dict[str, Any]]:
        now, found = time.time(), []
        for name in self._backends(backend):
            for owner in await self._owners(name, issuer, subject):
                stored = await self.store.get(owner, name)
                if stored is None:
                    continue
                record = stored.record
                found.append(
                    {
                        "backend": name,
                        "issuer": record.issuer,
                        "subject": record.subject,
                        "state": record.state(now),
                        "server": record.server,
                        "scope": record.scope,
                        "connected_at": record.connected_at,
                        "refreshed_at": record.refreshed_at,
                        "expires_at": int(record.expires_at),
                    }
                )
        return found

    async def purge(self, backend: str | None, issuer: str | None, subject: str | None) -> int:
        total = 0
        for name in self._backends(backend):
            purged = 0
            for owner in await self._owners(name, issuer, subject):
                purged += await self.store.delete(owner, name)
            total += purged
            self.audit.emit(
                "upstream_tokens_purged",
                name,
                issuer=issuer,
                subject=subject,
                count=purged,
                reason="admin",
            )
        return total

    def _backends(self, backend: str | None) -> list[str]:
        if backend is None:
            return list(self.users)
        return [backend] if backend in self.users else []

    async def _owners(self, backend: str, issuer: str | None, subject: str | None) -> list[bytes]:
        if issuer is not None and subject is not None:
            return [owner_digest(issuer, subject)]
        return await self.store.owners(backend)

    async def run(self) -> None:
        """Hear other replicas' changes; count the records for the gauge."""
        listening = asyncio.create_task(self.store.run())
        try:
            while True:
                await self._count()
                await asyncio.sleep(GAUGE_EVERY_S)
        finally:
            listening.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await listening

    async def _count(self) -> None:
        if self.metrics is None:
            return
        for name in self.users:
            try:
                owners = await self.store.owners(name)
            except StoreUnavailable:
                continue
            self.metrics.upstream_connections.labels(backend=name).set(len(owners))


def build_user_connections(
    config: Config,
    outbound: Outbound,
    state: SharedState,
    login: LoginSurface | None,
    *,
    authenticator: Authenticator,
    audit: AuditSink | None,
    metrics: Metrics | None,
    client_ip: Callable[[web.Request], str],
) -> UserConnections | None:
    """None without a ``user_oauth`` backend. ``client_ip``: the caller's address as the MCP
    endpoint reads it (what the connect API's failed authentications count by)."""
    backends = user_oauth_backends(config.backends)
    settings = config.user_oauth
    if not backends or settings is None or login is None:
        return None
    seal = RecordSeal(settings.seal_keys, settings.seal_key_id, resource=config.resource)
    idle_s = settings.max_idle_days * 86_400.0
    store: UpstreamTokenStore = (
        RedisUpstreamTokens(state.store, seal, max_idle_s=idle_s)
        if state.store is not None
        else MemoryUpstreamTokens(seal, max_idle_s=idle_s)
    )
    events = UpstreamAudit(audit, metrics, config.logging)
    base = login.origin + login.prefix
    name = config.server.title or config.server.name
    users = {
        backend.name: UserCredential(
            backend,
            UpstreamClient(
                backend,
                outbound,
                redirect_uri=base + CALLBACK_PATH,
                client_document=base + DOCUMENT_PATH,
                client_name=name,
            ),
            ServerDiscovery(backend, outbound),
            store,
            audit=events,
        )
        for backend in backends
    }
    flows = Flows(
        state.browser,
        settings.seal_keys,
        settings.seal_key_id,
        resource=config.resource,
        ttl_s=settings.consent_ttl_s,
    )
    ConnectPages(
        login, users, flows, events, ttl_s=settings.consent_ttl_s, client_name=name
    ).install()
    links = ConsentStarter(login, events, users, ttl_s=settings.consent_ttl_s)
    ConnectApi(
        login,
        users,
        links,
        authenticator,
        ttl_s=settings.consent_ttl_s,
        client_ip=client_ip,
    ).install()
    _log.info("upstream.configured", backends=sorted(users), shared=state.store is not None)
    return UserConnections(users, store, links, events, metrics)
