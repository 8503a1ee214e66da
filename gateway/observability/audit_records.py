"""What an audit event may carry of a call's parts: each a bounded record of fixed fields.

The front door notes what happened in ``RequestContext.extra`` (an input round, a token
exchange, the external decision point's say, a task); these functions keep of it only the
fields and values listed here, so nothing a client, an upstream or an issuer wrote reaches the
trail. Arguments appear only as their shape (key -> JSON type name), never their values.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final, get_args

from gateway.config import GUARDRAIL_NAME_PATTERN
from gateway.observability.metric_labels import GUARDRAIL_VERDICTS, TASK_EVENTS
from gateway.seams import GUARDED_CHECKS, HandleRefusal, TaskStatus

__all__ = [
    "TASK_EVENT_NAMES",
    "argument_shape",
    "exchange_record",
    "guardrail_records",
    "input_record",
    "pdp_record",
    "task_record",
]

_MAX_ARGUMENT_KEYS: Final = 64
_MAX_KEY_CHARS: Final = 64

_TYPE_NAMES: Final[Mapping[type, str]] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    type(None): "null",
    dict: "object",
    list: "array",
}


def argument_shape(arguments: Mapping[str, Any]) -> dict[str, str]:
    """The redacted form of tool arguments: top-level keys -> JSON type names, never values.

    At most 64 keys, each cut to 64 characters (the decoder's caps are larger; an audit record
    stays small).
    """
    shape: dict[str, str] = {}
    for index, (key, value) in enumerate(arguments.items()):
        if index >= _MAX_ARGUMENT_KEYS:
            shape["..."] = "truncated"
            break
        shape[str(key)[:_MAX_KEY_CHARS]] = _TYPE_NAMES.get(type(value), "object")
    return shape


_INPUT_FIELDS: Final[Mapping[str, type]] = {
    "round": int,
    "requested": list,
    "answers_round": int,
    "answered": list,
    "policy_changed": bool,
    "refused": str,
}
_INPUT_KINDS: Final = frozenset({"elicitation/create", "roots/list", "sampling/createMessage"})


def input_record(raw: Any) -> dict[str, Any] | None:
    """The audit form of an input round's record (``RequestContext.extra["input"]``).

    ``round``: the round relayed to the client (1 = the first request for input);
    ``requested``: the kinds it asks for; ``answers_round`` / ``answered``: the round a retry
    answered and the kinds it answered; ``policy_changed``: the policy version differs from the
    one the answered round was sealed under (the retry was judged by the current one);
    ``refused``: why a retry was refused (the ``invalid_request_state`` reason). Only these
    fields, only known kinds: nothing the client or upstream wrote reaches the trail.
    """
    if not isinstance(raw, Mapping):
        return None
    record: dict[str, Any] = {}
    for key, kind in _INPUT_FIELDS.items():
        value = raw.get(key)
        if isinstance(value, list):
            if kind is list:
                record[key] = sorted(item for item in value if item in _INPUT_KINDS)
        elif isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
            record[key] = value
    return record or None


_EXCHANGE_FIELDS: Final[Mapping[str, type | tuple[type, ...]]] = {
    "backend": str,
    "token_fp": str,
    "act": (str, type(None)),
    "exchanged": bool,
}


def exchange_record(raw: Any) -> dict[str, Any] | None:
    """The audit form of a call's token exchange (``RequestContext.extra["exchange"]``):
    ``backend``, ``token_fp`` (the exchanged token's fingerprint, like ``token_fp`` for the
    caller's), ``act`` (who the issuer named as actor, when known) and ``exchanged`` (false: the
    cached exchanged token was used). Never a token."""
    if not isinstance(raw, Mapping):
        return None
    record = {
        key: raw[key]
        for key, kind in _EXCHANGE_FIELDS.items()
        if key in raw and isinstance(raw[key], kind)
    }
    return record or None


_PDP_VALUES: Final[Mapping[str, frozenset[Any]]] = {
    "decision": frozenset({"allow", "deny", "error"}),
    "cached": frozenset({True, False}),
    "fallback": frozenset({"allow_local"}),
}


def pdp_record(raw: Any) -> dict[str, Any] | None:
    """The audit form of the external decision point's say (``RequestContext.extra["pdp"]``,
    ``policy_external``): ``decision`` (allow, deny, error), ``cached`` (from the decision
    cache) and, when it failed under ``on_error: allow_local``, ``fallback``."""
    if not isinstance(raw, Mapping):
        return None
    record = {
        key: raw[key]
        for key, allowed in _PDP_VALUES.items()
        if key in raw and type(raw[key]) in (str, bool) and raw[key] in allowed
    }
    return record or None


_GUARDRAIL_VALUES: Final[Mapping[str, frozenset[str]]] = {
    "check": frozenset(GUARDED_CHECKS),
    "verdict": frozenset(GUARDRAIL_VERDICTS),
    "fallback": frozenset({"allow"}),
}
_GUARDRAIL_NAME: Final = re.compile(GUARDRAIL_NAME_PATTERN)
_MAX_GUARDRAIL_RECORDS: Final = 32


def guardrail_records(raw: Any) -> list[dict[str, str]] | None:
    """The audit form of the processors' verdicts (``RequestContext.extra["guardrails"]``):
    per verdict, in order, ``guardrail`` (a configured name), ``check`` (``tool_arguments``,
    ``tool_result``, ``input_answers``, ``prompt_result``, ``resource_result``), ``verdict``
    (``pass``, ``mutate``, ``deny``, ``invalid``, ``error``) and, for a failure let pass under
    ``on_error: allow``, ``fallback: allow``. Never the content, a change or a reason."""
    if not isinstance(raw, list):
        return None
    records: list[dict[str, str]] = []
    for entry in raw[:_MAX_GUARDRAIL_RECORDS]:
        if not isinstance(entry, Mapping):
            continue
        name = entry.get("guardrail")
        if not isinstance(name, str) or not _GUARDRAIL_NAME.fullmatch(name):
            continue
        record = {"guardrail": name}
        for key, allowed in _GUARDRAIL_VALUES.items():
            value = entry.get(key)
            if isinstance(value, str) and value in allowed:
                record[key] = value
        records.append(record)
    return records or None


TASK_EVENT_NAMES: Final[Mapping[str, str]] = {
    "tasks/get": "task_get",
    "tasks/update": "task_update",
    "tasks/cancel": "task_cancel",
}
"""The audit ``event`` of each task request (every one is audited, refused or not)."""
_TASK_FIELDS: Final[Mapping[str, frozenset[str] | None]] = {
    "event": frozenset(TASK_EVENTS),
    "status": frozenset(get_args(TaskStatus)),
    "refused": frozenset({*get_args(HandleRefusal), "unsolicited", "too_large"}),
    "handle": None,
}


def task_record(raw: Any) -> dict[str, Any] | None:
    """The audit form of a task record (``RequestContext.extra["task"]``): ``handle`` (a digest
    of the handle: :func:`gateway.protocol.task_handle.handle_digest`, which links a task's
    events), ``status`` (as the backend reported it), ``event`` (``created``, or the terminal
    status seen for the first time), ``refused`` (why a handle was answered as unknown, or why
    a task was not relayed: ``unsolicited``, ``too_large``). Never the handle, the backend's id
    or what the task carries."""
    if not isinstance(raw, Mapping):
        return None
    record: dict[str, Any] = {}
    for key, allowed in _TASK_FIELDS.items():
        value = raw.get(key)
        if not isinstance(value, str):
            continue
        if allowed is None:
            if len(value) == 32 and all(c in "0123456789abcdef" for c in value):
                record[key] = value
        elif value in allowed:
            record[key] = value
    return record or None
