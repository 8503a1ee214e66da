"""A JWK Set is read strictly (gateway/jsonkit.py): the refresher against the development
issuer's real ``/jwks`` endpoint on loopback, serving a usable key set spelled as only a lenient
reader takes it. Each fetch fails (the keys already held are kept), none yields keys."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from gateway.auth.jwks import MAX_JWKS_BYTES, JwksCache
from gateway.config import IssuerConfig
from gateway.dev.issuer_keys import DevKeySet, JwksPublisher
from gateway.outbound.client import Destination, Outbound
from tests.support.live_stack import ServerFactory


@pytest.fixture
async def publisher(aiohttp_server: ServerFactory) -> AsyncIterator[tuple[JwksPublisher, str]]:
    keys = JwksPublisher(DevKeySet())
    app = web.Application()
    app.router.add_get("/jwks", keys.handle)
    server: TestServer = await aiohttp_server(app)
    yield keys, str(server.make_url("/jwks"))


@pytest.fixture
async def outbound() -> AsyncIterator[Outbound]:
    out = Outbound()
    out.add(Destination("issuer", connect_timeout_s=2.0))
    yield out
    await out.close()


def _spelled(doc: object, spelling: str) -> tuple[bytes, str]:
    text = json.dumps(doc)
    if spelling == "byte order mark":
        return b"\xef\xbb\xbf" + text.encode(), "application/json"
    if spelling == "UTF-16":
        return text.encode("utf-16"), "application/jwk-set+json"
    if spelling == "duplicate keys member":
        return b'{"keys": [], ' + text[1:].encode(), "application/json"
    if spelling == "NaN":
        return text[:-1].encode() + b', "x": NaN}', "application/json"
    assert spelling == "text/plain"
    return text.encode(), "text/plain"


@pytest.mark.parametrize(
    "spelling", ["byte order mark", "UTF-16", "duplicate keys member", "NaN", "text/plain"]
)
async def test_a_key_set_only_a_lenient_reader_takes_is_a_failed_fetch(
    publisher: tuple[JwksPublisher, str], outbound: Outbound, spelling: str
) -> None:
    keys, url = publisher
    cache = JwksCache(
        IssuerConfig(url="http://127.0.0.1", tokens="jwt", jwks_uri=url, allow_insecure_http=True),
        outbound,
    )
    assert await cache.fetch()  # the set as served: usable
    held = cache.keys
    keys.body, keys.content_type = _spelled(keys.keys.jwks(), spelling)
    assert len(keys.body) < MAX_JWKS_BYTES
    assert not await cache.fetch()
    assert cache.last_error in ("jwks is not JSON", "jwks is not a JSON object")
    assert cache.keys is held  # the keys already held stay in use
    assert keys.calls == 2
