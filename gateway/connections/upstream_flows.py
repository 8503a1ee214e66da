"""One authorization at an upstream's server in progress: what the answer must match.

Started at the connect page (:mod:`.connect_pages`) for the signed-in person, who is the MCP
caller the link was for (the pending action's owner). The flow is kept in the shared store
(:mod:`gateway.state.browser_records`: the memory of one replica, or Redis) under the digest of
its ``state`` parameter, bound to that person (their owner digest), for ``user_oauth
.consent_ttl_s``; its body is sealed (:mod:`gateway.sealing`, label
``mcp-gateway/upstream-flow/v1`` under ``user_oauth.seal_keys``, the store key as associated
data), because it holds the PKCE verifier. :meth:`Flows.take` hands it out once (at any
replica), and only to the same person; an answer whose ``state`` is unknown, expired, used or
another person's is ``connect_state_invalid``, and nothing is stored.

The flow records, before the browser leaves, what RFC 9207 and MCP's authorization spec need
at the answer: the server's issuer identifier from its validated metadata, whether it
advertises ``iss`` in its answers, the client id the code is for, and the verifier.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from gateway.config import SealKey
from gateway.errors import ConnectStateInvalid, ConnectUnavailable
from gateway.jsonkit.read import JsonError, loads_object
from gateway.jsonkit.write import canonical
from gateway.login.cookies import random_token
from gateway.login.person import BrowserIdentity
from gateway.sealing import EnvelopeError, SealRing, envelope_chars
from gateway.state.browser_records import BrowserState
from gateway.state.store import StoreUnavailable

__all__ = ["FLOW_LABEL", "Flow", "Flows"]

FLOW_LABEL: Final = b"mcp-gateway/upstream-flow/v1"
_MAX_FLOW: Final = 4096
RETRY_AFTER_S: Final = 2


@dataclass(frozen=True, slots=True)
class Flow:
    backend: str
    server: str
    """The authorization server's issuer identifier, from its validated metadata."""
    iss_required: bool
    """The server advertises ``authorization_response_iss_parameter_supported``."""
    client_id: str
    verifier: str = field(repr=False)
    """The PKCE code verifier (RFC 7636)."""
    scope: str
    started: int

    def to_json(self) -> bytes:
        return canonical(
            {
                "be": self.backend,
                "as": self.server,
                "iss": self.iss_required,
                "cid": self.client_id,
                "pkce": self.verifier,
                "scope": self.scope,
                "at": self.started,
            }
        )

    @classmethod
    def from_json(cls, body: bytes) -> Flow:
        obj: dict[str, Any] = loads_object(body)
        return cls(
            backend=str(obj["be"]),
            server=str(obj["as"]),
            iss_required=obj["iss"] is True,
            client_id=str(obj["cid"]),
            verifier=str(obj["pkce"]),
            scope=str(obj["scope"]),
            started=int(obj["at"]),
        )


def _key(state: str) -> str:
    return hashlib.sha256(f"upstream-state:{state}".encode()).hexdigest()


class Flows:
    """Authorizations in progress (module docstring)."""

    def __init__(
        self,
        store: BrowserState,
        keys: Sequence[SealKey],
        seal_key_id: str,
        *,
        resource: str,
        ttl_s: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._ring = SealRing(keys, seal_key_id, label=FLOW_LABEL, resource=resource)
        self._ttl_s = ttl_s
        self._clock = clock
        self._max_chars = envelope_chars(_MAX_FLOW)

    async def begin(self, identity: BrowserIdentity, flow: Flow) -> str:
        """Keep ``flow`` for ``identity``; the ``state`` to send (32 random bytes)."""
        state = random_token()
        key = _key(state)
        sealed = self._ring.seal(flow.to_json(), context=key.encode("ascii"))
        try:
            stored = await self._store.put(
                key, identity.owner(), sealed.encode("ascii"), self._clock() + self._ttl_s
            )
        except StoreUnavailable:
            raise ConnectUnavailable(retry_after=RETRY_AFTER_S, detail="store") from None
        if not stored:  # 256 random bits: never, but fail closed all the same
            raise ConnectUnavailable(retry_after=RETRY_AFTER_S, detail="state collision")
        return state

    async def take(self, identity: BrowserIdentity, state: str) -> Flow | None:
        """The flow ``state`` names, once, for ``identity`` only; None when another person
        started it (it stays for its owner); raises ``connect_state_invalid`` when there is
        none (unknown, expired, used)."""
        if not 0 < len(state) <= 512:
            raise ConnectStateInvalid(detail="state missing or too long")
        key = _key(state)
        try:
            found = await self._store.read(key, identity.owner(), take=True)
        except StoreUnavailable:
            raise ConnectUnavailable(retry_after=RETRY_AFTER_S, detail="store") from None
        if found.found == "foreign":
            return None
        if found.body is None:
            raise ConnectStateInvalid(detail="state unknown, expired or used")
        try:
            body = self._ring.open(
                found.body.decode("ascii"), max_chars=self._max_chars, context=key.encode()
            )
            return Flow.from_json(body)
        except (EnvelopeError, JsonError, KeyError, TypeError, ValueError):
            raise ConnectStateInvalid(detail="flow does not open") from None
