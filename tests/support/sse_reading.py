"""Reading a gateway's SSE answer (a ``subscriptions/listen`` stream) as JSON-RPC messages."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp

__all__ = ["complete", "next_message", "rest_of"]


async def next_message(response: aiohttp.ClientResponse, within: float = 10.0) -> dict[str, Any]:
    """The next message on the stream, which must come within ``within`` seconds."""
    async with asyncio.timeout(within):
        while True:
            line = await response.content.readline()
            assert line, "the stream ended"
            if line.startswith(b"data: "):
                message: dict[str, Any] = json.loads(line[6:])
                return message


async def rest_of(response: aiohttp.ClientResponse, within: float) -> list[dict[str, Any]]:
    """Every message until the stream ends, which must be within ``within`` seconds."""
    messages = []
    async with asyncio.timeout(within):
        async for line in response.content:
            if line.startswith(b"data: "):
                messages.append(json.loads(line[6:]))
    return messages


def complete(messages: list[dict[str, Any]]) -> bool:
    """The listen ended with its graceful result (2026-07-28 §Graceful Closure)."""
    return bool(messages) and messages[-1].get("result", {}).get("resultType") == "complete"
