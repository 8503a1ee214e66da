"""The gateway with a token-exchange backend (RFC 8693), from one call, for tests.

``async with exchange_stack(tmp_path, aiohttp_server, monkeypatch, ...) as (stack, upstream)``:
a :class:`~gateway.dev.dev_issuer.DevIssuer` that lets the gateway's exchange client exchange
callers' tokens for the backend's resource, and an :class:`IntrospectingUpstream` that, like a
real resource server, introspects every bearer token it receives at that issuer over HTTP and
serves only tokens that are active and meant for it (``aud``). Nothing here trusts the
gateway: what the upstream records is what the issuer said about the token it got.
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from gateway.config import TOKEN_EXCHANGE_GRANT
from gateway.dev.dev_issuer import DevIssuer
from tests.support.live_stack import LiveStack, ServerFactory, live_stack
from tests.support.upstreams import ModernUpstream

__all__ = [
    "BACKEND_RESOURCE",
    "EXCHANGE_CLIENT",
    "EXCHANGE_SECRET",
    "INTROSPECTOR",
    "IntrospectingUpstream",
    "exchange_credential",
    "exchange_stack",
]

BACKEND_RESOURCE = "https://tools.internal.test/mcp"
EXCHANGE_CLIENT = "gw-exchange"
EXCHANGE_SECRET = "exchange-client-secret-0123456789"
INTROSPECTOR = ("tools-rs", "tools-rs-introspection-secret")
"""The upstream's own introspection client (register it at every issuer it trusts)."""


@dataclass
class Seen:
    """One request the upstream received, with the issuer's word on its bearer token."""

    method: str | None
    token: str
    introspection: dict[str, Any]


@dataclass
class IntrospectingUpstream(ModernUpstream):
    """A :class:`ModernUpstream` that accepts a bearer token only when the issuer says it is
    active and its ``aud`` names :attr:`resource` (set :attr:`issuer_url` before traffic)."""

    issuer_urls: list[str] = field(default_factory=list)
    """Where tokens are introspected, in order, until one issuer says active."""
    resource: str = BACKEND_RESOURCE
    seen: list[Seen] = field(default_factory=list)

    def app(self) -> web.Application:
        app = super().app()
        app.middlewares.append(self._introspect)
        return app

    def calls_seen(self) -> list[Seen]:
        return [s for s in self.seen if s.method == "tools/call"]

    @web.middleware
    async def _introspect(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        body = await request.read()
        try:
            method = (await request.json()).get("method") if body else None
        except ValueError:
            method = None
        value = request.headers.get("Authorization", "")
        token = value[7:] if value.startswith("Bearer ") else ""
        doc: dict[str, Any] = {"active": False}
        basic = base64.b64encode(":".join(INTROSPECTOR).encode()).decode()
        for url in self.issuer_urls if token else ():
            async with (
                aiohttp.ClientSession() as session,
                session.post(
                    url + "/introspect",
                    data={"token": token},
                    headers={"Authorization": f"Basic {basic}"},
                ) as response,
            ):
                doc = await response.json()
            if doc.get("active") is True:
                break
        self.seen.append(Seen(method, token, doc))
        audience = doc.get("aud")
        audiences = audience if isinstance(audience, list) else [audience]
        if doc.get("active") is True and self.resource in audiences:
            self.accepted.add(token)
        else:
            self.accepted.discard(token)
        return await handler(request)


def exchange_credential(**extra: Any) -> dict[str, Any]:
    return {
        "type": "token_exchange",
        "client_id": EXCHANGE_CLIENT,
        "client_secret": {"env": "EXCHANGE_SECRET"},
        "resource": BACKEND_RESOURCE,
        **extra,
    }


@contextlib.asynccontextmanager
async def exchange_stack(
    tmp_path: Path,
    aiohttp_server: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
    *,
    dev: DevIssuer | None = None,
    credential: Mapping[str, Any] | None = None,
    gateway: Mapping[str, Any] | None = None,
    allow: tuple[str, ...] = (BACKEND_RESOURCE,),
    upstream: IntrospectingUpstream | None = None,
    client: Mapping[str, Any] | None = None,
) -> AsyncIterator[tuple[LiveStack, IntrospectingUpstream]]:
    """``credential`` keys are merged into the backend's token_exchange credential; ``allow``:
    the targets the issuer lets the exchange client exchange for; ``client``: how the issuer
    registers the exchange client (``auth_method``, ``jwks``; default client_secret_basic)."""
    dev = dev or DevIssuer()
    try:
        running = bool(dev.url)
    except RuntimeError:
        running = False
    if not running:  # a test may start it first to learn its URL; stopped here either way
        await dev.start()
    dev.register_client(
        EXCHANGE_CLIENT,
        EXCHANGE_SECRET,
        grant_types=("client_credentials", TOKEN_EXCHANGE_GRANT),
        **dict(client or {}),
    )
    dev.register_client(*INTROSPECTOR, can_introspect=True)
    dev.exchange_policy.allow(EXCHANGE_CLIENT, *allow)
    monkeypatch.setenv("EXCHANGE_SECRET", EXCHANGE_SECRET)
    upstream = upstream or IntrospectingUpstream()
    upstream.issuer_urls.insert(0, dev.url)
    extra = dict(gateway or {})
    overrides: dict[str, Any] = {
        **extra,
        "backend": {
            **dict(extra.get("backend") or {}),
            # token: None drops the base stack's bearer token (live_stack deep-merges).
            "credential": {"token": None, **exchange_credential(**dict(credential or {}))},
        },
    }
    try:
        async with live_stack(
            tmp_path, aiohttp_server, monkeypatch, upstream=upstream, issuer=dev, gateway=overrides
        ) as stack:
            yield stack, upstream
    finally:
        await dev.stop()
