"""Upstream answers to ``prompts/get``, ``resources/read`` and ``completion/complete``, checked
and rebuilt before anything reaches the client (2026-07-28 server/prompts.mdx §Getting a Prompt,
server/resources.mdx §Reading Resources, server/utilities/completion.mdx).

Each function returns a plain copy holding only schema-defined members, or None when the answer
is garbled (the front door answers ``backend_failure``):

- :func:`prompt_result`: ``messages`` (at most :data:`MAX_MESSAGES`) of ``role`` user/assistant
  and one content block each (:func:`content_block`); ``description`` a string;
- :func:`read_result`: ``contents`` (at most :data:`MAX_CONTENTS`) each with a URI, a valid
  ``mimeType`` when present, and exactly one of ``text`` (a string) or ``blob`` (strict base64;
  the decoded bytes of all blobs together at most ``max_blob_bytes``);
- :func:`complete_result`: ``completion.values`` at most 100 strings, ``total`` a non-negative
  integer, ``hasMore`` a boolean.

A media type is ``type/subtype`` of RFC 9110 tokens with optional ``; name=value`` parameters
(§8.3.1); anything else (``text``, ``text/``, a space, a control character) is garbled.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Mapping
from typing import Any, Final

__all__ = [
    "CONTENT_TYPES",
    "MAX_COMPLETION_VALUES",
    "MAX_CONTENTS",
    "MAX_MESSAGES",
    "UriMap",
    "complete_result",
    "content_block",
    "prompt_result",
    "read_result",
    "valid_media_type",
]

MAX_MESSAGES: Final = 1000
MAX_CONTENTS: Final = 1000
MAX_COMPLETION_VALUES: Final = 100
"""completion.mdx: ``values`` MUST NOT exceed 100 items."""
CONTENT_TYPES: Final = frozenset({"text", "image", "audio", "resource_link", "resource"})

_CHARS: Final = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
_QUOTED: Final = r'"(?:[\t !#-\[\]-~]|\\[\t -~])*"'
_MEDIA: Final = re.compile(rf"{_CHARS}/{_CHARS}(?:[ \t]*;[ \t]*{_CHARS}=(?:{_CHARS}|{_QUOTED}))*")
_MAX_MEDIA: Final = 255
_URI: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:[\x21-\x7e]{0,2048}")

UriMap = Callable[[str], str | None]
"""Rewrites a URI the upstream sent into the one the client sees (None: refuse the answer)."""


def _same(uri: str) -> str | None:
    return uri


def valid_media_type(value: Any) -> bool:
    return isinstance(value, str) and len(value) <= _MAX_MEDIA and bool(_MEDIA.fullmatch(value))


def _uri(value: Any, rewrite: UriMap) -> str | None:
    if not isinstance(value, str) or not _URI.fullmatch(value):
        return None
    return rewrite(value)


def _base64_size(value: Any) -> int | None:
    """Decoded length of strict base64 (RFC 4648 §4, padding required), or None."""
    if not isinstance(value, str) or len(value) % 4:
        return None
    try:
        return len(base64.b64decode(value, validate=True))
    except (binascii.Error, ValueError):
        return None


def _keep(raw: Mapping[str, Any], out: dict[str, Any], *members: tuple[str, type]) -> None:
    for key, kind in members:
        if isinstance(raw.get(key), kind):
            out[key] = raw[key]


def resource_contents(raw: Any, rewrite: UriMap, budget: list[int]) -> dict[str, Any] | None:
    """One Text- or BlobResourceContents; ``budget[0]``: decoded blob bytes still allowed."""
    if not isinstance(raw, Mapping):
        return None
    uri = _uri(raw.get("uri"), rewrite)
    if uri is None:
        return None
    out: dict[str, Any] = {"uri": uri}
    mime = raw.get("mimeType")
    if mime is not None:
        if not valid_media_type(mime):
            return None
        out["mimeType"] = mime
    text, blob = raw.get("text"), raw.get("blob")
    if (text is None) == (blob is None):
        return None  # exactly one of them
    if text is not None:
        if not isinstance(text, str):
            return None
        out["text"] = text
    else:
        size = _base64_size(blob)
        if size is None or size > budget[0]:
            return None
        budget[0] -= size
        out["blob"] = blob
    _keep(raw, out, ("_meta", dict))
    return out


def content_block(
    raw: Any, rewrite: UriMap = _same, budget: list[int] | None = None
) -> dict[str, Any] | None:
    """One ContentBlock of a prompt message (or a tool result): checked, URIs rewritten."""
    if not isinstance(raw, Mapping) or raw.get("type") not in CONTENT_TYPES:
        return None
    kind = raw["type"]
    out: dict[str, Any] = {"type": kind}
    if kind == "text":
        if not isinstance(raw.get("text"), str):
            return None
        out["text"] = raw["text"]
    elif kind in ("image", "audio"):
        if _base64_size(raw.get("data")) is None or not valid_media_type(raw.get("mimeType")):
            return None
        out["data"], out["mimeType"] = raw["data"], raw["mimeType"]
    elif kind == "resource_link":
        uri = _uri(raw.get("uri"), rewrite)
        if uri is None or not isinstance(raw.get("name"), str):
            return None
        out["uri"], out["name"] = uri, raw["name"]
        mime = raw.get("mimeType")
        if mime is not None:
            if not valid_media_type(mime):
                return None
            out["mimeType"] = mime
        _keep(raw, out, ("title", str), ("description", str), ("icons", list))
        size = raw.get("size")
        if isinstance(size, int) and not isinstance(size, bool) and size >= 0:
            out["size"] = size
    else:
        inner = resource_contents(raw.get("resource"), rewrite, budget or [1 << 62])
        if inner is None:
            return None
        out["resource"] = inner
    _keep(raw, out, ("annotations", dict), ("_meta", dict))
    return out


def prompt_result(raw: Any, rewrite: UriMap = _same) -> dict[str, Any] | None:
    if not isinstance(raw, Mapping):
        return None
    messages = raw.get("messages")
    if not isinstance(messages, list) or len(messages) > MAX_MESSAGES:
        return None
    out_messages = []
    for message in messages:
        if not isinstance(message, Mapping) or message.get("role") not in ("user", "assistant"):
            return None
        content = content_block(message.get("content"), rewrite)
        if content is None:
            return None
        out_messages.append({"role": message["role"], "content": content})
    out: dict[str, Any] = {"messages": out_messages}
    _keep(raw, out, ("description", str), ("_meta", dict))
    return out


def read_result(raw: Any, *, max_blob_bytes: int, rewrite: UriMap = _same) -> dict[str, Any] | None:
    if not isinstance(raw, Mapping):
        return None
    contents = raw.get("contents")
    if not isinstance(contents, list) or len(contents) > MAX_CONTENTS:
        return None
    budget = [max_blob_bytes]
    out_contents = []
    for item in contents:
        checked = resource_contents(item, rewrite, budget)
        if checked is None:
            return None
        out_contents.append(checked)
    out: dict[str, Any] = {"contents": out_contents}
    _keep(raw, out, ("_meta", dict))
    return out


def complete_result(raw: Any) -> dict[str, Any] | None:
    completion = raw.get("completion") if isinstance(raw, Mapping) else None
    if not isinstance(completion, Mapping):
        return None
    values = completion.get("values")
    if (
        not isinstance(values, list)
        or len(values) > MAX_COMPLETION_VALUES
        or not all(isinstance(v, str) for v in values)
    ):
        return None
    out: dict[str, Any] = {"values": list(values)}
    total = completion.get("total")
    if total is not None:
        if not isinstance(total, int) or isinstance(total, bool) or total < 0:
            return None
        out["total"] = total
    has_more = completion.get("hasMore")
    if has_more is not None:
        if not isinstance(has_more, bool):
            return None
        out["hasMore"] = has_more
    return {"completion": out}
