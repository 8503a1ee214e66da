"""The ``state:`` section: where the state shared by every replica lives (memory or Redis)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from gateway.config.backend import build_tls
from gateway.config.builder import Builder
from gateway.config.model import RedisConfig, StateConfig, StoreErrorPolicies
from gateway.yaml_source import PathPart

__all__ = ["REDIS_SCHEMES", "build_state"]

REDIS_SCHEMES = frozenset({"redis", "rediss", "unix"})


def build_state(b: Builder, raw: dict[str, Any]) -> StateConfig:
    sp: tuple[PathPart, ...] = ("state",)
    backend = raw.get("backend", "memory")
    redis = None
    raw_redis = raw.get("redis")
    if raw_redis is not None:
        redis = _build_redis(b, raw_redis, (*sp, "redis"))
        if backend != "redis":
            b.warnings.append("state.redis is ignored: state.backend is memory")
            redis = None
    elif backend == "redis":
        b.doc.problem(sp, "backend: redis needs a redis: {url: ...} mapping")
    return StateConfig(
        backend=backend,
        redis=redis,
        on_store_error=StoreErrorPolicies(**raw.get("on_store_error", {})),
    )


def _build_redis(b: Builder, raw: dict[str, Any], rp: tuple[PathPart, ...]) -> RedisConfig | None:
    url = b.secret(raw["url"], (*rp, "url"))
    tls = build_tls(b, raw.get("tls", {}), (*rp, "tls"))
    if url is None:
        return None
    # The URL may carry a password: problems name the scheme rule, never the value.
    scheme = urlsplit(url.reveal()).scheme
    if scheme not in REDIS_SCHEMES:
        b.doc.problem((*rp, "url"), "must be a redis://, rediss:// (TLS) or unix:// URL")
    if raw.get("tls") and scheme != "rediss":
        b.doc.problem((*rp, "tls"), "needs a rediss:// url (TLS)")
    return RedisConfig(
        url=url,
        key_prefix=raw.get("key_prefix", "mcp-gateway:"),
        timeout_ms=int(raw.get("timeout_ms", 100)),
        tls=tls,
    )
