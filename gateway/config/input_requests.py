"""The ``input_requests:`` section: relaying 2026-07-28 input requests with a sealed state.

MCP 2026-07-28 basic/patterns/mrtr.mdx: an upstream's ``requestState`` comes back through the
client, so the gateway wraps it in an AEAD envelope (:mod:`gateway.protocol.sealed_state`) under
keys given here. The keys are shared configuration: every replica with the same keys can open
every other replica's state (no server-side state). Rotation: add the new key, point
``seal_key_id`` at it (the default is the first listed key), and drop the old key once ``ttl_s``
has passed; every listed key opens.

Checked at load: each key decodes (base64, base64url or hex) to exactly 32 bytes, ids are unique,
and ``seal_key_id`` names a listed key. A warning when the largest possible sealed state would
not fit ``limits.json.max_string_bytes``: the client must be able to send it back, so a round
whose sealed state would be longer is refused as a tool error instead of relayed.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import replace
from typing import Any, Final

from gateway.config.builder import Builder
from gateway.config.declare import fill
from gateway.config.limits_model import JsonLimits
from gateway.config.model import InputRequestsConfig, SealKey
from gateway.yaml_source import PathPart

__all__ = [
    "KEY_BYTES",
    "MAX_CLAIMS_BYTES",
    "build_input_requests",
    "decode_seal_key",
    "max_sealed_chars",
    "read_seal_keys",
]

KEY_BYTES: Final = 32
"""AES-256-GCM key size."""
MAX_CLAIMS_BYTES: Final = 4096
"""Largest bindings object (canonical JSON) a sealed state carries besides the upstream's state."""
ENVELOPE_OVERHEAD: Final = 2 + 16 + 12 + 16 + 1
"""Version, key-id length, key id (at most 16), nonce, tag, and the claims/state separator."""
_HEX: Final = re.compile(r"[0-9a-fA-F]{64}")
_BASE64: Final = re.compile(r"[A-Za-z0-9+/_-]{43}=?")


def max_sealed_chars(max_state_bytes: int) -> int:
    """Longest sealed ``requestState`` text for upstream states up to ``max_state_bytes``."""
    raw = ENVELOPE_OVERHEAD + MAX_CLAIMS_BYTES + max_state_bytes
    return (raw * 4 + 2) // 3  # base64url without padding


def decode_seal_key(text: str) -> bytes | None:
    """32 key bytes from 64 hex digits or 43/44 base64/base64url characters, else None."""
    value = text.strip()
    if _HEX.fullmatch(value):
        return bytes.fromhex(value)
    if not _BASE64.fullmatch(value):
        return None
    standard = value.rstrip("=").replace("-", "+").replace("_", "/")
    try:
        key = base64.b64decode(standard + "=", validate=True)
    except (binascii.Error, ValueError):
        return None
    # One spelling per key: non-zero padding bits are refused (RFC 4648 §3.5).
    if base64.b64encode(key).decode().rstrip("=") != standard:
        return None
    return key if len(key) == KEY_BYTES else None


def read_seal_keys(
    b: Builder, raw: dict[str, Any], where: tuple[PathPart, ...]
) -> tuple[tuple[SealKey, ...], str]:
    """The ``seal_keys`` of the section ``raw`` at ``where`` (each decoded, ids unique) and its
    ``seal_key_id`` (default: the first key; it must name one of them)."""
    keys: list[SealKey] = []
    seen: set[str] = set()
    for index, entry in enumerate(raw.get("seal_keys", [])):
        kp: tuple[PathPart, ...] = (*where, "seal_keys", index)
        key_id = entry["id"]
        if key_id in seen:
            b.doc.problem((*kp, "id"), "duplicate key id")
        seen.add(key_id)
        secret = b.secret(entry["key"], (*kp, "key"))
        if secret is None:
            continue
        # Not read (check --skip-secrets): a placeholder of the right size stands in for it.
        decoded = bytes(KEY_BYTES) if secret.skipped else decode_seal_key(secret.reveal())
        if decoded is None:
            # The problem names the rule, never the value.
            b.doc.problem(
                (*kp, "key"),
                "must be 32 random bytes as base64 or hex (e.g. openssl rand -base64 32)",
            )
            continue
        keys.append(SealKey(id=key_id, key=decoded))
    seal_key_id = raw.get("seal_key_id", keys[0].id if keys else "")  # default: the first key
    if "seal_key_id" in raw and seal_key_id not in seen:
        b.doc.problem((*where, "seal_key_id"), "must be the id of one of seal_keys")
    return tuple(keys), seal_key_id


def build_input_requests(
    b: Builder, raw: dict[str, Any], json_limits: JsonLimits
) -> InputRequestsConfig:
    if not raw:
        return InputRequestsConfig()
    ip: tuple[PathPart, ...] = ("input_requests",)
    config = fill(b, InputRequestsConfig, raw, ip, leave=("seal_keys", "seal_key_id"))
    keys, seal_key_id = read_seal_keys(b, raw, ip)
    if config.enabled and "seal_keys" not in raw:
        b.doc.problem(ip, "needs seal_keys (or enabled: false)")
    sealed = max_sealed_chars(config.max_state_bytes)
    if config.enabled and sealed > json_limits.max_string_bytes:
        b.warnings.append(
            f"input_requests.max_state_bytes: a sealed state may be {sealed} characters, more "
            f"than limits.json.max_string_bytes ({json_limits.max_string_bytes}); rounds whose "
            "sealed state would not fit are refused as tool errors"
        )
    return replace(config, seal_keys=keys, seal_key_id=seal_key_id)
