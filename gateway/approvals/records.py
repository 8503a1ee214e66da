"""What an approval record holds (docs/policy.md#approvals): the call's binding and its digest,
the deterministic redacted preview and its hash, who may decide, the times; as canonical JSON
(:mod:`gateway.jsonkit.write`), so every replica reads and hashes it alike.

The preview is the call's arguments with each ``preview.redact`` path (an argument name, or a
dotted path into nested objects) replaced by ``"[redacted]"``; its hash is the SHA-256 of its
canonical JSON, shown on the page next to it. The record's digest (SHA-256 of its canonical
body, hex) links its audit events; its binding's digest indexes it for the retry of the same
call.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from gateway.jsonkit.read import loads_object
from gateway.jsonkit.write import canonical
from gateway.seams import ApprovalBinding, ApprovalRule

__all__ = ["REDACTED", "RecordBody", "binding_digest", "record_digest", "redacted_preview"]

REDACTED: Final = "[redacted]"


def binding_digest(binding: ApprovalBinding) -> str:
    """SHA-256 (hex) of the binding's canonical JSON: one value per exact call."""
    return hashlib.sha256(canonical(_binding_object(binding))).hexdigest()


def _binding_object(binding: ApprovalBinding) -> dict[str, Any]:
    return {
        "iss": binding.issuer,
        "sub": binding.subject,
        "cid": binding.client_id,
        "be": binding.backend,
        "tool": binding.tool,
        "args": binding.arguments,
        "pv": binding.policy_version,
        "pin": binding.catalog_pin,
    }


def redacted_preview(arguments: Mapping[str, Any], redact: tuple[str, ...]) -> dict[str, Any]:
    """The arguments with each ``redact`` path's value replaced (paths not present: nothing)."""
    preview: dict[str, Any] = _copy(arguments)
    for path in redact:
        parts = path.split(".")
        node: Any = preview
        for part in parts[:-1]:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict) and parts[-1] in node:
            node[parts[-1]] = REDACTED
    return preview


def _copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _copy(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_copy(v) for v in value]
    return value


@dataclass(frozen=True, slots=True)
class RecordBody:
    """The immutable part of a record (the store's ``body``)."""

    binding: ApprovalBinding
    rule: ApprovalRule
    preview: Mapping[str, Any]
    created_at: int
    expires_at: int

    @property
    def preview_text(self) -> str:
        return canonical(dict(self.preview)).decode()

    @property
    def preview_sha256(self) -> str:
        return hashlib.sha256(canonical(dict(self.preview))).hexdigest()

    def encode(self) -> bytes:
        rule = self.rule
        return canonical(
            {
                "b": _binding_object(self.binding),
                "by": rule.by,
                "claim": rule.claim,
                "value": rule.value,
                "ttl": rule.ttl_s,
                "redact": list(rule.redact),
                "preview": dict(self.preview),
                "iat": self.created_at,
                "exp": self.expires_at,
            }
        )

    @classmethod
    def decode(cls, body: bytes) -> RecordBody:
        """Raises ``ValueError`` for a body this module did not write."""
        try:
            obj = loads_object(body)
            b = obj["b"]
            binding = ApprovalBinding(
                issuer=b["iss"],
                subject=b["sub"],
                client_id=b["cid"],
                backend=b["be"],
                tool=b["tool"],
                arguments=b["args"],
                policy_version=b["pv"],
                catalog_pin=b["pin"],
            )
            rule = ApprovalRule(
                by=obj["by"],
                claim=obj["claim"],
                value=obj["value"],
                ttl_s=obj["ttl"],
                redact=tuple(obj["redact"]),
            )
            return cls(binding, rule, obj["preview"], obj["iat"], obj["exp"])
        except (KeyError, TypeError) as exc:
            raise ValueError("not an approval record body") from exc


def record_digest(body: bytes) -> str:
    """SHA-256 (hex) of a record's body: the link between its audit events."""
    return hashlib.sha256(body).hexdigest()
