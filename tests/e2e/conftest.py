"""The end-to-end tests' fixtures: ``demo_stack``, the running demo (gateway, development issuer
and demo backend), for every module here; ``browser``, a fresh Chromium context for the browser
modules (each marks itself ``needs_chromium``)."""

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.support.chromium import chromium_context
from tests.support.demo_stack import demo_stack

__all__ = ["demo_stack"]


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    async with chromium_context() as context:
        yield context
