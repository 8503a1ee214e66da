"""The gateway-sealed ``requestState`` of an input round (MCP 2026-07-28 basic/patterns/mrtr.mdx).

mrtr.mdx §Server Requirements 4-5: ``requestState`` comes back through the client, so it is
attacker-controlled input; a server MUST protect its integrity when it matters and SHOULD bind
it to the authenticated principal, a short expiry and the originating request. A backend behind
the gateway sees only the service credential and cannot bind anything to the user, so the
gateway wraps the upstream's state in an AEAD envelope that binds it (:mod:`gateway.sealing`, label
``mcp-gateway/requestState/v1``). The plaintext is the bindings as canonical
JSON, then, when the upstream sent one, a NUL byte and the upstream's state::

    {"v":1,"sub":..., "iss":..., "cid":..., "tool":..., "be":..., "args":..., "pv":...,
     "iat":..., "exp":..., "r":..., "req":{key: kind}, "st":..., ["c": true]}

(``c``: the gateway's own consent round for a ``user_oauth`` backend, which the gateway answers
itself; ``ap``: the gateway's own approval round, the id of the approval record it waits for.)

Everything is inside the ciphertext: the client learns nothing about the upstream's state or
the bindings, and AEAD makes every byte tamper-evident (rotation and key derivation: the ring's).
Opening checks authenticity only; :func:`check_bindings` compares the bindings with
the retry (expiry, subject, issuer, client id, tool, arguments, the owning backend); the backend
checks its own name again before it sends anything.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from gateway import b64url
from gateway.config import SealKey
from gateway.config.input_requests import MAX_CLAIMS_BYTES, max_sealed_chars
from gateway.errors import InvalidRequestState
from gateway.jsonkit.read import loads
from gateway.jsonkit.write import canonical
from gateway.sealing import (
    VERSION,
    ClaimField,
    EnvelopeError,
    SealRing,
    claims_from_wire,
    claims_to_wire,
    opened_claim,
)

__all__ = [
    "VERSION",
    "Binding",
    "Claims",
    "SealError",
    "Sealer",
    "arguments_digest",
    "check_bindings",
]

LABEL: Final = b"mcp-gateway/requestState/v1"


class SealError(ValueError):
    """The round cannot be sealed within the size bound (the round is not relayed)."""


@dataclass(frozen=True, slots=True)
class Claims:
    """What one sealed state binds and carries."""

    subject: str
    issuer: str
    client_id: str | None
    tool: str
    """The exposed tool name (as the client calls it)."""
    backend: str
    arguments: str
    """:func:`arguments_digest` of the original call's arguments."""
    policy_version: str
    """The policy in force when the round was sealed. For the audit trail only: a retry is
    judged by the policy in force when it arrives (policy is re-evaluated on every call)."""
    issued_at: int
    expires_at: int
    round: int
    requests: Mapping[str, str] = field(default_factory=dict)
    """key -> kind of each input request of the round (what an answer must be)."""
    state: str | None = None
    """The upstream's own ``requestState``."""
    consent: bool = False
    """The gateway's own round: a consent link to a ``user_oauth`` backend's account (nothing of
    it goes upstream; the retry calls the backend afresh)."""
    approval: str | None = None
    """The gateway's own approval round: the approval record the retry asks about (nothing of
    the round goes upstream; the call runs only once that record is approved)."""


@dataclass(frozen=True, slots=True)
class Binding:
    """The retry as the gateway authenticated and decoded it."""

    subject: str
    issuer: str
    client_id: str | None
    tool: str
    arguments: str
    backend: str = ""
    """The backend the tool routes to now; empty when not known (the backend checks itself)."""


def arguments_digest(arguments: Mapping[str, Any]) -> str:
    """SHA-256 of the arguments' canonical JSON (sorted keys, no whitespace), base64url."""
    digest = hashlib.sha256(canonical(dict(arguments))).digest()
    return b64url.encode(digest)


def check_bindings(claims: Claims, binding: Binding, now: float) -> None:
    """Raise ``InvalidRequestState`` (``expired`` / ``mismatch``) unless ``claims`` fit."""
    if not now < claims.expires_at:
        raise InvalidRequestState("expired", detail="requestState expired")
    for name, sealed, current in (
        ("subject", claims.subject, binding.subject),
        ("issuer", claims.issuer, binding.issuer),
        ("client_id", claims.client_id, binding.client_id),
        ("tool", claims.tool, binding.tool),
        ("arguments", claims.arguments, binding.arguments),
    ):
        if sealed != current:
            raise InvalidRequestState("mismatch", detail=f"requestState bound to another {name}")
    if binding.backend and claims.backend != binding.backend:
        raise InvalidRequestState("mismatch", detail="requestState bound to another backend")


class Sealer:
    """Seals and opens states under the configured keys (one seals, all open)."""

    def __init__(
        self,
        keys: Sequence[SealKey],
        seal_key_id: str,
        *,
        resource: str,
        max_state_bytes: int,
        max_text_chars: int | None = None,
    ) -> None:
        self._ring = SealRing(keys, seal_key_id, label=LABEL, resource=resource)
        self._max_state_bytes = max_state_bytes
        bound = max_sealed_chars(max_state_bytes)
        # A state the client could not send back (limits.json.max_string_bytes) is never issued.
        self._max_chars = bound if max_text_chars is None else min(bound, max_text_chars)

    @property
    def seal_key_id(self) -> str:
        return self._ring.seal_key_id

    def seal(self, claims: Claims) -> str:
        """The envelope text; raises :class:`SealError` past the size bounds."""
        body = canonical(_claims_object(claims))
        if len(body) > MAX_CLAIMS_BYTES:
            raise SealError("bindings over MAX_CLAIMS_BYTES")
        plaintext = body
        if claims.state is not None:
            state = claims.state.encode("utf-8", "surrogatepass")
            if len(state) > self._max_state_bytes:
                raise SealError("requestState over max_state_bytes")
            plaintext += b"\x00" + state
        text = self._ring.seal(plaintext)
        if len(text) > self._max_chars:
            raise SealError("sealed state longer than a client may send back")
        return text

    def open(self, text: str) -> Claims:
        """The claims of a state this gateway (or a replica with the same keys) sealed.

        Raises ``InvalidRequestState("invalid")`` for anything else: too long, not canonical
        base64url, unknown version or key id, or failed authentication. The reason goes to
        ``detail`` (logs) only.
        """
        try:
            plaintext = self._ring.open(text, max_chars=self._max_chars)
        except EnvelopeError as refused:
            raise _invalid(str(refused)) from None
        return _parse_claims(plaintext)


_FIELDS: Final = (
    ClaimField("subject", "sub", str),
    ClaimField("issuer", "iss", str),
    ClaimField("client_id", "cid", str, optional=True),
    ClaimField("tool", "tool", str),
    ClaimField("backend", "be", str),
    ClaimField("arguments", "args", str),
    ClaimField("policy_version", "pv", str),
    ClaimField("issued_at", "iat", int),
    ClaimField("expires_at", "exp", int),
    ClaimField("round", "r", int),
)
"""The claims written as they are; the requests, the state's presence, the consent and
approval marks are written and read below."""


def _claims_object(claims: Claims) -> dict[str, Any]:
    return {
        "v": VERSION,
        **claims_to_wire(claims, _FIELDS),
        "req": dict(claims.requests),
        "st": claims.state is not None,
        **({"c": True} if claims.consent else {}),
        **({"ap": claims.approval} if claims.approval is not None else {}),
    }


def _parse_claims(plaintext: bytes) -> Claims:
    # Only the gateway can produce an authentic plaintext; still, read it defensively.
    body, sep, state = plaintext.partition(b"\x00")
    try:
        obj = loads(body)
        decoded_state = state.decode("utf-8", "surrogatepass") if sep else None
        requests = opened_claim(obj["req"], dict)
        claims = Claims(
            **claims_from_wire(obj, _FIELDS),
            requests={str(k): opened_claim(v, str) for k, v in requests.items()},
            state=decoded_state,
            consent=obj.get("c") is True,
            approval=None if obj.get("ap") is None else opened_claim(obj["ap"], str),
        )
        if obj["v"] != VERSION or bool(obj["st"]) != (decoded_state is not None):
            raise ValueError("claims version or state flag")
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        raise _invalid("malformed claims") from None
    return claims


def _invalid(detail: str) -> InvalidRequestState:
    return InvalidRequestState("invalid", detail=detail)
