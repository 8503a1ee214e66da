"""An HTTP client for tests that talk to the development issuer, demo backend and demo stack.

Redirects are never followed (tests inspect the authorization server's 302s themselves).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiohttp

__all__ = ["HttpClient", "basic", "http_client"]

HttpClient = aiohttp.ClientSession
"""The test-side HTTP client type (outbound.py is for the gateway's own requests)."""


@asynccontextmanager
async def http_client() -> AsyncIterator[HttpClient]:
    session = HttpClient(
        timeout=aiohttp.ClientTimeout(total=30),
        cookie_jar=aiohttp.DummyCookieJar(),
    )
    try:
        yield session
    finally:
        await session.close()


def basic(client_id: str, secret: str) -> dict[str, str]:
    """RFC 6749 §2.3.1 ``client_secret_basic`` header."""
    return {"Authorization": aiohttp.encode_basic_auth(client_id, secret)}
