"""The one Redis client of a replica: a deadline on every call, back-off after a failure.

Every call goes through :meth:`RedisStore.call`, which bounds it by ``state.redis.timeout_ms``
(connect included) and turns any failure (refused, reset, timeout, a Redis error reply) into
:class:`StoreUnavailable`, so callers apply their ``on_store_error`` policy instead of crashing
or hanging. After a failure the store is *backing off* for :data:`RETRY_S`: calls fail at once
(no timeout paid per request while Redis is down), then the next call tries again; redis-py's
pool reconnects by itself. The first failure and the recovery are logged once each (not per
request); ``mcp_gateway_state_store_up`` follows the last outcome.

Pub/sub needs a connection that may stay idle, so :meth:`RedisStore.listen` runs on its own
client without a read timeout (a periodic PING notices a dead peer) and resubscribes after a
failure, calling ``on_connect`` each time so the subscriber can catch up on what it missed.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeVar

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

from gateway.config import RedisConfig
from gateway.observability.logging import get_logger
from gateway.observability.metrics import Metrics

__all__ = ["RETRY_S", "STARTUP_WAIT_S", "RedisStore", "StoreUnavailable"]

RETRY_S: Final = 1.0
"""After a failed call, calls fail at once for this long before Redis is tried again."""
STARTUP_WAIT_S: Final = 5.0
"""At startup, how long :meth:`RedisStore.connect` tries for a first answer (readiness waits)."""
STARTUP_RETRY_S: Final = 0.1
"""Between two of those tries: a first connection may time out on a host still busy starting."""
LISTEN_RETRY_MAX_S: Final = 5.0
"""Longest wait between two attempts to (re)subscribe."""
PUBSUB_PING_S: Final = 5
"""Idle pub/sub connections are PINGed this often, so a dead peer is noticed."""

T = TypeVar("T")

_log = get_logger("gateway.state")


class StoreUnavailable(Exception):
    """Redis did not answer in time, refused, failed, or the store is backing off."""


class RedisStore:
    """A replica's connection to the shared Redis (``state.redis``)."""

    def __init__(
        self,
        config: RedisConfig,
        *,
        metrics: Metrics | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.prefix = config.key_prefix
        self.timeout_s = config.timeout_ms / 1000.0
        self._config = config
        self._metrics = metrics
        self._clock = clock
        self._client = self._new_client(read_timeout=self.timeout_s)
        self._backoff_until = 0.0
        self.up: bool | None = None
        """Outcome of the last call: None before the first one."""
        self.last_error: str | None = None
        """The class name of the last failure (no message: it could echo the URL)."""
        if metrics is not None:
            metrics.state_store_up.set(0)

    def _new_client(self, *, read_timeout: float | None) -> aioredis.Redis:
        tls = self._config.tls
        options: dict[str, Any] = {}
        if tls.ca_file is not None:
            options["ssl_ca_certs"] = tls.ca_file
        if tls.client_cert is not None:
            options["ssl_certfile"] = tls.client_cert
            options["ssl_keyfile"] = tls.client_key
        return aioredis.Redis.from_url(
            self._config.url.reveal(),
            socket_timeout=read_timeout,
            socket_connect_timeout=self.timeout_s,
            # One attempt per call: the caller's deadline and fallback decide, not hidden retries.
            retry=Retry(NoBackoff(), 0),
            retry_on_timeout=False,
            health_check_interval=PUBSUB_PING_S if read_timeout is None else 0,
            client_name="mcp-gateway",
            **options,
        )

    def key(self, *parts: str) -> str:
        """A key (or channel) name under ``state.redis.key_prefix``."""
        return self.prefix + ":".join(parts)

    @property
    def client(self) -> aioredis.Redis:
        return self._client

    @property
    def backing_off(self) -> bool:
        return self._clock() < self._backoff_until

    async def call(self, operation: Callable[[aioredis.Redis], Awaitable[T]]) -> T:
        """Run ``operation`` against Redis within the deadline, or raise StoreUnavailable."""
        if self._clock() < self._backoff_until:
            raise StoreUnavailable("backing off")
        try:
            async with asyncio.timeout(self.timeout_s):
                result = await operation(self._client)
        except (RedisError, OSError, TimeoutError) as exc:
            self._failed(exc)
            raise StoreUnavailable(type(exc).__name__) from None
        if self.up is not True:
            self._recovered()
        return result

    def _failed(self, exc: BaseException) -> None:
        self._backoff_until = self._clock() + RETRY_S
        name = type(exc).__name__
        if self.up is not False:
            _log.error("state_store.unavailable", error=name, retry_s=RETRY_S)
        self.up, self.last_error = False, name
        if self._metrics is not None:
            self._metrics.state_store_up.set(0)

    def _recovered(self) -> None:
        if self.up is False:
            _log.info("state_store.recovered")
        self.up, self.last_error = True, None
        if self._metrics is not None:
            self._metrics.state_store_up.set(1)

    async def connect(self) -> bool:
        """At startup, before the replica is ready: PING until Redis answers, at most
        :data:`STARTUP_WAIT_S`; True when it did. The first call also opens the connection,
        which on a host busy starting can take longer than ``timeout_ms``: one such timeout must
        not put the store in back-off (every call refused for :data:`RETRY_S`) right when
        the replica starts to serve. Only the last failure counts as an outage."""
        deadline = self._clock() + STARTUP_WAIT_S
        while True:
            try:
                async with asyncio.timeout(self.timeout_s):
                    await self._client.ping()
            except (RedisError, OSError, TimeoutError) as exc:
                if self._clock() + STARTUP_RETRY_S >= deadline:
                    self._failed(exc)
                    return False
                await asyncio.sleep(STARTUP_RETRY_S)
                continue
            self._recovered()
            return True

    async def listen(
        self,
        channel: str,
        on_message: Callable[[bytes], None],
        *,
        on_connect: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """Deliver every message of ``channel`` to ``on_message`` until cancelled.

        Resubscribes after any failure (growing back-off up to :data:`LISTEN_RETRY_MAX_S`) and
        calls ``on_connect`` after each successful subscription (catch up on missed messages).
        """
        client = self._new_client(read_timeout=None)
        delay = RETRY_S
        try:
            while True:
                pubsub = client.pubsub(ignore_subscribe_messages=True)
                try:
                    async with asyncio.timeout(self.timeout_s):
                        await pubsub.subscribe(channel)
                    if on_connect is not None:
                        await on_connect()
                    delay = RETRY_S
                    while True:
                        message = await pubsub.get_message(timeout=1.0)
                        if message is not None and message.get("type") == "message":
                            data = message.get("data")
                            if isinstance(data, bytes):
                                on_message(data)
                except (RedisError, OSError, TimeoutError, StoreUnavailable) as exc:
                    _log.warning("state_store.subscription_lost", error=type(exc).__name__)
                finally:
                    with contextlib.suppress(RedisError, OSError):
                        await pubsub.aclose()  # type: ignore[no-untyped-call,unused-ignore]  # typed from redis 8.2
                await asyncio.sleep(delay)
                delay = min(delay * 2, LISTEN_RETRY_MAX_S)
        finally:
            await client.aclose()

    async def close(self) -> None:
        await self._client.aclose()
