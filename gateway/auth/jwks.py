"""One issuer's JSON Web Key Set (RFC 7517 §5): fetched, vetted, cached, refreshed.

:class:`JwksCache` holds the public keys local JWT validation verifies with:

* **Startup.** :meth:`JwksCache.start` fetches the set once; until a fetch yields at least one
  usable key the cache is not :attr:`~JwksCache.ready` (``/readyz`` waits for it) and tokens of
  this issuer are answered 503 ``issuer_unavailable``, never accepted.
* **Scheduled refresh** on the response's HTTP cache headers (``Cache-Control: max-age``, else
  ``Expires``), clamped to ``[jwks_min_refresh_s, jwks_max_refresh_s]``; ``no-store`` and
  ``no-cache`` refresh at the lower bound, no header at the upper bound. A failed refresh keeps
  the keys it has (a JWKS outage is not an outage while keys are cached) and retries with
  exponential backoff from one second up to a minute.
* **Unknown ``kid``.** A token naming a key the set does not hold triggers at most one fetch per
  ``jwks_unknown_kid_interval_s`` (:meth:`~JwksCache.refresh_for_unknown_kid`): concurrent
  requests share the fetch in flight, and within the interval the answer is "unknown" at once,
  so a flood of random ``kid`` values costs the issuer one request per interval.
* **Rotation.** Every successful fetch replaces the set: a new key works as soon as it is
  fetched, a removed key stops working at once (``on_removed`` lets the owner drop results it
  cached from tokens signed with it).

A key is used only when it is a public signature key this gateway can check safely: ``kty``
``RSA`` (modulus ≥ 2048 bits), ``EC`` (P-256/384/521) or ``OKP`` (Ed25519/Ed448); ``use``, when
present, ``sig``; ``key_ops``, when present, includes ``verify``; no private members (a published
private key is compromised); ``alg``, when present, one of the issuer's ``algorithms``. ``oct``
(symmetric) keys are never used: an HMAC key in a public document is no secret. Other keys are
skipped and counted in the ``jwks_loaded`` log line; a set with no usable key is a failed fetch.
"""

from __future__ import annotations

import asyncio
import email.utils
import re
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from joserfc.jwk import ECKey, OKPKey, RSAKey

from gateway.background import Background
from gateway.config import IssuerConfig
from gateway.jsonkit.read import JsonError, answer, loads_object, peer_limits
from gateway.observability.logging import get_logger
from gateway.observability.metrics import Metrics
from gateway.outbound.client import Outbound
from gateway.outbound.failures import OutboundError
from gateway.retry import backoff_s, sleep_or_wake

__all__ = [
    "MAX_JWKS_BYTES",
    "MAX_KEYS",
    "JwksCache",
    "JwksFailed",
    "KeySet",
    "PublicKey",
    "parse_jwks",
    "refresh_interval",
]

PublicKey = RSAKey | ECKey | OKPKey

MAX_JWKS_BYTES: Final = 262_144
"""Largest key set read (256 KiB; Entra's is ~10 KiB)."""
MAX_KEYS: Final = 64
"""Keys kept from one set (the first ones; issuers publish a handful)."""
MAX_KID_CHARS: Final = 256
MIN_RSA_BITS: Final = 2048
"""RFC 8725 §3.5 / NIST SP 800-131A: shorter RSA keys are refused."""
MAX_RETRY_S: Final = 60.0
_KTY_CURVES: Final[Mapping[str, frozenset[str]]] = {
    "EC": frozenset({"P-256", "P-384", "P-521"}),
    "OKP": frozenset({"Ed25519", "Ed448"}),
}
_PRIVATE_MEMBERS: Final = frozenset({"d", "p", "q", "dp", "dq", "qi", "oth", "k"})
_MAX_AGE: Final = re.compile(r"(?:^|,)\s*max-age\s*=\s*\"?(\d{1,10})\"?\s*(?:,|$)", re.IGNORECASE)
_LIMITS: Final = peer_limits(6)

_log = get_logger("gateway.auth")


def key_type_for(alg: str) -> tuple[str, frozenset[str] | None]:
    """(``kty``, allowed ``crv`` values or None) a key must have to verify ``alg``."""
    if alg[:2] in ("RS", "PS"):
        return "RSA", None
    if alg.startswith("ES"):
        return "EC", frozenset({{"ES256": "P-256", "ES384": "P-384", "ES512": "P-521"}[alg]})
    if alg == "EdDSA":
        return "OKP", _KTY_CURVES["OKP"]
    return "OKP", frozenset({alg})  # RFC 9864: Ed25519, Ed448


@dataclass(frozen=True, slots=True)
class _Entry:
    key: PublicKey
    kty: str
    curve: str | None
    alg: str | None


@dataclass(frozen=True, slots=True)
class KeySet:
    """An immutable, vetted key set (one successful fetch)."""

    entries: tuple[_Entry, ...] = ()
    by_kid: Mapping[str, tuple[_Entry, ...]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.entries)

    @property
    def kids(self) -> frozenset[str]:
        return frozenset(self.by_kid)

    def knows(self, kid: str | None) -> bool:
        """Whether a lookup for ``kid`` has candidates (no ``kid``: the set has keys)."""
        return bool(self.entries) if kid is None else kid in self.by_kid

    def find(self, kid: str | None, alg: str) -> PublicKey | None:
        """The key for a token's ``kid`` and ``alg``: the right type (and curve), and the same
        ``alg`` when the key declares one. Without ``kid``, only a set with exactly one such key
        answers (RFC 7517 §4.5: the choice would otherwise be a guess)."""
        kty, curves = key_type_for(alg)
        candidates = self.entries if kid is None else self.by_kid.get(kid, ())
        fitting = [
            e
            for e in candidates
            if e.kty == kty
            and (curves is None or e.curve in curves)
            and (e.alg is None or e.alg == alg)
        ]
        if kid is None and len(fitting) != 1:
            return None
        return fitting[0].key if fitting else None


class JwksFailed(Exception):
    """A fetch gave no usable key set; the message is fixed and safe to log."""


def _vet(member: Any, algorithms: Collection[str]) -> _Entry | None:
    if not isinstance(member, dict):
        return None
    kty, kid = member.get("kty"), member.get("kid")
    if kty not in ("RSA", "EC", "OKP") or _PRIVATE_MEMBERS & member.keys():
        return None
    if kid is not None and (not isinstance(kid, str) or not 0 < len(kid) <= MAX_KID_CHARS):
        return None
    if member.get("use", "sig") != "sig":
        return None
    ops = member.get("key_ops")
    if ops is not None and (not isinstance(ops, list) or "verify" not in ops):
        return None
    alg = member.get("alg")
    if alg is not None and alg not in algorithms:
        return None
    curve = member.get("crv")
    if kty in _KTY_CURVES and curve not in _KTY_CURVES[kty]:
        return None
    try:
        key: PublicKey
        if kty == "RSA":
            key = RSAKey.import_key(member)
            if key.raw_value.key_size < MIN_RSA_BITS:
                return None
        elif kty == "EC":
            key = ECKey.import_key(member)
        else:
            key = OKPKey.import_key(member)
    except Exception:  # joserfc/cryptography raise several types for a malformed key
        return None
    return _Entry(key, kty, curve if isinstance(curve, str) else None, alg)


def parse_jwks(body: bytes, algorithms: Collection[str]) -> tuple[KeySet, int]:
    """(vetted key set, number of keys skipped); raise JwksFailed when nothing is usable."""
    try:
        doc = loads_object(body, _LIMITS)
    except JsonError:
        raise JwksFailed("jwks is not a JSON object") from None
    return _key_set(doc, algorithms)


def _key_set(doc: Mapping[str, Any], algorithms: Collection[str]) -> tuple[KeySet, int]:
    """:func:`parse_jwks` of a JWK Set already read."""
    members = doc.get("keys")
    if not isinstance(members, list):
        raise JwksFailed("jwks has no keys array")
    entries: list[_Entry] = []
    by_kid: dict[str, list[_Entry]] = {}
    for member in members[:MAX_KEYS]:
        entry = _vet(member, algorithms)
        if entry is None:
            continue
        entries.append(entry)
        if isinstance(member.get("kid"), str):
            by_kid.setdefault(member["kid"], []).append(entry)
    if not entries:
        raise JwksFailed("jwks holds no usable signature key")
    keys = KeySet(tuple(entries), {kid: tuple(found) for kid, found in by_kid.items()})
    return keys, len(members) - len(entries)


def refresh_interval(headers: Mapping[str, str], *, lower: float, upper: float) -> float:
    """Seconds until the next scheduled fetch, from the response's cache headers (RFC 9111
    §5.2.2.1 ``max-age``, §5.3 ``Expires``), clamped to ``[lower, upper]``."""
    control = headers.get("Cache-Control", "")
    lowered = control.lower()
    if "no-store" in lowered or "no-cache" in lowered:
        return lower
    found = _MAX_AGE.search(control)
    seconds: float | None = float(found.group(1)) if found else None
    if seconds is None and headers.get("Expires"):
        try:
            expires = email.utils.parsedate_to_datetime(headers["Expires"]).timestamp()
        except (TypeError, ValueError, IndexError, OverflowError):
            expires = 0.0  # RFC 9111 §5.3: an invalid date means "already expired"
        seconds = expires - time.time()
    if seconds is None:
        return upper
    return min(max(seconds, lower), upper)


class JwksCache:
    """See the module docstring. ``uri`` may be set later (from discovered metadata)."""

    def __init__(
        self,
        issuer: IssuerConfig,
        outbound: Outbound,
        *,
        destination: str = "issuer",
        metrics: Metrics | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        retry_s: float = 1.0,
        on_removed: Callable[[], None] | None = None,
    ) -> None:
        self._issuer = issuer
        self._outbound = outbound
        self._destination = destination
        self._metrics = metrics
        self._monotonic = monotonic
        self._retry_s = retry_s
        self._on_removed = on_removed
        self.uri: str | None = issuer.jwks_uri
        self.keys = KeySet()
        self.fetches = 0
        """Fetch attempts so far (tests, metrics)."""
        self.last_error: str | None = None
        self._next_in: float = 0.0
        self._fetching: asyncio.Task[bool] | None = None
        self._kid_fetch_at: float | None = None
        self._loop = Background(f"jwks-refresh:{issuer.url}")
        self._wake = asyncio.Event()

    @property
    def ready(self) -> bool:
        """True once a fetch yielded a usable key set (kept through later failures)."""
        return len(self.keys) > 0

    def set_uri(self, uri: str) -> None:
        """Use ``uri`` from now on (metadata named a new one: fetch at once)."""
        if uri != self.uri:
            self.uri = uri
            self._wake.set()

    async def start(self) -> None:
        """Fetch once (if the URI is known) and start the refresher; never raises."""
        if self._loop.started:
            return
        if self.uri is not None:
            await self.fetch()
        self._loop.start(self._refresh_loop)

    async def close(self) -> None:
        await self._loop.close()
        fetching, self._fetching = self._fetching, None
        if fetching is not None:
            fetching.cancel()
            await asyncio.gather(fetching, return_exceptions=True)

    async def fetch(self) -> bool:
        """Fetch now, or join the fetch in flight; True when it yielded a usable set."""
        if self._fetching is None or self._fetching.done():
            self._fetching = asyncio.get_running_loop().create_task(self._fetch())
        return await asyncio.shield(self._fetching)

    async def refresh_for_unknown_kid(self) -> None:
        """Refresh because a token named a key we lack: at most once per interval (the flight
        in progress is joined; otherwise the answer stays "unknown" until the interval ends)."""
        if self._fetching is not None and not self._fetching.done():
            await asyncio.shield(self._fetching)
            return
        now = self._monotonic()
        interval = self._issuer.jwks_unknown_kid_interval_s
        if self._kid_fetch_at is not None and now - self._kid_fetch_at < interval:
            return
        self._kid_fetch_at = now
        await self.fetch()

    async def _fetch(self) -> bool:
        uri = self.uri
        if uri is None:
            return False
        self.fetches += 1
        try:
            keys, skipped, next_in = await self._download(uri)
        except JwksFailed as exc:
            self.last_error = str(exc)
            self._count("failure")
            _log.error(
                "jwks_fetch_failed",
                issuer=self._issuer.url,
                jwks_uri=uri,
                reason=str(exc),
                keeping_keys=len(self.keys),
            )
            return False
        removed = self.keys.kids - keys.kids
        if self.keys.kids != keys.kids or len(self.keys) != len(keys):
            _log.info(
                "jwks_loaded",
                issuer=self._issuer.url,
                jwks_uri=uri,
                keys=len(keys),
                skipped=skipped,
                added=len(keys.kids - self.keys.kids),
                removed=len(removed),
            )
        had_keys = self.ready
        self.keys, self.last_error, self._next_in = keys, None, next_in
        self._count("success")
        if had_keys and removed and self._on_removed is not None:
            self._on_removed()
        return True

    async def _download(self, uri: str) -> tuple[KeySet, int, float]:
        try:
            response = await self._outbound.request(
                self._destination,
                "GET",
                uri,
                timeout_s=self._issuer.timeout_s,
                headers={"Accept": "application/jwk-set+json, application/json"},
                max_body=MAX_JWKS_BYTES,
                span="mcp_gateway.jwks_fetch",
            )
        except OutboundError:
            raise JwksFailed("jwks unreachable") from None
        if response.status != 200:
            raise JwksFailed("jwks answered an error status")
        try:
            # RFC 7517 §8.5: application/jwk-set+json; application/json is what most serve.
            doc = answer(response.content_type, response.body, _LIMITS)
        except JsonError as exc:
            raise JwksFailed(
                "jwks is not JSON" if exc.kind == "content_type" else "jwks is not a JSON object"
            ) from None
        keys, skipped = _key_set(doc, self._issuer.algorithms)
        interval = refresh_interval(
            response.headers,
            lower=self._issuer.jwks_min_refresh_s,
            upper=self._issuer.jwks_max_refresh_s,
        )
        return keys, skipped, interval

    async def _refresh_loop(self) -> None:
        failures = 0 if self.ready or self.uri is None else 1
        while True:
            if failures:
                delay = backoff_s(failures, self._retry_s, MAX_RETRY_S)
            else:
                delay = self._next_in or self._issuer.jwks_max_refresh_s
            self._wake.clear()
            await sleep_or_wake(self._wake, delay)
            try:
                ok = await self.fetch()
            except Exception:  # a bug must not end the refresher: keep retrying, loudly
                _log.exception("jwks_refresh_crashed", issuer=self._issuer.url)
                ok = False
            failures = 0 if ok else failures + 1

    def _count(self, result: str) -> None:
        if self._metrics is not None:
            self._metrics.jwks_fetch_total.labels(result=result).inc()
