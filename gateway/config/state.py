"""The ``state:`` section (where the state shared by every replica lives: memory or Redis) and
the ``admin:`` section (the ops listener's admin API and how long a revocation lasts)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

from gateway.config.backend import build_tls
from gateway.config.builder import Builder
from gateway.config.declare import fill
from gateway.config.issuer_model import CacheConfig
from gateway.config.state_model import AdminConfig, RedisConfig, StateConfig
from gateway.yaml_source import PathPart

__all__ = ["REDIS_SCHEMES", "build_admin", "build_state"]

REDIS_SCHEMES = frozenset({"redis", "rediss", "unix"})
MIN_ADMIN_TOKEN_CHARS = 32
"""The admin credential revokes tokens for every replica: no short, guessable values."""


def build_state(b: Builder, raw: dict[str, Any]) -> StateConfig:
    sp: tuple[PathPart, ...] = ("state",)
    state = fill(b, StateConfig, raw, sp, leave=("redis",))
    redis = None
    raw_redis = raw.get("redis")
    if raw_redis is not None:
        redis = _build_redis(b, raw_redis, (*sp, "redis"))
        if state.backend != "redis":
            b.warnings.append("state.redis is ignored: state.backend is memory")
            redis = None
    elif state.backend == "redis":
        b.doc.problem(sp, "backend: redis needs a redis: {url: ...} mapping")
    if state.share_token_cache and state.backend != "redis":
        b.doc.problem((*sp, "share_token_cache"), "needs backend: redis")
    return replace(state, redis=redis)


def _build_redis(b: Builder, raw: dict[str, Any], rp: tuple[PathPart, ...]) -> RedisConfig | None:
    url = b.secret(raw["url"], (*rp, "url"))
    tls = build_tls(b, raw.get("tls", {}), (*rp, "tls"))
    if url is None:
        return None
    # The URL may carry a password: problems name the scheme rule, never the value. Not read
    # (check --skip-secrets): nothing to check it against.
    scheme = None if url.skipped else urlsplit(url.reveal()).scheme
    if scheme is not None and scheme not in REDIS_SCHEMES:
        b.doc.problem((*rp, "url"), "must be a redis://, rediss:// (TLS) or unix:// URL")
    if raw.get("tls") and scheme is not None and scheme != "rediss":
        b.doc.problem((*rp, "tls"), "needs a rediss:// url (TLS)")
    return fill(b, RedisConfig, raw, rp, url=url, tls=tls)


def build_admin(b: Builder, raw: dict[str, Any], cache: CacheConfig) -> AdminConfig:
    ap: tuple[PathPart, ...] = ("admin",)
    token = b.secret(raw.get("token"), (*ap, "token"))
    if token is not None and not token.skipped and len(token.reveal()) < MIN_ADMIN_TOKEN_CHARS:
        b.doc.problem(
            (*ap, "token"),
            f"must be at least {MIN_ADMIN_TOKEN_CHARS} characters (e.g. openssl rand -hex 32)",
        )
    admin = fill(b, AdminConfig, raw, ap, token=token)
    # A replica that missed the broadcast may hold the token this long: the marker must outlive it.
    longest = cache.max_ttl_s + cache.stale_if_error_s
    if admin.revocation_ttl_s < longest:
        b.doc.problem(
            (*ap, "revocation_ttl_s"),
            f"must be at least issuer.cache.max_ttl_s + stale_if_error_s ({longest})",
        )
    return admin
