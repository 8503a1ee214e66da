"""What a caller is told when a ``user_oauth`` backend has no usable token of theirs
(:class:`~gateway.seams.ConsentNeeded`): the way to connect their account, in the form their
client can follow (docs/user-authorization.md#asking-for-consent).

* **2026-07-28, ``elicitation.url`` declared on the request** (client/elicitation.mdx, URL mode;
  basic/patterns/mrtr.mdx): an input-required result whose one input request is a URL
  elicitation to a fresh consent link (:class:`~gateway.seams.ConsentLinks`: single use, short
  lived, on the origin of ``resource``, nothing but a random nonce in it), with a sealed
  ``requestState`` bound to the caller, the tool, the arguments and the backend
  (:meth:`~gateway.http.methods.input_rounds.InputRounds.consent_round`). The client's retry
  (``action: accept``) calls the backend afresh: connected by then, the call goes through;
  not yet, it waits for the connection (:meth:`ConsentAnswers.waited`: a client accepts when
  the person agrees to open the link, before they are through) and calls once more, else
  another link. ``decline`` or ``cancel``: a tool error, nothing upstream.
* **2025-11-25** (its client/elicitation.mdx §URL Elicitation Required Error): the error
  ``-32042`` with that URL elicitation in ``data.elicitations`` (``url_elicitation_required``).
  Never on the 2026-07-28 path.
* **Every other client** (no ``elicitation.url``; 2025-06-18 and older): a ``tools/call`` gets a
  tool error whose text sends the person to the account page; other requests get
  ``upstream_connection_required`` (403) naming the backend and the account page.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, Final

from gateway.config import ServerInfo
from gateway.errors import GatewayError, UpstreamConnectionRequired, UrlElicitationRequired
from gateway.http.methods.input_rounds import CONSENT_KEY, InputRounds
from gateway.http.turn import Turn
from gateway.protocol.messages import McpMessage
from gateway.protocol.results import shape_call_result, tool_error_result
from gateway.seams import ConsentLinks, ConsentNeeded, Resume

__all__ = ["URL_ELICITATION_VERSION", "ConsentAnswers", "declares_url_elicitation"]

URL_ELICITATION_VERSION: Final = "2025-11-25"
"""The one legacy revision with URL elicitation (and its ``-32042``)."""
CONSENT_WAIT_S: Final = 30.0
"""Longest a retry of an accepted consent waits for the person to be through."""
ANSWER_MARGIN_S: Final = 1.0
"""Kept of the request's deadline to answer after the wait."""
_WHY: Final[Mapping[str, str]] = {
    "missing": "is not connected",
    "expired": "has expired",
    "revoked": "is no longer accepted by that service",
    "rejected": "is no longer accepted by that service",
    "scope": "needs more access than it was given",
}


def declares_url_elicitation(capabilities: Mapping[str, Any]) -> bool:
    """Whether a request's client capabilities include ``elicitation.url`` (an object)."""
    elicitation = capabilities.get("elicitation")
    return isinstance(elicitation, Mapping) and isinstance(elicitation.get("url"), Mapping)


def _reason(needed: ConsentNeeded) -> str:
    return f"Your account for the {needed.backend} tools {_WHY.get(needed.reason, 'is needed')}"


class ConsentAnswers:
    """The answers of the module docstring (``links`` None: no ``user_oauth`` backend)."""

    def __init__(self, links: ConsentLinks | None, inputs: InputRounds, server: ServerInfo) -> None:
        self._links = links
        self._inputs = inputs
        self._server = server

    async def for_call(
        self, needed: ConsentNeeded, message: McpMessage, turn: Turn, after: Resume | None
    ) -> dict[str, Any]:
        """A ``tools/call``'s answer: the input-required result, or the tool error; raises
        ``url_elicitation_required`` for a 2025-11-25 client."""
        turn.ctx.outcome = "consent_required"
        turn.ctx.extra["consent"] = {"backend": needed.backend, "reason": needed.reason}
        links = self._links
        if links is None:
            return self._tool_error(message, f"{_reason(needed)}.")
        if message.era == "modern" and declares_url_elicitation(message.client_capabilities):
            link = await links.start(turn.principal, needed)
            shaped = self._inputs.consent_round(
                message,
                turn,
                url=link.url,
                text=self._message(needed),
                backend=needed.backend,
                after=after,
            )
            if shaped is not None:
                return shaped
        elif message.era == "legacy" and message.version == URL_ELICITATION_VERSION:
            raise await self._elicitation_required(needed, turn)
        return self._tool_error(
            message,
            f"{_reason(needed)}. Connect it at {links.account_url} and call the tool again.",
        )

    async def refusal(self, needed: ConsentNeeded, message: McpMessage, turn: Turn) -> GatewayError:
        """The answer to any other request (``prompts/get``, ``resources/read``, a task
        request...): ``url_elicitation_required`` for a 2025-11-25 client, else
        ``upstream_connection_required``."""
        turn.ctx.extra["consent"] = {"backend": needed.backend, "reason": needed.reason}
        if (
            self._links is not None
            and message.era == "legacy"
            and message.version == URL_ELICITATION_VERSION
        ):
            return await self._elicitation_required(needed, turn)
        data: dict[str, Any] = {"backend": needed.backend, "reason": needed.reason}
        if self._links is not None:
            data["account"] = self._links.account_url
        return UpstreamConnectionRequired(data=data)

    async def waited(self, needed: ConsentNeeded, turn: Turn, after: Resume | None) -> bool:
        """On the retry of an accepted consent round (the client retries as soon as the person
        agreed to open the link): wait until the person's record changes, at most
        :data:`CONSENT_WAIT_S` and never past the request's deadline (less a margin to answer);
        whether it changed (then the call is made once more). The store tells every replica of
        a change, so the connection may complete at any."""
        if self._links is None or after is None or not after.consent:
            return False
        timeout = min(CONSENT_WAIT_S, turn.deadline - time.monotonic() - ANSWER_MARGIN_S)
        if timeout <= 0:
            return False
        return await self._links.changed(turn.principal, needed.backend, timeout)

    def declined(self, resume: Resume, message: McpMessage, turn: Turn) -> dict[str, Any] | None:
        """The retry of a consent round: None when the person accepted (call the backend
        again), else the tool error of a declined or cancelled consent."""
        answer = (resume.responses or {}).get(CONSENT_KEY)
        action = answer.get("action") if isinstance(answer, Mapping) else None
        if action == "accept":
            return None
        turn.ctx.outcome = "input_refused"
        return self._tool_error(
            message, f"Connecting your account for the {resume.backend} tools was not accepted."
        )

    async def _elicitation_required(
        self, needed: ConsentNeeded, turn: Turn
    ) -> UrlElicitationRequired:
        assert self._links is not None
        link = await self._links.start(turn.principal, needed)
        elicitation = {
            "mode": "url",
            "elicitationId": link.id,
            "url": link.url,
            "message": self._message(needed),
        }
        turn.ctx.outcome = "consent_required"
        return UrlElicitationRequired(data={"elicitations": [elicitation]})

    @staticmethod
    def _message(needed: ConsentNeeded) -> str:
        return f"{_reason(needed)}: open the link to connect it, then continue."

    def _tool_error(self, message: McpMessage, text: str) -> dict[str, Any]:
        return shape_call_result(tool_error_result(text), era=message.era, server=self._server)
