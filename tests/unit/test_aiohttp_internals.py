"""The aiohttp pin and the guard of the internals the listeners use (issue 32 item 11).

``gateway/app/listener.py``, ``server.py`` and ``fast_path.py`` use aiohttp internals of one
minor line. These tests keep three things in step: the pin in pyproject.toml and the installed
version with :data:`~gateway.app.aiohttp_internals.AIOHTTP_LINE`; the private aiohttp names the
three modules use (parsed from their source) with the guard's list; and the guard failing loudly,
naming each missing name.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path
from types import ModuleType
from typing import Final

import aiohttp
import pytest

from gateway.app import aiohttp_internals
from gateway.app.aiohttp_internals import AIOHTTP_LINE, AIOHTTP_PIN, INTERNALS, check, missing

ROOT: Final = Path(__file__).resolve().parents[2]
PYPROJECT: Final = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
GUARDED: Final = ("gateway.app.listener", "gateway.app.server", "gateway.app.fast_path")
LISTED: Final = frozenset(name for _, names in INTERNALS for name in names)


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def unlisted_internals(
    module: ModuleType, listed: frozenset[str] = LISTED, source: str | None = None
) -> set[str]:
    """Private aiohttp names ``module`` uses that ``listed`` lacks, as ``line: name``.

    Counted: a private name imported from aiohttp; a private attribute of anything but ``self``
    (``request._match_info``, ``super()._make_server``); on ``self``, a private attribute the
    class neither declares (``__slots__``, assigned in its own ``__init__``) nor defines, and a
    private method it defines that overrides one of an aiohttp base class.
    """
    tree = ast.parse(source if source is not None else inspect.getsource(module))
    found: set[str] = set()

    def report(node: ast.AST, name: str) -> None:
        if name not in listed:
            found.add(f"{getattr(node, 'lineno', 0)}: {name}")

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("aiohttp"):
            for alias in node.names:
                if _private(alias.name):
                    report(node, alias.name)
    for cls in [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]:
        runtime = getattr(module, cls.name, None)
        foreign = [
            base
            for base in getattr(runtime, "__mro__", ())[1:]
            if not base.__module__.startswith("gateway.")
        ]
        own: set[str] = set()
        for item in cls.body:
            if isinstance(item, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__slots__" for t in item.targets
            ):
                own |= {e.value for e in ast.walk(item.value) if isinstance(e, ast.Constant)}
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and _private(item.name):
                if any(hasattr(base, item.name) for base in foreign):
                    report(item, item.name)  # an override of aiohttp's private hook
                else:
                    own.add(item.name)
            if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                for target in ast.walk(item):
                    if (
                        isinstance(target, ast.Attribute)
                        and isinstance(target.ctx, ast.Store)
                        and isinstance(target.value, ast.Name)
                        and target.value.id == "self"
                    ):
                        own.add(target.attr)
        for node in ast.walk(cls):
            if isinstance(node, ast.Attribute) and _private(node.attr):
                on_self = isinstance(node.value, ast.Name) and node.value.id == "self"
                if not on_self or node.attr not in own:
                    report(node, node.attr)
    for node in tree.body:  # module-level functions: every private attribute is aiohttp's
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for sub in ast.walk(node):
                if isinstance(sub, ast.Attribute) and _private(sub.attr):
                    report(sub, sub.attr)
    return found


# --- the pin ----------------------------------------------------------------------------------


def test_pyproject_pins_aiohttp_to_the_minor_line_the_listeners_were_written_against() -> None:
    assert AIOHTTP_PIN in PYPROJECT["project"]["dependencies"]
    assert f"aiohttp>={AIOHTTP_LINE},<3.{int(AIOHTTP_LINE.split('.')[1]) + 1}" == AIOHTTP_PIN


def test_the_installed_aiohttp_is_of_that_line() -> None:
    assert aiohttp.__version__.startswith(AIOHTTP_LINE + ".")


def test_every_third_party_package_the_gateway_imports_is_declared() -> None:
    """multidict and yarl come with aiohttp, but the gateway imports them itself. The ``otel``
    extra counts: gateway/observability/otel.py is imported only with ``tracing:``."""
    requirements = [
        *PYPROJECT["project"]["dependencies"],
        *PYPROJECT["project"]["optional-dependencies"]["otel"],
    ]
    declared = {
        re.split(r"[<>=!~ ;\[]", requirement, maxsplit=1)[0].lower().replace("_", "-")
        for requirement in requirements
    }
    distributions = packages_distributions()
    imported: dict[str, str] = {}
    for path in sorted((ROOT / "gateway").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module]
                if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
                else []
            )
            for name in names:
                top = name.split(".")[0]
                if top != "gateway" and top not in sys.stdlib_module_names:
                    imported.setdefault(top, str(path.relative_to(ROOT)))
    assert {"multidict", "yarl", "aiohttp"} <= imported.keys()
    undeclared = {
        top: where
        for top, where in imported.items()
        if not any(
            dist.lower().replace("_", "-") in declared for dist in distributions.get(top, [top])
        )
    }
    assert undeclared == {}


# --- the guard --------------------------------------------------------------------------------


def test_the_installed_aiohttp_has_every_listed_internal() -> None:
    assert missing() == []
    check()  # no-op


@pytest.mark.parametrize("module", GUARDED)
def test_every_private_aiohttp_name_the_listeners_use_is_guarded(module: str) -> None:
    assert unlisted_internals(importlib.import_module(module)) == set()


def test_the_scan_finds_each_kind_of_private_use() -> None:
    """The scan above can fail: a module with one use of each kind, nothing listed."""
    source = """
from aiohttp.http_writer import _serialize_headers
from aiohttp import web
from aiohttp.web_protocol import RequestHandler


class Handler(RequestHandler):
    __slots__ = ("_mine",)

    def __init__(self) -> None:
        self._set_here = 1

    def _own_helper(self) -> None:
        return self._mine, self._set_here, self._waiter

    def _waiting(self) -> bool:
        return True


class Runner(web.AppRunner):
    async def _make_server(self) -> None:
        return None


def write(response: web.Response) -> object:
    return response._body
"""
    module = ModuleType("scan_sample")
    exec(compile(source, "scan_sample", "exec"), module.__dict__)
    found = unlisted_internals(module, frozenset(), source)
    allowed = unlisted_internals(
        module, frozenset({"_serialize_headers", "_waiter", "_body", "_make_server"}), source
    )
    assert {entry.split(": ")[1] for entry in found} == {
        "_serialize_headers",
        "_waiter",
        "_body",
        "_make_server",
    }
    assert allowed == set()


def test_the_guard_names_every_missing_internal_and_refuses() -> None:
    internals = (
        ("aiohttp.web_protocol.RequestHandler", frozenset({"_messages", "_gone_in_3_15"})),
        ("aiohttp.web_protocol", frozenset({"_ErrInfo", "_AlsoGone"})),
        ("aiohttp.web_response.Response", frozenset({"_body", "_vanished"})),
        ("aiohttp.no_such_module.Thing", frozenset({"x"})),
    )
    assert missing(internals) == [
        "aiohttp.no_such_module.Thing.x",
        "aiohttp.web_protocol.RequestHandler._gone_in_3_15",
        "aiohttp.web_protocol._AlsoGone",
        "aiohttp.web_response.Response._vanished",
    ]
    with pytest.raises(RuntimeError) as raised:
        check(internals)
    text = str(raised.value)
    assert "_gone_in_3_15" in text and "_AlsoGone" in text and "_vanished" in text
    assert AIOHTTP_PIN in text and aiohttp.__version__ in text


def test_importing_the_app_refuses_an_aiohttp_without_one_of_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The check runs when ``gateway.app`` is imported, before the listeners' own imports."""
    from aiohttp import http_writer

    monkeypatch.delattr(http_writer, "_serialize_headers")
    saved = {name: sys.modules.pop(name) for name in list(sys.modules) if _in_app(name)}
    try:
        with pytest.raises(RuntimeError, match=r"aiohttp\.http_writer\._serialize_headers"):
            importlib.import_module("gateway.app")
    finally:
        for name in [n for n in sys.modules if _in_app(n)]:
            del sys.modules[name]
        sys.modules.update(saved)
    assert aiohttp_internals.missing() == ["aiohttp.http_writer._serialize_headers"]


def _in_app(name: str) -> bool:
    return name == "gateway.app" or name.startswith("gateway.app.")
