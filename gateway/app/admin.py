"""The ops listener's admin API: ``POST /admin/revoke`` (only when ``admin.token`` is set).

Authenticated with ``Authorization: Bearer <admin.token>`` (compared in constant time). The body
is a JSON object with one of:

* ``"token"``: the access token itself (read at once and never logged or stored);
* ``"revocation_key"``: the token's revocation key as 64 hex digits, what ``mcp-gateway
  revoke`` works out from the token on the operator's machine
  (``gateway/state/revocation_key.py``: for a JWT its issuer and ``jti``, else its signing
  input; for an opaque token its SHA-256), optionally with the JWT's ``"exp"`` (a number) and
  ``"iss"``. The 12-character ``token_fp`` of the logs is refused: 48 bits name a log line,
  not one token. ``"token_sha256"`` (the SHA-256 of a JWT's bytes names one spelling of it,
  not the token) is refused with a pointer to ``revocation_key``.

Every spelling of the token is refused by this replica at once and, with ``state.backend:
redis``, by every replica within about a second (``gateway/state/revocation.py``), until the
later of ``admin.revocation_ttl_s`` from now and, for a JWT, its ``exp`` (bounded by the
issuer's ``max_token_lifetime_s``, :func:`~gateway.state.revocation_key.kept_until`); the
streams still open on it end as fast (``McpEndpoint.revoked``). Answers
(JSON, ``no-store``):

* 200 ``{"revoked": "all_replicas" | "this_replica", "token_fp", "revocation_key", "until"}``:
  done everywhere the store reaches (``this_replica`` with the memory backend);
* 503 ``{"revoked": "this_replica_only", ...}``: Redis did not take it; this replica writes it
  there when its subscription is back, a retry (idempotent) reaches the others now;
* 400 malformed body, 401 missing or wrong admin credential, 415 not JSON.

Each revocation is one audit event (``token_revoked``) and one log line.
"""

from __future__ import annotations

import hmac
import math
import re
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, Final

from aiohttp import web

from gateway.app.request_id import REQUEST_ID
from gateway.config import Config
from gateway.jsonkit.read import loads
from gateway.observability.audit import AuditSink, RevocationEvent
from gateway.observability.logging import get_logger
from gateway.state.revocation_key import kept_until, revocation_target

__all__ = ["MAX_ADMIN_BODY", "REVOKE_PATH", "Revoke", "add_admin_routes", "admin_body", "answer"]

REVOKE_PATH: Final = "/admin/revoke"
MAX_ADMIN_BODY: Final = 16_384
MAX_TOKEN_CHARS: Final = 8192
_SHA256_HEX: Final = re.compile(r"[0-9a-f]{64}")
_NO_STORE: Final = {"Cache-Control": "no-store"}

Revoke = Callable[[bytes, float], Awaitable[tuple[float, bool]]]
"""``revoke(key, at_least) -> (until, shared)``: the revocation list's :meth:`revoke`."""

_log = get_logger("gateway.admin")


def answer(status: int, body: Any, **headers: str) -> web.Response:
    """An admin API answer (JSON, ``no-store``)."""
    return _answer(status, body, **headers)


def _answer(status: int, body: Any, **headers: str) -> web.Response:
    return web.json_response(body, status=status, headers={**_NO_STORE, **headers})


def _refuse(status: int, error: str, description: str, **headers: str) -> web.Response:
    return _answer(status, {"error": error, "error_description": description}, **headers)


_ONE_OF: Final = 'the body must be a JSON object with "token" or "revocation_key"'


def _target_of(doc: Any, config: Config, now: float) -> tuple[bytes, float] | str:
    """(revocation key, the instant it must at least last) the body names, or the fixed text of
    what is wrong with it."""
    if not isinstance(doc, dict):
        return _ONE_OF
    if "token_sha256" in doc:
        return (
            '"token_sha256" is not accepted: the SHA-256 of a JWT names one spelling of it. Send '
            '"token", or the "revocation_key" that mcp-gateway revoke works out from the token'
        )
    if set(doc) == {"token"}:
        token = doc["token"]
        if not isinstance(token, str) or not 0 < len(token) <= MAX_TOKEN_CHARS:
            return '"token" must be a non-empty string of at most 8192 characters'
        target = revocation_target(token)
        return target.key, kept_until(config.issuers, target.issuer, target.expires_at, now)
    if "revocation_key" not in doc or not set(doc) <= {"revocation_key", "exp", "iss"}:
        return _ONE_OF + ' ("revocation_key" may come with "exp" and "iss", nothing else)'
    key, exp, iss = doc["revocation_key"], doc.get("exp"), doc.get("iss")
    if not isinstance(key, str) or not _SHA256_HEX.fullmatch(key.lower()):
        return (
            '"revocation_key" must be 64 hex digits (the 12-character token_fp of the logs is '
            "too short to identify one token)"
        )
    if exp is not None and (
        isinstance(exp, bool) or not isinstance(exp, int | float) or not math.isfinite(exp)
    ):
        return '"exp" must be a number (the JWT\'s exp claim)'
    if iss is not None and not isinstance(iss, str):
        return '"iss" must be a string (the JWT\'s iss claim)'
    expires = None if exp is None else float(exp)
    return bytes.fromhex(key), kept_until(config.issuers, iss, expires, now)


_REALM: Final = 'Bearer realm="mcp-gateway-admin"'


async def admin_body(request: web.Request, config: Config) -> Any:
    """The JSON body of an admin request whose credential is ``admin.token``, or the refusal to
    send (401 missing or wrong credential, 415 not JSON, 413 over 16 KiB, 400 not JSON)."""
    secret = config.admin.token
    supplied = request.headers.getall("Authorization", [])
    expected = f"Bearer {secret.current() if secret is not None else ''}".encode()
    if (
        secret is None
        or len(supplied) != 1
        or not hmac.compare_digest(supplied[0].encode(), expected)
    ):
        _log.warning("admin.unauthorized", path=request.path, peer=request.remote)
        return _refuse(
            401, "unauthorized", "admin credential required", **{"WWW-Authenticate": _REALM}
        )
    if request.content_type != "application/json":
        return _refuse(415, "unsupported_media_type", "Content-Type must be application/json")
    if request.content_length is not None and request.content_length > MAX_ADMIN_BODY:
        return _refuse(413, "body_too_large", "the body is larger than 16 KiB")
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.content.iter_any():  # chunked bodies have no length
            size += len(chunk)
            if size > MAX_ADMIN_BODY:
                return _refuse(413, "body_too_large", "the body is larger than 16 KiB")
            chunks.append(chunk)
    except ConnectionError:
        return _refuse(400, "invalid_request", "the body could not be read")
    try:
        return loads(b"".join(chunks))
    except ValueError:
        return _refuse(400, "invalid_request", "the body is not JSON")


def add_admin_routes(
    app: web.Application, config: Config, revoke: Revoke, audit: AuditSink | None
) -> None:
    """Install ``POST /admin/revoke`` when ``admin.token`` is configured (else nothing)."""
    if config.admin.token is None:
        return

    async def handle(request: web.Request) -> web.StreamResponse:
        doc = await admin_body(request, config)
        if isinstance(doc, web.Response):
            return doc
        target = _target_of(doc, config, time.time())
        if isinstance(target, str):
            return _refuse(400, "invalid_request", target)
        digest, at_least = target
        until, shared = await revoke(digest, at_least)
        scope = "all_replicas" if config.state.backend == "redis" else "this_replica"
        outcome = scope if shared else "this_replica_only"
        token_fp, full = digest.hex()[:12], digest.hex()
        _log.info("token_revoked", token_fp=token_fp, reached=outcome, peer=request.remote)
        if audit is not None:
            audit.emit(
                RevocationEvent(
                    request_id=str(request.get(REQUEST_ID) or ""),
                    token_fp=token_fp,
                    revocation_key=full,
                    until=until,
                    reached=outcome,
                    peer=request.remote,
                ),
                time.time(),
            )
        body = {
            "revoked": outcome,
            "token_fp": token_fp,
            "revocation_key": full,
            "until": datetime.fromtimestamp(until, UTC).isoformat(timespec="seconds")[:-6] + "Z",
        }
        return _answer(200 if shared else 503, body)

    app.router.add_post(REVOKE_PATH, handle)
