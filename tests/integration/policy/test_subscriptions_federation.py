"""``subscriptions/listen`` across two backends (two SDK ``MCPServer``s) with URI rewriting.

The client subscribes to the exposed ``mcp-gw://<backend>/<uri>`` form; each backend is asked,
on a listen of its own, for its own URI only; its ``notifications/resources/updated`` comes
back in the exposed form; a backend the caller may read nothing of is not asked at all.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from mcp import types
from mcp.server.subscriptions import ResourceUpdated
from mcp.shared.exceptions import MCPError

from tests.integration.policy.test_surface_federation import POLICY
from tests.support.live_stack import LiveStack, ServerFactory
from tests.support.sdk_stack import (
    Heard,
    eventually,
    federated_sdk_stack,
    legacy_client,
    listeners,
    next_event,
    quiet,
    sdk_client,
)
from tests.support.sdk_upstream import SdkUpstream

DOCS_INTRO = "mcp-gw://docs/docs://guide/intro"
WIKI_INTRO = "mcp-gw://wiki/docs://guide/intro"


@pytest.fixture
async def fed(
    tmp_path: Path, aiohttp_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[LiveStack, SdkUpstream, SdkUpstream]]:
    async with federated_sdk_stack(tmp_path, aiohttp_server, monkeypatch, policy=POLICY) as (
        live,
        docs,
        wiki,
    ):
        yield live, docs, wiki


async def test_updates_come_back_in_the_gateways_form_from_the_right_backend(
    fed: tuple[LiveStack, SdkUpstream, SdkUpstream],
) -> None:
    live, docs, wiki = fed
    token = live.token("mcp:access wiki:read")
    http, client = sdk_client(live, token)
    both = [DOCS_INTRO, WIKI_INTRO]
    async with http, client, client.listen(resource_subscriptions=both) as sub:
        assert sub.honored.resource_subscriptions == [DOCS_INTRO, WIKI_INTRO]
        await eventually(lambda: listeners(docs) == 1 and listeners(wiki) == 1)
        # The wiki backend's own URI, published there, arrives rewritten for wiki only.
        await wiki.bus.publish(ResourceUpdated(uri="docs://guide/intro"))
        event = await next_event(sub)
        assert event.uri == WIKI_INTRO
        await docs.bus.publish(ResourceUpdated(uri="docs://guide/intro"))
        assert (await next_event(sub)).uri == DOCS_INTRO
        # Not subscribed at docs: the backend's own filter keeps it away.
        await docs.bus.publish(ResourceUpdated(uri="docs://guide/logo.png"))
        await quiet(sub)
    assert all(token not in value for value in docs.authorizations + wiki.authorizations)
    assert "Bearer docs-service-token" in docs.authorizations
    await eventually(lambda: listeners(docs) == 0 and listeners(wiki) == 0)


async def test_a_backend_the_caller_may_read_nothing_of_is_not_asked(
    fed: tuple[LiveStack, SdkUpstream, SdkUpstream],
) -> None:
    live, docs, wiki = fed
    http, client = sdk_client(live, live.token("mcp:access"))  # no wiki:read
    both = [DOCS_INTRO, WIKI_INTRO]
    async with http, client, client.listen(resource_subscriptions=both) as sub:
        assert sub.honored.resource_subscriptions == [DOCS_INTRO]
        await eventually(lambda: listeners(docs) == 1)
        assert listeners(wiki) == 0
        await wiki.bus.publish(ResourceUpdated(uri="docs://guide/intro"))
        await quiet(sub)


@pytest.mark.filterwarnings("ignore:resources/(un)?subscribe is removed")
async def test_legacy_subscriptions_use_the_gateways_form_both_ways(
    fed: tuple[LiveStack, SdkUpstream, SdkUpstream],
) -> None:
    """The same through a 2025 client's session: ``resources/subscribe`` of the exposed URI,
    ``notifications/resources/updated`` back in it on the GET stream, a URI of a backend the
    caller may not read refused like an absent one."""
    live, docs, wiki = fed
    token = live.token("mcp:access")
    heard = Heard()
    http, client = legacy_client(live, token, heard)
    async with http, client:
        await eventually(
            lambda: listeners(docs) == 1 and listeners(wiki) == 1
        )  # tools list_changed
        await client.subscribe_resource(DOCS_INTRO)
        with pytest.raises(MCPError) as refused:
            await client.subscribe_resource(WIKI_INTRO)  # needs wiki:read
        assert refused.value.error.code == -32002
        await wiki.bus.publish(ResourceUpdated(uri="docs://guide/intro"))
        await docs.bus.publish(ResourceUpdated(uri="docs://guide/intro"))
        got = await heard.next()
        assert isinstance(got, types.ResourceUpdatedNotification)
        assert got.params.uri == DOCS_INTRO
        await heard.quiet()
    assert "subscriptions/listen" in docs.methods
    assert all(token not in value for value in docs.authorizations + wiki.authorizations)
    await eventually(lambda: listeners(docs) == 0 and listeners(wiki) == 0)
