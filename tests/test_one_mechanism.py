"""Each shared mechanism exists once (issue 44): a new copy outside its foundation module fails.

The scan is of the AST of every module under gateway/ (nothing is imported). Each mechanism
names its one home and the spellings that would be a second copy; :data:`ALLOWED` lists the
few exceptions, each with its reason, so that adding one is a reviewed decision.
``gateway/dev/`` is left out: the development issuer and demo backends play other services
(an issuer, a vault, MCP servers), whose JSON reading is theirs, not the gateway's.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pytest

ROOT: Final = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Mechanism:
    name: str
    home: str
    """The one module (relative to the repository) that may spell it."""
    attributes: frozenset[str]
    """``module.attribute`` spellings (``json.loads``) that are a copy of it."""
    names: frozenset[str] = frozenset()
    """Bare names (``OrderedDict``) that are a copy of it."""
    sorted_dumps: bool = False
    """``json.dumps(..., sort_keys=True)`` is a copy of it (a canonical form of its own)."""
    body_json: bool = False
    """``await request.json()`` (aiohttp's lenient reading) is a copy of it."""
    literals: frozenset[bytes] = frozenset()
    """Bytes constants that start with one of these are a copy of it (an event written by
    hand)."""


MECHANISMS: Final = (
    Mechanism(
        "strict JSON reading",
        "gateway/jsonkit/read.py",
        frozenset({"json.loads", "json.load", "json.JSONDecoder", "orjson.loads"}),
        body_json=True,
    ),
    Mechanism(
        "JSON writing (compact, canonical)",
        "gateway/jsonkit/write.py",
        frozenset({"json.JSONEncoder", "orjson.dumps"}),
        sorted_dumps=True,
    ),
    Mechanism(
        "the bounded map",
        "gateway/bounded.py",
        frozenset({"collections.OrderedDict"}),
        names=frozenset({"OrderedDict"}),
    ),
    Mechanism(
        "the SSE event writer",
        "gateway/http/sse.py",
        frozenset(),
        literals=frozenset({b"event: message", b": keepalive"}),
    ),
    Mechanism(
        "OAuth client authentication",
        "gateway/outbound/client_auth.py",
        frozenset(
            {
                "authlib.oauth2.auth.ClientAuth",
                "authlib.oauth2.auth.encode_client_secret_basic",
                "authlib.oauth2.auth.encode_client_secret_post",
                "authlib.oauth2.rfc7523.PrivateKeyJWT",
                "authlib.oauth2.rfc7523.private_key_jwt_sign",
            }
        ),
    ),
    Mechanism(
        "unpadded base64url",
        "gateway/b64url.py",
        frozenset({"base64.urlsafe_b64encode", "base64.urlsafe_b64decode"}),
    ),
)

ALLOWED: Final[dict[tuple[str, str], str]] = {
    ("gateway/observability/audit_events.py", "orjson.loads"): (
        "audit verify reads each line as written, fast (orjson), then with surrogateescape"
    ),
    ("gateway/observability/audit_events.py", "json.loads"): (
        "audit verify: the fallback of the line above for what orjson refuses"
    ),
    ("gateway/observability/lines.py", "json.dumps(separators=...)"): (
        "the log line's fallback for what orjson refuses, with default=repr"
    ),
    ("gateway/observability/lines.py", "orjson.dumps"): (
        "the log and access lines: their own encoder with the escaping of U+2028 and the like"
    ),
    ("gateway/jsonkit/read.py", "orjson.dumps"): (
        "the duplicate-name proof counts the colons of orjson's writing of the value it read "
        "(never written out); write.py imports read.py"
    ),
    ("gateway/observability/audit_chain.py", "orjson.dumps"): (
        "the audit chain's constant suffix, encoded once per replica"
    ),
    ("gateway/state/revocation_key.py", "base64.urlsafe_b64decode"): (
        "lenient on purpose: must match whatever a lenient issuer accepts (module docstring)"
    ),
    ("gateway/backend/catalog/pinning.py", "json.dumps(sort_keys=True)"): (
        "review_text: indented JSON for a person to read in a diff, not hashed"
    ),
}


def copies(source: str, mechanism: Mechanism) -> list[tuple[int, str]]:
    """(line, spelling) of every copy of ``mechanism`` in ``source``."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            spelling = f"{node.value.id}.{node.attr}"
            if spelling in mechanism.attributes:
                found.append((node.lineno, spelling))
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                spelling = f"{node.module}.{alias.name}"
                if spelling in mechanism.attributes:
                    found.append((node.lineno, spelling))
        elif isinstance(node, ast.Name) and node.id in mechanism.names:
            found.append((node.lineno, node.id))
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, bytes)
            and any(node.value.startswith(prefix) for prefix in mechanism.literals)
        ):
            found.append((node.lineno, "SSE bytes"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            func = node.func
            if (
                mechanism.sorted_dumps
                and isinstance(func.value, ast.Name)
                and f"{func.value.id}.{func.attr}" == "json.dumps"
                and any(
                    k.arg == "sort_keys" and isinstance(k.value, ast.Constant) and k.value.value
                    for k in node.keywords
                )
            ):
                found.append((node.lineno, "json.dumps(sort_keys=True)"))
            if mechanism.body_json and func.attr == "json" and not node.args:
                found.append((node.lineno, ".json()"))
            if (
                mechanism.sorted_dumps
                and isinstance(func.value, ast.Name)
                and f"{func.value.id}.{func.attr}" == "json.dumps"
                and any(k.arg == "separators" for k in node.keywords)
            ):
                found.append((node.lineno, "json.dumps(separators=...)"))
    return found


def violations(root: Path) -> list[str]:
    out: list[str] = []
    for path in sorted((root / "gateway").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith("gateway/dev/"):
            continue
        source = path.read_text(encoding="utf-8")
        for mechanism in MECHANISMS:
            if rel == mechanism.home:
                continue
            for line, spelling in copies(source, mechanism):
                if (rel, spelling) not in ALLOWED:
                    out.append(
                        f"{rel}:{line}: {spelling} is {mechanism.name}: use {mechanism.home}"
                    )
    return sorted(set(out))


def test_each_mechanism_is_written_once() -> None:
    assert violations(ROOT) == []


def test_every_allowed_exception_still_exists() -> None:
    """An exception whose copy is gone is removed from the list (it would hide a new one)."""
    stale = []
    for (rel, spelling), _reason in ALLOWED.items():
        source = (ROOT / rel).read_text(encoding="utf-8")
        if not any(spelling == found for m in MECHANISMS for _, found in copies(source, m)):
            stale.append((rel, spelling))
    assert stale == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import json\nx = json.loads(b)\n", "json.loads"),
        ("from json import loads\n", "json.loads"),
        ("import orjson\norjson.loads(b)\n", "orjson.loads"),
        ("async def f(r):\n    return await r.json()\n", ".json()"),
        ("import json\njson.dumps(v, sort_keys=True)\n", "json.dumps(sort_keys=True)"),
        ("import json\njson.dumps(v, separators=(',', ':'))\n", "json.dumps(separators=...)"),
        (
            "from collections import OrderedDict\nc: OrderedDict[str, int] = OrderedDict()\n",
            "OrderedDict",
        ),
        ("import base64\nbase64.urlsafe_b64encode(b)\n", "base64.urlsafe_b64encode"),
        ('w(b"event: message\\ndata: " + d)\n', "SSE bytes"),
        ("from authlib.oauth2.auth import ClientAuth\n", "authlib.oauth2.auth.ClientAuth"),
    ],
)
def test_the_scan_finds_each_spelling(source: str, expected: str) -> None:
    found = {spelling for m in MECHANISMS for _, spelling in copies(source, m)}
    assert expected in found


def test_a_plain_dumps_for_a_message_is_not_a_copy() -> None:
    source = "import json\ntext = json.dumps(v)\n"
    assert [c for m in MECHANISMS for c in copies(source, m)] == []


def test_a_new_copy_in_a_layer_is_reported_with_its_place(tmp_path: Path) -> None:
    module = tmp_path / "gateway" / "auth" / "new.py"
    module.parent.mkdir(parents=True)
    module.write_text("import json\n\n\ndef f(b):\n    return json.loads(b)\n")
    assert violations(tmp_path) == [
        "gateway/auth/new.py:5: json.loads is strict JSON reading: use gateway/jsonkit/read.py"
    ]
