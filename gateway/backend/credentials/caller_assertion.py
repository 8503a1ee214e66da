"""Signed caller assertions: a short-lived JWT per ``tools/call`` that says who is calling.

The pattern of Google IAP's ``x-goog-iap-jwt-assertion`` and Pomerium's
``X-Pomerium-Jwt-Assertion``: the backend verifies the signature against the gateway's JWK Set
(:mod:`.assertion_keys`) instead of trusting a header a misrouted request could forge. Header:
``{"alg", "kid", "typ": "mcp-gateway-assertion+jwt"}``. Claims, and nothing else (nothing of
the caller's token is copied beyond these):

``iss``     the gateway's ``resource`` URL
``aud``     ``identity.assertion.audience`` (default: the backend's URL)
``sub``     the caller's subject; ``client_id`` (and ``azp``, the same value, for OIDC-style
            verifiers) when the token named a client; ``act`` ``{"sub": ...}`` when the
            caller's token was itself delegated (RFC 8693 §4.1)
``scope``   the caller's granted scopes, space-separated, sorted
``tool``    ``{"name": <exposed name>, "upstream": <name the upstream knows>}``
``iat``, ``exp``  ``exp = min(iat + ttl_s, the caller's exp + issuer.clock_skew_s)``
``jti``     128 random bits, unique per minted assertion
``request_id``  the gateway request id of the call that minted it

**Cost and reuse.** Signing costs about 40 µs (Ed25519) and building the token about 20 µs more
(``scripts/bench_micro.py assertion``), a fifth of the gateway's per-call budget. With
``reuse: true`` (the default) an assertion is reused for calls with the same caller token
(same principal), backend and tool during the first half of its lifetime, so a busy caller
costs one signature per ``ttl_s / 2`` per tool. A reused assertion keeps its ``jti`` and its
``request_id`` (the ``X-Request-Id`` header always names the current request). ``reuse: false``
mints one per call.
"""

from __future__ import annotations

import math
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from joserfc.jws import JWSRegistry

from gateway import b64url
from gateway.backend.credentials.assertion_keys import AssertionKey, GatewayKeys
from gateway.bounded import BoundedMap
from gateway.config import AssertionConfig, BackendConfig, Config
from gateway.jsonkit.write import compact
from gateway.observability.metrics import Metrics
from gateway.seams import Principal, RequestContext, ToolDef

__all__ = ["MAX_REUSED", "AssertionSigner", "signer_for"]

MAX_REUSED: Final = 10_000
"""Assertions kept for reuse per backend (LRU): one per active (caller token, tool)."""


@dataclass(frozen=True, slots=True)
class _Minted:
    principal: Principal
    value: str
    reuse_until: float


class AssertionSigner:
    """Mints (or reuses) the assertion header of one backend's tool calls."""

    def __init__(
        self,
        config: AssertionConfig,
        key: AssertionKey,
        *,
        issuer: str,
        backend: str,
        metrics: Metrics | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.header = config.header
        self._audience = config.audience
        self._ttl_s = config.ttl_s
        self._reuse = config.reuse
        self._key = key
        self._algorithm = JWSRegistry.algorithms[key.alg]
        self._issuer = issuer
        self._clock = clock
        self._minted: BoundedMap[tuple[str, str], _Minted] = BoundedMap(MAX_REUSED)
        """Reusable assertions, expiring at their ``reuse_until``."""
        self._counters = (
            (
                metrics.identity_assertions_total.labels(backend=backend, result="signed"),
                metrics.identity_assertions_total.labels(backend=backend, result="reused"),
            )
            if metrics is not None
            else None
        )

    def assertion(self, tool: ToolDef, principal: Principal, ctx: RequestContext) -> str:
        """The compact JWS for this call (see the module docstring for claims and reuse)."""
        now = self._clock()
        slot = (principal.fingerprint, tool.name)
        if self._reuse:
            found = self._minted.get(slot, now)
            # Equal principals carry equal claims; a fingerprint collision is just a miss.
            if found is not None and found.principal == principal:
                if self._counters is not None:
                    self._counters[1].inc()
                return found.value
        value, issued, expires = self._sign(tool, principal, ctx, now)
        if self._reuse:
            reuse_until = issued + (expires - issued) / 2
            self._minted.put(slot, _Minted(principal, value, reuse_until), reuse_until)
        if self._counters is not None:
            self._counters[0].inc()
        return value

    def forget(self, digest: bytes) -> None:
        """Drop the reusable assertions of the caller token with this SHA-256 digest (it was
        revoked; a principal's fingerprint is the start of the digest's hex form)."""
        text = digest.hex()
        for slot in [slot for slot in self._minted if text.startswith(slot[0])]:
            self._minted.pop(slot)

    def _sign(
        self, tool: ToolDef, principal: Principal, ctx: RequestContext, now: float
    ) -> tuple[str, int, int]:
        issued = int(now)
        expires = min(issued + self._ttl_s, math.ceil(principal.valid_until))
        expires = max(expires, issued + 1)  # the call was admitted: it is valid right now
        claims: dict[str, Any] = {
            "iss": self._issuer,
            "aud": self._audience,
            "sub": principal.subject,
        }
        if principal.client_id is not None:
            claims["client_id"] = principal.client_id
            claims["azp"] = principal.client_id
        if principal.actor is not None:
            claims["act"] = {"sub": principal.actor}
        claims |= {
            "scope": " ".join(sorted(principal.scopes)),
            "tool": {"name": tool.name, "upstream": tool.upstream_name or tool.name},
            "iat": issued,
            "exp": expires,
            "jti": secrets.token_urlsafe(16),
            "request_id": ctx.request_id,
        }
        key, header = self._key.current()
        payload = b64url.encode_bytes(compact(claims))
        signing_input = header + b"." + payload
        signature = self._algorithm.sign(signing_input, key)
        return (
            (signing_input + b"." + b64url.encode_bytes(signature)).decode("ascii"),
            issued,
            expires,
        )


def signer_for(
    config: Config, settings: BackendConfig, keys: GatewayKeys | None, metrics: Metrics | None
) -> AssertionSigner | None:
    """The backend's assertion signer (``identity.assertion``), None without one."""
    assertion = settings.identity.assertion
    if assertion is None:
        return None
    key = keys.for_backend(settings.name) if keys is not None else None
    if metrics is not None:
        metrics.register_identity(settings.name, assertion=True)
    return AssertionSigner(
        assertion,
        key if key is not None else AssertionKey(assertion),
        issuer=config.resource,
        backend=settings.name,
        metrics=metrics,
    )
