"""MCP 2026-07-28 multi round-trip requests: the wire rules for relaying input rounds.

basic/patterns/mrtr.mdx: a ``tools/call`` may be answered with an ``InputRequiredResult``
(``resultType: "input_required"``, ``inputRequests`` and/or ``requestState``); the client fulfils
the requests and calls again with ``inputResponses`` and the ``requestState``. This module checks
both directions against the official schema definitions (packaged verbatim as
``gateway/schema/mcp-input-requests.schema.json``, see ``scripts/extract_input_schema.py``) and
rebuilds what it passes on from plain parsed JSON (canonical forwarding):

- :func:`parse_input_required`: an upstream result. Only the three request kinds the spec allows
  (``elicitation/create``, ``sampling/createMessage``, ``roots/list``; mrtr.mdx §Server
  Requirements 2), each valid against its schema definition, at most :data:`MAX_REQUESTS`,
  printable keys of at most :data:`MAX_KEY_CHARS` characters, nesting at most :data:`MAX_DEPTH`;
  a URL-mode elicitation must point at an ``http(s)`` URL; at least one of ``inputRequests`` and
  ``requestState`` (requirement 6); the state bounded by ``max_state_bytes``.
- :func:`required_capabilities`: what a request needs that the client did not declare
  (requirement 7; client/elicitation.mdx, client/sampling.mdx, client/roots.mdx §Capabilities).
- :func:`check_input_responses`: a client's ``inputResponses``: each answer to a key the sealed
  round asked for must be the result type of that kind (mrtr.mdx §Error Handling: validate);
  keys the round did not ask for are dropped (the server SHOULD ignore what it does not
  recognise).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any, Final
from urllib.parse import urlsplit

import jsonschema_rs

from gateway.errors import InvalidRequestState
from gateway.jsonkit.read import UNBOUNDED, loads, peer_limits

__all__ = [
    "DISABLED_TEXT",
    "KINDS",
    "LEGACY_CLIENT_TEXT",
    "MAX_DEPTH",
    "MAX_KEY_CHARS",
    "MAX_REQUESTS",
    "SEAL_FAILED_TEXT",
    "TOO_MANY_ROUNDS_TEXT",
    "InputRound",
    "InvalidInputRequired",
    "check_input_responses",
    "known_kind_responses",
    "parse_input_required",
    "required_capabilities",
]

KINDS: Final = ("elicitation/create", "roots/list", "sampling/createMessage")
"""The request kinds an ``InputRequests`` map may hold (schema ``InputRequest``)."""
MAX_REQUESTS: Final = 16
"""Input requests one round may carry."""
MAX_KEY_CHARS: Final = 64
"""Longest ``inputRequests`` key (server-assigned identifier)."""
MAX_DEPTH: Final = 32
"""Deepest nesting of one input request (the client-side decoder's default cap)."""

LEGACY_CLIENT_TEXT: Final = (
    "This tool needs input from the user (elicitation, sampling or roots); use a client that "
    "supports MCP 2026-07-28 input requests"
)
"""The tool error a legacy-era client gets when the upstream asks for input."""
DISABLED_TEXT: Final = (
    "This tool needs input from the user (elicitation, sampling or roots), which this gateway "
    "is not configured to relay"
)
"""The tool error for every input round while ``input_requests`` is not configured."""
TOO_MANY_ROUNDS_TEXT: Final = "The tool asked for input more times than the gateway allows"
SEAL_FAILED_TEXT: Final = "The tool's input request is too large for the gateway to relay"

_REQUEST_DEFS: Final = {
    "elicitation/create": "ElicitRequest",
    "sampling/createMessage": "CreateMessageRequest",
    "roots/list": "ListRootsRequest",
}
_RESULT_DEFS: Final = {
    "elicitation/create": "ElicitResult",
    "sampling/createMessage": "CreateMessageResult",
    "roots/list": "ListRootsResult",
}
_ELICITATION_MODES: Final = ("form", "url")


class InvalidInputRequired(ValueError):
    """An upstream ``input_required`` result the gateway will not relay; ``reason`` is for logs."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class InputRound:
    """One validated upstream round: the requests to relay and the state to seal."""

    requests: dict[str, dict[str, Any]]
    """key -> ``{"method": ..., "params": ...}``, rebuilt (other members dropped)."""
    state: str | None

    @property
    def kinds(self) -> dict[str, str]:
        """key -> request method, the part of the round the sealed state remembers."""
        return {key: request["method"] for key, request in self.requests.items()}


@functools.cache
def _validators() -> dict[str, jsonschema_rs.Validator]:
    text = resources.files("gateway.schema").joinpath("mcp-input-requests.schema.json")
    document = loads(text.read_bytes(), peer_limits(UNBOUNDED))
    out: dict[str, jsonschema_rs.Validator] = {}
    for name in (*_REQUEST_DEFS.values(), *_RESULT_DEFS.values()):
        schema = {"$schema": document["$schema"], "$defs": document["$defs"]}
        schema["$ref"] = f"#/$defs/{name}"
        out[name] = jsonschema_rs.validator_for(
            schema, validate_formats=True, pattern_options=jsonschema_rs.RegexOptions()
        )
    return out


def parse_input_required(result: Mapping[str, Any], *, max_state_bytes: int) -> InputRound:
    """The relayable part of an upstream ``InputRequiredResult``; raises
    :class:`InvalidInputRequired` when any rule above is broken."""
    raw_requests = result.get("inputRequests")
    state = result.get("requestState")
    if raw_requests is None:
        raw_requests = {}
    if not isinstance(raw_requests, Mapping):
        raise InvalidInputRequired("inputRequests not an object")
    if state is not None:
        if not isinstance(state, str):
            raise InvalidInputRequired("requestState not a string")
        if len(state.encode("utf-8", "surrogatepass")) > max_state_bytes:
            raise InvalidInputRequired("requestState over max_state_bytes")
    if not raw_requests and state is None:
        raise InvalidInputRequired("neither inputRequests nor requestState")
    if len(raw_requests) > MAX_REQUESTS:
        raise InvalidInputRequired("too many inputRequests")
    validators = _validators()
    requests: dict[str, dict[str, Any]] = {}
    for key, request in raw_requests.items():
        if not (isinstance(key, str) and 0 < len(key) <= MAX_KEY_CHARS and key.isprintable()):
            raise InvalidInputRequired("inputRequests key")
        if not isinstance(request, Mapping):
            raise InvalidInputRequired("inputRequest not an object")
        method = request.get("method")
        definition = _REQUEST_DEFS.get(method) if isinstance(method, str) else None
        if definition is None:
            raise InvalidInputRequired("inputRequest kind")
        rebuilt: dict[str, Any] = {"method": method}
        if "params" in request:
            rebuilt["params"] = request["params"]
        if _depth(rebuilt) > MAX_DEPTH:
            raise InvalidInputRequired("inputRequest too deep")
        if not validators[definition].is_valid(rebuilt):
            raise InvalidInputRequired("inputRequest schema")
        if method == "elicitation/create" and not _safe_url(rebuilt["params"]):
            raise InvalidInputRequired("elicitation url scheme")
        requests[key] = _plain(rebuilt)
    return InputRound(requests=requests, state=state)


def required_capabilities(
    requests: Mapping[str, Mapping[str, Any]], declared: Mapping[str, Any]
) -> dict[str, Any]:
    """The ``ClientCapabilities`` the requests need beyond ``declared`` (empty when none).

    ``declared`` is the schema-known part of the client's declaration
    (:func:`gateway.protocol.capabilities.known_capabilities`). Elicitation: the request's
    ``mode`` (default ``form``); ``elicitation: {}`` declares form only. Sampling: ``sampling``,
    and ``sampling.tools`` when the request carries ``tools`` (a MUST in client/sampling.mdx).
    Roots: ``roots``.
    """
    needed: dict[str, dict[str, Any]] = {}
    for request in requests.values():
        method = request.get("method")
        params = request.get("params")
        params = params if isinstance(params, Mapping) else {}
        if method == "elicitation/create":
            mode = params.get("mode", "form")
            declared_modes = declared.get("elicitation")
            modes = (
                {m for m in _ELICITATION_MODES if m in declared_modes} or {"form"}
                if isinstance(declared_modes, Mapping)
                else set()
            )
            if mode not in modes:
                needed.setdefault("elicitation", {})[mode] = {}
        elif method == "sampling/createMessage":
            sampling = declared.get("sampling")
            if not isinstance(sampling, Mapping):
                needed.setdefault("sampling", {})
            if "tools" in params and not (isinstance(sampling, Mapping) and "tools" in sampling):
                needed.setdefault("sampling", {})["tools"] = {}
        elif method == "roots/list" and not isinstance(declared.get("roots"), Mapping):
            needed["roots"] = {}
    return {key: needed[key] for key in sorted(needed)}


def check_input_responses(responses: Mapping[str, Any], asked: Mapping[str, str]) -> dict[str, Any]:
    """The answers to the keys in ``asked`` (key -> request kind), each valid for its kind.

    Raises :class:`~gateway.errors.InvalidRequestState` (``responses_invalid``) for an answer of
    the wrong shape; answers to keys that were not asked are dropped.
    """
    validators = _validators()
    kept: dict[str, Any] = {}
    for key, answer in responses.items():
        kind = asked.get(key)
        if kind is None:
            continue
        if not validators[_RESULT_DEFS[kind]].is_valid(answer):
            raise InvalidRequestState("responses_invalid", detail=f"inputResponses: {kind}")
        kept[key] = _plain(answer)
    return kept


def known_kind_responses(responses: Mapping[str, Any]) -> dict[str, Any]:
    """The answers of a ``tasks/update`` that are some input request's result (an
    ``ElicitResult``, ``CreateMessageResult`` or ``ListRootsResult``), under printable keys of at
    most :data:`MAX_KEY_CHARS`; at most :data:`MAX_REQUESTS` are kept.

    The gateway keeps no state per task, so it cannot know which kind a key asked for; an answer
    that is no kind's result could not answer any, and is dropped like an answer to a key that
    is not outstanding (the tasks extension: a server SHOULD ignore those).
    """
    validators = [_validators()[name] for name in _RESULT_DEFS.values()]
    kept: dict[str, Any] = {}
    for key, answer in responses.items():
        if len(kept) >= MAX_REQUESTS:
            break
        if not (0 < len(key) <= MAX_KEY_CHARS and key.isprintable()):
            continue
        if any(validator.is_valid(answer) for validator in validators):
            kept[key] = _plain(answer)
    return kept


def _safe_url(params: Mapping[str, Any]) -> bool:
    """A URL-mode elicitation sends the user to ``http(s)`` only, nothing like ``javascript:``
    (client/elicitation.mdx §Security Considerations, Safe URL Handling)."""
    if params.get("mode") != "url":
        return True
    return urlsplit(params["url"]).scheme in ("https", "http")


def _depth(value: Any) -> int:
    """Nesting depth without recursion (a hostile upstream cannot exhaust the stack)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, Mapping):
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in item.values())
        elif isinstance(item, list):
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in item)
    return deepest


def _plain(value: Any) -> Any:
    """A private plain copy (dicts and lists), so nothing is shared with the parsed message."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value
