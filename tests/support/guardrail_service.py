"""A small, real guardrail processor for the tests (aiohttp on 127.0.0.1).

``POST /check`` takes the gateway's message (docs/policy.md#the-exchange), checks its shape
(``phase``, ``serviceNames``, ``method``, ``metadataContext`` and exactly the one of
``mcpRequest`` / ``mcpResponse`` its phase carries), records it with its headers, and answers
the verdict :attr:`GuardrailService.decide` makes of it. A malformed message is 400, a wrong
credential 401 (when :attr:`credential` is set). :class:`Faults` make it slow, fail or answer
garbage. The helpers below are the verdicts the tests use: :func:`deny_containing`,
:func:`redact`, :func:`replace_with`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer

__all__ = [
    "CHECK_PATH",
    "Faults",
    "GuardrailService",
    "Seen",
    "deny_containing",
    "guardrail_service",
    "redact",
    "replace_with",
]

CHECK_PATH = "/check"

Decide = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class Seen:
    """One message as received."""

    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def check(self) -> str:
        return str(self.body["metadataContext"]["check"])

    @property
    def content(self) -> Any:
        return self.body.get("mcpRequest", self.body.get("mcpResponse"))


@dataclass
class Faults:
    status: int | None = None
    """Answer this status (with a JSON error body) instead of a verdict."""
    body: bytes | None = None
    """Answer 200 with these bytes instead of a verdict."""
    content_type: str = "application/json"
    delay_s: float = 0.0


def _pass(message: dict[str, Any]) -> dict[str, Any]:
    return {"pass": {}}


@dataclass
class GuardrailService:
    decide: Decide = _pass
    credential: str | None = None
    """The exact ``Authorization`` value required (None: any or none)."""
    faults: Faults = field(default_factory=Faults)
    seen: list[Seen] = field(default_factory=list)
    url: str = ""

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post(CHECK_PATH, self._check)
        return app

    def checks(self) -> list[str]:
        return [seen.check for seen in self.seen]

    async def _check(self, request: web.Request) -> web.Response:
        try:
            body = json.loads(await request.read())
        except ValueError:
            return web.json_response({"error": "not json"}, status=400)
        self.seen.append(Seen(dict(request.headers), body))
        if self.credential is not None and request.headers.get("Authorization") != self.credential:
            return web.json_response({"error": "unauthorized"}, status=401)
        if not _well_formed(body):
            return web.json_response({"error": "malformed message"}, status=400)
        if self.faults.delay_s:
            await asyncio.sleep(self.faults.delay_s)
        if self.faults.status is not None:
            return web.json_response({"error": "processor fault"}, status=self.faults.status)
        if self.faults.body is not None:
            return web.Response(
                body=self.faults.body, headers={"Content-Type": self.faults.content_type}
            )
        return web.json_response(self.decide(body))


def _well_formed(body: Any) -> bool:
    if not isinstance(body, dict) or body.get("phase") not in ("request", "response"):
        return False
    carried = "mcpRequest" if body["phase"] == "request" else "mcpResponse"
    other = "mcpResponse" if carried == "mcpRequest" else "mcpRequest"
    names = body.get("serviceNames")
    return (
        isinstance(names, list)
        and len(names) == 1
        and isinstance(body.get("method"), str)
        and isinstance(body.get("metadataContext"), dict)
        and isinstance(body.get(carried), dict)
        and other not in body
    )


def deny_containing(marker: str, reason: str = "contains a secret") -> Decide:
    """Refuse (PERMISSION_DENIED with ``reason``) any content whose JSON holds ``marker``."""

    def decide(message: dict[str, Any]) -> dict[str, Any]:
        content = message.get("mcpRequest", message.get("mcpResponse"))
        if marker in json.dumps(content):
            return {"error": {"code": "PERMISSION_DENIED", "reason": reason}}
        return {"pass": {}}

    return decide


def redact(marker: str, replacement: str = "[redacted]") -> Decide:
    """Answer a changed copy with every ``marker`` in a string replaced (pass when none)."""

    def decide(message: dict[str, Any]) -> dict[str, Any]:
        content = message.get("mcpRequest", message.get("mcpResponse"))
        text = json.dumps(content)
        if marker not in text:
            return {"pass": {}}
        return {"mutated": json.loads(text.replace(marker, replacement))}

    return decide


def replace_with(value: Any) -> Decide:
    """Answer ``value`` as the change, whatever was shown."""
    return lambda message: {"mutated": value}


@asynccontextmanager
async def guardrail_service(
    server_factory: Callable[..., Any], service: GuardrailService | None = None
) -> AsyncIterator[GuardrailService]:
    """Start ``service`` (a fresh one by default) on loopback; ``service.url`` is its URL."""
    found = service or GuardrailService()
    server: TestServer = await server_factory(found.app())
    found.url = str(server.make_url(CHECK_PATH))
    yield found
