"""The gateway's caller-assertion keys: the signing key of each backend and the published JWK Set.

**Rotation without restart.** A ``{file: ...}`` key is a :class:`~gateway.config.Secret`: its
file is stat()ed at most once a second (on use) and re-read when its modification time
changes. A new key that cannot be used (not a PEM private key, the wrong type for ``alg``, or
a different key under a fixed ``key_id``: one kid names one key, RFC 7517 §4.5) is refused
with an ``assertion_key_rejected`` error line, and the previous key keeps signing: a bad
rotation never breaks tool calls. The ``kid`` is the RFC 7638 thumbprint of the current key
unless ``key_id`` is set, so it changes with the key and verifiers that cache the JWK Set see
an unknown ``kid`` (their cue to fetch it again) rather than a bad signature.

**The JWK Set** (:class:`GatewayKeys`, ``/.well-known/jwks.json``) lists every backend's
current signing key (once per ``kid``) and the keys of the ``identity_jwks.publish_keys`` files
(the next key ahead of a rotation, the previous one after it), re-read the same way. Only
public halves are ever published.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final

from gateway import b64url
from gateway.config import AssertionConfig, Config, Secret
from gateway.config.signing_keys import (
    JoseKey,
    KeyProblem,
    parse_public_keys,
    parse_signing_key,
    public_jwk,
)
from gateway.jsonkit.write import compact
from gateway.observability.logging import get_logger

__all__ = ["ASSERTION_TYP", "AssertionKey", "GatewayKeys"]

ASSERTION_TYP: Final = "mcp-gateway-assertion+jwt"
"""The JOSE ``typ`` of a caller assertion (RFC 8725 §3.11: explicit typing, so an assertion
can never be mistaken for an access token or an ID token)."""

_log = get_logger("gateway.backend.identity")


class AssertionKey:
    """One signing key (``identity.assertion.key``), followed through rotations of its file."""

    __slots__ = ("_alg", "_fixed_kid", "_header", "_key", "_kid", "_pem", "_secret")

    def __init__(self, config: AssertionConfig) -> None:
        self._secret = config.key
        self._alg = config.alg
        self._fixed_kid = config.key_id
        self._pem = config.key.reveal()
        self._key = parse_signing_key(self._pem, self._alg)  # checked at load: a bug if it fails
        self._kid = self._fixed_kid or self._key.thumbprint()
        self._header = self._encode_header()

    @property
    def alg(self) -> str:
        return self._alg

    def _encode_header(self) -> bytes:
        # RFC 7515 §4.1: alg, kid and the dedicated typ; fixed per key, so encoded once.
        header = {"alg": self._alg, "kid": self._kid, "typ": ASSERTION_TYP}
        return b64url.encode_bytes(compact(header))

    def current(self) -> tuple[JoseKey, bytes]:
        """The key to sign with now and its encoded protected header."""
        pem = self._secret.current()
        if pem is not self._pem and pem != self._pem:
            self._rotate(pem)
        return self._key, self._header

    def _rotate(self, pem: str) -> None:
        self._pem = pem  # judged once: a refused file is not parsed again until it changes
        try:
            key = parse_signing_key(pem, self._alg)
        except KeyProblem as exc:
            _log.error("assertion_key_rejected", source=self._secret.source, reason=str(exc))
            return
        if self._fixed_kid is not None and key.thumbprint() != self._key.thumbprint():
            _log.error(
                "assertion_key_rejected",
                source=self._secret.source,
                reason="a different key under the fixed key_id (one kid names one key): "
                "remove key_id to rotate by file",
            )
            return
        old = self._kid
        self._key = key
        self._kid = self._fixed_kid or key.thumbprint()
        self._header = self._encode_header()
        _log.info("assertion_key_rotated", source=self._secret.source, kid=self._kid, previous=old)

    def public_jwk(self) -> dict[str, Any]:
        self.current()
        return public_jwk(self._key, self._alg, self._kid)


class _PublishedFile:
    """One ``identity_jwks.publish_keys`` file: its keys, re-read when it changes."""

    __slots__ = ("_jwks", "_secret", "_text")

    def __init__(self, path: Path) -> None:
        try:
            text, mtime = path.read_text(encoding="utf-8"), path.stat().st_mtime
        except (OSError, UnicodeDecodeError):
            text, mtime = "", None
        self._secret = Secret(text, f"file:{path}", mtime)
        self._text: str | None = None
        self._jwks: list[dict[str, Any]] = []

    def jwks(self) -> list[dict[str, Any]]:
        text = self._secret.current()
        if text != self._text:
            self._text = text
            try:
                self._jwks = [public_jwk(key, alg) for key, alg in parse_public_keys(text)]
            except KeyProblem as exc:
                # Keep publishing what was there: a half-written file must not drop keys.
                _log.error(
                    "published_key_file_rejected", source=self._secret.source, reason=str(exc)
                )
        return self._jwks


class GatewayKeys:
    """Every assertion key of the configuration and the JWK Set that publishes them."""

    def __init__(self, keys: dict[str, AssertionKey], published: Iterable[Path] = ()) -> None:
        self._by_backend = keys
        self._published = [_PublishedFile(path) for path in published]

    @classmethod
    def from_config(cls, config: Config) -> GatewayKeys:
        """One :class:`AssertionKey` per distinct key reference (backends sharing a key file
        share its rotation), and the ``publish_keys`` files."""
        shared: dict[tuple[str, str, str | None], AssertionKey] = {}
        keys: dict[str, AssertionKey] = {}
        for backend in config.backends:
            assertion = backend.identity.assertion
            if assertion is None:
                continue
            ref = (assertion.key.source, assertion.alg, assertion.key_id)
            if ref not in shared or ref[0] == "literal":
                shared[ref] = AssertionKey(assertion)
            keys[backend.name] = shared[ref]
        return cls(keys, config.identity_jwks.publish_keys)

    @property
    def enabled(self) -> bool:
        """Whether any backend signs assertions or any key is published."""
        return bool(self._by_backend or self._published)

    def for_backend(self, name: str) -> AssertionKey | None:
        return self._by_backend.get(name)

    def jwks(self) -> dict[str, Any]:
        """The JWK Set document (RFC 7517 §5): signing keys first, then the published ones,
        each ``kid`` once."""
        seen: dict[str, dict[str, Any]] = {}
        signing = {id(key): key for key in self._by_backend.values()}.values()
        for jwk in [key.public_jwk() for key in signing] + [
            jwk for published in self._published for jwk in published.jwks()
        ]:
            seen.setdefault(str(jwk["kid"]), jwk)
        return {"keys": list(seen.values())}
