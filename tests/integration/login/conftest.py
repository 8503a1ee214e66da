"""The ``user_oauth`` modules' stack and browsers (the ``login_*`` modules define their own
``stack``: a login stack without a backend of people)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.support.live_stack import MakeStack, ServerFactory
from tests.support.login_stack import HttpBrowser, replica_places
from tests.support.redis_server import RedisServer, redis_server
from tests.support.user_oauth_stack import ADMIN_TOKEN, UserOAuthStack, user_oauth_stack

__all__ = ["redis_server"]  # the module fixture, imported for pytest


@pytest.fixture
async def places(
    tmp_path: Path,
    aiohttp_server: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
    redis_server: RedisServer,
) -> AsyncIterator[tuple[dict[str, Any], dict[str, Any]]]:
    """Two replicas' keyword arguments (:func:`~tests.support.login_stack.replica_places`), their
    state on the module's redis-server."""
    async with replica_places(tmp_path, aiohttp_server, monkeypatch, redis_server) as both:
        yield both


@pytest.fixture
async def stack(
    tmp_path: Path, make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[UserOAuthStack]:
    """The ``user_oauth`` stack, its audit trail in ``tmp_path / "audit.jsonl"``, its admin API
    open to :data:`~tests.support.user_oauth_stack.ADMIN_TOKEN`."""
    monkeypatch.setenv("USER_OAUTH_ADMIN", ADMIN_TOKEN)
    more = {
        "audit": {"sink": "file", "path": str(tmp_path / "audit.jsonl")},
        "admin": {"token": {"env": "USER_OAUTH_ADMIN"}},
    }
    async with make_stack.of(user_oauth_stack, gateway=more) as running:
        yield running


@pytest.fixture
async def browsers(stack: UserOAuthStack) -> AsyncIterator[tuple[HttpBrowser, HttpBrowser]]:
    """Two people's browsers, each with its own cookies."""
    async with aiohttp.ClientSession() as one, aiohttp.ClientSession() as two:
        yield HttpBrowser(one, stack.login.origin), HttpBrowser(two, stack.login.origin)


@pytest.fixture
def browser(browsers: tuple[HttpBrowser, HttpBrowser]) -> HttpBrowser:
    return browsers[0]
