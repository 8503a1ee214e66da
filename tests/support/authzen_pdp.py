"""A small, real OpenID AuthZEN 1.0 decision point for the tests (aiohttp on 127.0.0.1).

``POST /access/v1/evaluation`` takes an Access Evaluation request (AuthZEN 1.0 §6.1), checks
its shape (``subject``/``resource`` with string ``type`` and ``id``, ``action.name``), records
it with its headers, and answers ``{"decision": <bool>}`` (§6.2) from :attr:`AuthZenPdp.rule`
(a function of the request body). A malformed request is 400, a wrong credential 401 (when
:attr:`credential` is set). :class:`PdpFaults` makes it slow, fail or answer garbage.
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

__all__ = ["EVALUATION_PATH", "AuthZenPdp", "PdpFaults", "Seen", "authzen_pdp"]

EVALUATION_PATH = "/access/v1/evaluation"


@dataclass(frozen=True)
class Seen:
    """One evaluation request as received."""

    headers: dict[str, str]
    body: dict[str, Any]
    raw: bytes


@dataclass
class PdpFaults:
    status: int | None = None
    """Answer this status (with a JSON error body) instead of a decision."""
    body: bytes | None = None
    """Answer 200 with these bytes instead of a decision."""
    content_type: str = "application/json"
    """The ``Content-Type`` of :attr:`body`."""
    delay_s: float = 0.0


def _allow_all(request: dict[str, Any]) -> bool:
    return True


@dataclass
class AuthZenPdp:
    rule: Callable[[dict[str, Any]], bool] = _allow_all
    credential: str | None = None
    """The exact ``Authorization`` value the PDP requires (None: any or none)."""
    faults: PdpFaults = field(default_factory=PdpFaults)
    seen: list[Seen] = field(default_factory=list)
    url: str = ""
    server: TestServer | None = None

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post(EVALUATION_PATH, self._evaluate)
        return app

    async def _evaluate(self, request: web.Request) -> web.Response:
        raw = await request.read()
        try:
            body = json.loads(raw)
        except ValueError:
            return web.json_response({"error": "not json"}, status=400)
        self.seen.append(Seen(dict(request.headers), body, raw))
        if self.credential is not None and request.headers.get("Authorization") != self.credential:
            return web.json_response({"error": "unauthorized"}, status=401)
        if not _well_formed(body):
            return web.json_response({"error": "malformed evaluation request"}, status=400)
        if self.faults.delay_s:
            await asyncio.sleep(self.faults.delay_s)
        if self.faults.status is not None:
            return web.json_response({"error": "pdp fault"}, status=self.faults.status)
        if self.faults.body is not None:
            return web.Response(
                body=self.faults.body, headers={"Content-Type": self.faults.content_type}
            )
        decision = self.rule(body)
        answer: dict[str, Any] = {"decision": decision}
        if not decision:  # §6.2: a context with reasons, one never meant for the user
            answer["context"] = {"reason_admin": {"en": "secret policy detail"}}
        return web.json_response(answer)


def _well_formed(body: Any) -> bool:
    """AuthZEN 1.0 §5/§6.1: the REQUIRED members, with their REQUIRED fields."""
    if not isinstance(body, dict):
        return False
    subject, resource, action = body.get("subject"), body.get("resource"), body.get("action")
    return (
        all(
            isinstance(entity, dict)
            and isinstance(entity.get("type"), str)
            and isinstance(entity.get("id"), str)
            for entity in (subject, resource)
        )
        and isinstance(action, dict)
        and isinstance(action.get("name"), str)
        and isinstance(body.get("context", {}), dict)
    )


@asynccontextmanager
async def authzen_pdp(
    server_factory: Callable[..., Any], pdp: AuthZenPdp | None = None
) -> AsyncIterator[AuthZenPdp]:
    """Start ``pdp`` (a fresh one by default) on loopback; ``pdp.url`` is its evaluation URL."""
    found = pdp or AuthZenPdp()
    found.server = await server_factory(found.app())
    found.url = str(found.server.make_url(EVALUATION_PATH))
    yield found
