"""The upstream link: requests to one upstream MCP server in the era it speaks.

:class:`UpstreamLink` knows how to talk to the one configured upstream:

* **Era** (:meth:`UpstreamLink.ensure`): found once (single-flight) by
  :class:`~gateway.backend.upstream.era.EraDetector` and kept until :meth:`UpstreamLink.forget`
  (called after failures) asks to detect again.
* **Legacy sessions** (2025-06-18 basic/transports.mdx §Session Management): an ``Mcp-Session-Id``
  minted by ``initialize`` is shared by the whole gateway process, re-created transparently when
  the upstream answers 404 (session expired) and sent a DELETE at shutdown.
* **Service credential**: every request carries ``Authorization: Bearer <service credential>``;
  an upstream 401 fetches a fresh credential and retries once.

Headers are built fresh for every request; nothing from the client's request is copied.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, Final

from gateway.backend.credentials.service_credential import (
    CredentialError,
    ScopeAware,
    ServiceCredential,
)
from gateway.backend.upstream.era import MODERN_VERSION, EraDetector, LinkState
from gateway.backend.upstream.rpc import (
    ProgressSink,
    Reply,
    UpstreamFault,
    backend_destination,
    encode_json,
    exchange,
)
from gateway.backend.upstream.tool_headers import encode_header_value
from gateway.config import DEFAULT_BACKEND
from gateway.errors import JsonRpcId
from gateway.observability.logging import get_logger
from gateway.outbound.client import Outbound
from gateway.outbound.failures import OutboundError
from gateway.outbound.responses import StreamingResponse

__all__ = ["Prepare", "UpstreamLink"]

_CLOSE_TIMEOUT_S: Final = 2.0

_log = get_logger("gateway.backend.upstream")

Prepare = Callable[[LinkState], tuple[Mapping[str, Any], Mapping[str, str]]]
"""Builds ``(params, extra_headers)`` for the era the link found."""


class UpstreamLink:
    """The connection state toward one upstream MCP server (see the module docstring)."""

    def __init__(
        self,
        url: str,
        outbound: Outbound,
        credential: ServiceCredential,
        *,
        max_bytes: int,
        detect_timeout_s: float,
        backend: str = DEFAULT_BACKEND,
    ) -> None:
        self.url = url
        self.backend = backend
        """The backend's configured name (its log field and its own connection pool)."""
        self.destination = backend_destination(backend)
        self._outbound = outbound
        self._credential = credential
        self.max_bytes = max_bytes
        """The largest answer read from the backend (``limits.max_response_bytes``)."""
        self._state: LinkState | None = None
        self._known: LinkState | None = None
        """The last detected state: what the backend offers, kept while a failure is re-detected."""
        self._lock = asyncio.Lock()
        self._ids = itertools.count(1)
        self._static = {
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
        }
        self._era = EraDetector(
            self._send_with_auth_retry,
            next_id=self.next_id,
            headers=self.headers,
            base_headers=self._static,
            timeout_s=detect_timeout_s,
            backend=backend,
        )
        self.on_list_changed: Callable[[], None] | None = None
        """Called for every ``notifications/tools/list_changed`` seen on a reply stream."""

    @property
    def state(self) -> LinkState | None:
        return self._state

    @property
    def known_state(self) -> LinkState | None:
        """The current state, or the last one detected while :meth:`forget` waits for the next
        request to detect again (what capabilities to advertise must not flicker meanwhile)."""
        return self._state or self._known

    def next_id(self) -> int:
        """A fresh gateway-generated JSON-RPC id (never the client's)."""
        return next(self._ids)

    def forget(self, state: LinkState | None = None) -> None:
        """Detect the era again before the next request (after a failure)."""
        if state is None or self._state is state:
            self._state = None

    async def ensure(self, deadline: float) -> LinkState:
        """The current era state, detecting it (single-flight) when unknown."""
        state = self._state
        if state is not None:
            return state
        async with self._lock:
            if self._state is None:
                self._state = self._known = await self._era.detect(deadline)
            return self._state

    # --- requests -----------------------------------------------------------------------

    def headers(self, state: LinkState, method: str, *, name: str | None = None) -> dict[str, str]:
        """Protocol headers for ``method`` in the upstream's era (no credential yet)."""
        headers = dict(self._static)
        if state.era == "modern":
            # streamable-http.mdx §Request Metadata: mirrored headers on every modern POST.
            headers["MCP-Protocol-Version"] = MODERN_VERSION
            headers["Mcp-Method"] = method
            if name is not None:
                headers["Mcp-Name"] = encode_header_value(name)
        else:
            if state.version != "2025-03-26":
                # 2025-06-18 transports.mdx §Protocol Version Header: MUST after initialize.
                headers["MCP-Protocol-Version"] = state.version
            if state.session_id is not None:
                headers["Mcp-Session-Id"] = state.session_id
        return headers

    async def request(
        self,
        method: str,
        prepare: Prepare,
        *,
        deadline: float,
        name: str | None = None,
        progress_token: str | None = None,
        on_progress: ProgressSink | None = None,
        max_bytes: int | None = None,
        credential: ServiceCredential | None = None,
    ) -> Reply:
        """Send one JSON-RPC request in the upstream's era and return its final response.

        ``prepare(state)`` returns the ``params`` object and any extra headers for the era found
        by detection. ``credential``: this request's own (a caller's exchanged token) instead of
        the service credential. Retries once with a fresh credential on 401, and once after
        re-initializing an expired legacy session (404). Raises :class:`UpstreamFault` otherwise.
        """
        state = await self.ensure(deadline)
        request_id = self.next_id()
        retried_auth = retried_session = False
        while True:
            params, extra = prepare(state)
            body = encode_json(
                {"jsonrpc": "2.0", "id": request_id, "method": method, "params": dict(params)}
            )
            headers = self.headers(state, method, name=name)
            headers.update(extra)
            try:
                return await self._send(
                    body,
                    headers,
                    request_id,
                    deadline,
                    max_bytes=max_bytes or self.max_bytes,
                    progress_token=progress_token,
                    on_progress=on_progress,
                    credential=credential,
                )
            except UpstreamFault as fault:
                if fault.kind == "unauthorized" and not retried_auth:
                    retried_auth = True
                    continue  # _send invalidated the token; the loop fetches a fresh one
                if fault.kind == "not_found" and state.session_id and not retried_session:
                    retried_session = True
                    state = await self._reinitialize(state, deadline)
                    continue
                if fault.kind in ("connection", "not_found", "redirect"):
                    self.forget(state)
                raise

    async def notify(self, state: LinkState, method: str, deadline: float) -> None:
        body = encode_json({"jsonrpc": "2.0", "method": method})
        await self._send(
            body, self.headers(state, method), None, deadline, max_bytes=self.max_bytes
        )

    async def _send(
        self,
        body: bytes,
        headers: dict[str, str],
        request_id: JsonRpcId | None,
        deadline: float,
        *,
        max_bytes: int,
        progress_token: str | None = None,
        on_progress: ProgressSink | None = None,
        credential: ServiceCredential | None = None,
    ) -> Reply:
        credential = credential if credential is not None else self._credential
        try:
            token = await credential.token(deadline)
        except CredentialError as exc:
            _log.warning("backend_credential_unavailable", backend=self.backend, reason=str(exc))
            raise UpstreamFault("credential") from exc
        if token:  # a user_oauth backend's catalog traffic may go without one
            headers["Authorization"] = f"Bearer {token}"
        try:
            return await exchange(
                self._outbound,
                self.destination,
                self.url,
                body=body,
                headers=headers,
                request_id=request_id,
                deadline=deadline,
                max_bytes=max_bytes,
                progress_token=progress_token,
                on_progress=on_progress,
                on_list_changed=self.on_list_changed,
            )
        except UpstreamFault as fault:
            if fault.kind == "unauthorized" and not credential.invalidate(token):
                raise UpstreamFault("credential", 401) from fault
            if fault.kind == "insufficient_scope" and isinstance(credential, ScopeAware):
                credential.insufficient_scope(token, fault.scope)
            raise

    # --- era detection (gateway/backend/upstream/era.py) ----------------------------------------

    async def _send_with_auth_retry(
        self, body: bytes, headers: dict[str, str], request_id: JsonRpcId | None, deadline: float
    ) -> Reply:
        try:
            return await self._send(
                body, dict(headers), request_id, deadline, max_bytes=self.max_bytes
            )
        except UpstreamFault as fault:
            if fault.kind != "unauthorized":
                raise
        return await self._send(body, dict(headers), request_id, deadline, max_bytes=self.max_bytes)

    async def _reinitialize(self, expired: LinkState, deadline: float) -> LinkState:
        async with self._lock:
            current = self._state
            if current is not None and current.generation != expired.generation:
                return current  # another call already re-initialized
            _log.info("backend_session_expired", backend=self.backend)
            self._state = None
            self._state = self._known = await self._era.initialize(deadline)
            return self._state

    @contextlib.asynccontextmanager
    async def open_stream(
        self,
        state: LinkState,
        *,
        body: bytes | None,
        method: str,
        deadline: float,
        max_body: int,
        destination: str | None = None,
    ) -> AsyncIterator[StreamingResponse]:
        """A long-lived response stream: POST ``body`` (modern ``subscriptions/listen``) or,
        without a body, the legacy GET stream (2025-06-18 transports.mdx §Listening for
        Messages from the Server). A 401 invalidates the credential for the next attempt.
        ``destination``: another pool than the backend's own (the callers' listen streams hold
        their connections for long, away from the tools/call pool)."""
        headers = self.headers(state, method)
        if body is None:
            headers = {k: v for k, v in headers.items() if k not in ("Content-Type", "Accept")}
            headers["Accept"] = "text/event-stream"
        try:
            token = await self._credential.token(deadline)
        except CredentialError as exc:
            raise UpstreamFault("credential") from exc
        if token:
            headers["Authorization"] = f"Bearer {token}"
        async with self._outbound.stream(
            destination or self.destination,
            "POST" if body is not None else "GET",
            self.url,
            deadline=deadline,
            headers=headers,
            body=body,
            max_body=max_body,
        ) as response:
            if response.status == 401:
                self._credential.invalidate(token)
            yield response

    async def close(self) -> None:
        """DELETE the legacy session, if one was minted (best effort, short deadline)."""
        state, self._state = self._state, None
        if state is None or state.session_id is None:
            return
        headers = self.headers(state, "DELETE")
        headers.pop("Content-Type", None)
        try:
            token = await self._credential.token(time.monotonic() + _CLOSE_TIMEOUT_S)
            if token:
                headers["Authorization"] = f"Bearer {token}"
            await self._outbound.request(
                self.destination,
                "DELETE",
                self.url,
                timeout_s=_CLOSE_TIMEOUT_S,
                headers=headers,
                max_body=4096,
            )
        except (OutboundError, CredentialError, UpstreamFault):
            _log.info("backend_session_delete_failed", backend=self.backend)
