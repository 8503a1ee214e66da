"""Import-graph check: lower layers never import upward (docs/architecture.md, "Layer rules").

:func:`find_violations` parses every module under a package root (AST only, nothing is imported),
resolves absolute and relative ``gateway.*`` imports (including ones inside functions and
``TYPE_CHECKING`` blocks: a lazy import is still a dependency) and reports each import that the
layer table forbids, plus any module whose layer is not in the table, so a new layer is a
deliberate decision rather than an unchecked hole. :func:`find_room_violations` does the same one
level down, for the rooms (sub-packages) of a layer and their floors ("Rooms inside a layer").
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pytest

ROOT: Final = Path(__file__).resolve().parents[1]
TABLE_HEADING: Final = "## Layer rules as enforced by `tests/test_layers.py`"

ANYTHING: Final = frozenset({"*"})


@dataclass(frozen=True, slots=True)
class LayerTable:
    """docs/architecture.md's layer table, parsed."""

    rules: dict[str, frozenset[str]]
    """Layer (first name below the package; "" the package root) -> layers it may import, and
    single modules of other layers as ``layer.module``."""
    only_imported_by: dict[str, frozenset[str]]
    """Layer -> the only layers that may import it."""
    neutral: frozenset[str]
    """Layers every layer may import."""
    foundation: frozenset[str]


def _cells(row: str) -> list[str]:
    return [cell.strip() for cell in row.strip().strip("|").split("|")]


def _names(text: str) -> list[str]:
    # Commentary in parentheses is not part of the rule; "config/" names the layer "config".
    return [
        name.rstrip("/")
        for name in re.findall(r"`([A-Za-z_][A-Za-z0-9_/.]*)`", _PARENS.sub("", text))
    ]


_PARENS: Final = re.compile(r"\([^()]*\)")


def _table_rows(markdown: str, heading: str) -> list[str]:
    """The rows of the first table under ``heading``, up to the next heading."""
    section = markdown[markdown.index(heading) + len(heading) :]
    section = re.split(r"\n#{1,6} ", section, maxsplit=1)[0]
    return [line for line in section.splitlines() if line.startswith("| `")]


def _layer(name: str) -> str:
    return "" if name == "__init__" else name


def parse_layer_table(markdown: str) -> LayerTable:
    """The rules of the table under :data:`TABLE_HEADING` (see that section for its grammar)."""
    rows = _table_rows(markdown, TABLE_HEADING)
    assert rows, "the layer table was not found in docs/architecture.md"
    parsed = [
        (cells[0], cells[1], cells[2] if len(cells) > 2 else "") for cells in map(_cells, rows)
    ]
    foundations = [
        frozenset(_names(allowed)) for _, allowed, _ in parsed if "(foundation)" in allowed
    ]
    assert len(foundations) == 1, "one row must define the foundation"
    foundation = foundations[0]
    rules: dict[str, frozenset[str]] = {}
    only: dict[str, frozenset[str]] = {}
    neutral: set[str] = set()
    for layers, allowed, importers in parsed:
        rule_text = _PARENS.sub("", allowed)
        kept, _, removed = rule_text.partition(" except ")
        words = set(re.findall(r"[a-z]+", re.sub(r"`[^`]*`", "", kept)))
        rule = {_layer(name) for name in _names(kept)}
        if "anything" in words:
            rule = set(ANYTHING)
        if "foundation" in words:
            rule |= foundation
        rule -= {_layer(name) for name in _names(removed)}
        assert words <= {"anything", "foundation", "nothing", "only"}, (layers, words)
        importer_names = frozenset(_layer(name) for name in _names(importers))
        for name in _names(layers):
            layer = _layer(name)
            assert layer not in rules, f"layer {name!r} is in the table twice"
            rules[layer] = frozenset(rule)
            if importers.startswith("only"):
                only[layer] = importer_names
            elif importers == "every layer":
                neutral.add(layer)
            else:
                assert not importers, (name, importers)
    return LayerTable(rules, only, frozenset(neutral), foundation)


ROOMS_HEADING: Final = "### Rooms inside a layer"
EVERY_ROOM: Final = frozenset({"*"})


def parse_room_table(markdown: str) -> dict[str, frozenset[str]]:
    """Room (``layer/`` or ``layer/sub/``) -> the rooms of its layer it may import."""
    rooms: dict[str, frozenset[str]] = {}
    for row in _table_rows(markdown, ROOMS_HEADING):
        cells = _cells(row)
        text = _PARENS.sub("", cells[1])
        words = set(re.findall(r"[a-z]+", re.sub(r"`[^`]*`", "", text)))
        assert words <= {"nothing", "every", "room"}, (cells[0], words)
        allowed = EVERY_ROOM if "every" in words else frozenset(re.findall(r"`([^`]+)`", text))
        for room in re.findall(r"`([^`]+)`", _PARENS.sub("", cells[0])):
            assert room.endswith("/"), f"a room is a folder: {room!r}"
            assert room not in rooms, f"room {room!r} is in the table twice"
            rooms[room] = allowed
    return rooms


ARCHITECTURE: Final = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
TABLE: Final = parse_layer_table(ARCHITECTURE)
ROOMS: Final = parse_room_table(ARCHITECTURE)
RULES: Final = TABLE.rules
ONLY_IMPORTED_BY: Final = TABLE.only_imported_by
NEUTRAL_TARGETS: Final = TABLE.neutral


def _layer_of(module: str, package: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == package else ""


def _allows_module(allowed: frozenset[str], module: str, package: str) -> bool:
    """Whether a ``layer.module`` entry of ``allowed`` names ``module`` or a package above it."""
    name = module.removeprefix(package + ".")
    return any(name == entry or name.startswith(entry + ".") for entry in allowed if "." in entry)


def _module_name(path: Path, root: Path, package: str) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = [package, *rel.parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _exists(module: str, root: Path, package: str) -> bool:
    rel = Path(*module.split(".")[1:]) if "." in module else Path()
    return (root / rel).with_suffix(".py").is_file() or (root / rel / "__init__.py").is_file()


def _imports(
    tree: ast.AST, module: str, is_package: bool, root: Path, package: str
) -> Iterator[tuple[int, str]]:
    """(line, imported gateway module) for every import statement in ``tree``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == package or alias.name.startswith(package + "."):
                    yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = module.split(".")
                # In a package's __init__, level 1 is the package itself.
                drop = node.level - 1 if is_package else node.level
                base_parts = base_parts[: len(base_parts) - drop] if drop else base_parts
                base = ".".join(base_parts)
                if node.module:
                    base = f"{base}.{node.module}" if base else node.module
            else:
                base = node.module or ""
            if base != package and not base.startswith(package + "."):
                continue
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                yield node.lineno, candidate if _exists(candidate, root, package) else base


def find_violations(root: Path, package: str = "gateway") -> list[str]:
    """Every forbidden import under ``root`` (the package directory), as ``path:line: message``."""
    found: list[str] = []
    for path in sorted(root.rglob("*.py")):
        module = _module_name(path, root, package)
        layer = _layer_of(module, package)
        rel = path.relative_to(root.parent)
        if layer not in RULES:
            found.append(f"{rel}:1: layer '{layer}' is not in the layer table")
            continue
        allowed = RULES[layer]
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for line, target in _imports(tree, module, path.name == "__init__.py", root, package):
            target_layer = _layer_of(target, package)
            if target_layer == layer:
                continue
            importers = ONLY_IMPORTED_BY.get(target_layer)
            if importers is not None:
                permitted = layer in importers
            else:
                permitted = (
                    target_layer in NEUTRAL_TARGETS
                    or "*" in allowed
                    or target_layer in allowed
                    or _allows_module(allowed, target, package)
                )
            if not permitted:
                found.append(f"{rel}:{line}: {layer or package} must not import {target}")
    return found


def _room_of(module: str, root: Path) -> str:
    """``layer/sub/`` for a module of a sub-package of its layer, else ``layer/``."""
    parts = module.split(".")[1:]
    if len(parts) > 2 or (len(parts) == 2 and (root / parts[0] / parts[1]).is_dir()):
        return f"{parts[0]}/{parts[1]}/"
    return f"{parts[0]}/"


def find_room_violations(
    root: Path, rooms: dict[str, frozenset[str]] = ROOMS, package: str = "gateway"
) -> list[str]:
    """Every import between two rooms of a layer that the rooms table does not allow, and every
    room of such a layer that has no row."""
    layers = {room.split("/")[0] for room in rooms}
    found: list[str] = []
    for path in sorted(root.rglob("*.py")):
        module = _module_name(path, root, package)
        layer = _layer_of(module, package)
        if layer not in layers:
            continue
        room = _room_of(module, root)
        rel = path.relative_to(root.parent)
        if room not in rooms:
            found.append(f"{rel}:1: room '{room}' is not in the rooms table")
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for line, target in _imports(tree, module, path.name == "__init__.py", root, package):
            if _layer_of(target, package) != layer:
                continue
            target_room = _room_of(target, root)
            if target_room == room or rooms[room] == EVERY_ROOM or target_room in rooms[room]:
                continue
            found.append(f"{rel}:{line}: room {room} must not import {target}")
    return list(dict.fromkeys(found))  # one line per import, not per imported name


def test_the_gateway_package_follows_the_layer_rules() -> None:
    assert find_violations(ROOT / "gateway") == []


def test_every_layer_of_the_package_is_in_the_table_and_every_row_is_a_layer() -> None:
    on_disk = {
        _layer_of(_module_name(path, ROOT / "gateway", "gateway"), "gateway")
        for path in (ROOT / "gateway").rglob("*.py")
    }
    assert set(RULES) == on_disk


def test_the_table_says_what_the_layers_are_known_to_allow() -> None:
    """The parse itself, on rows whose meaning is not in doubt."""
    assert RULES["errors"] == {"errors"} and RULES["flights"] == frozenset()
    assert RULES["protocol"] == TABLE.foundation and "auth" not in RULES["protocol"]
    assert RULES["auth"] == TABLE.foundation | {"outbound"}
    assert RULES["policy"] == {"errors", "seams", "config", "yaml_source"}
    assert RULES["state"] == TABLE.foundation - {"limits"} and "state" in RULES["limits"]
    assert RULES["wiring"] == ANYTHING and RULES["demo"] == ANYTHING
    # The listeners and the command line: real rows, not "anything".
    assert RULES["app"] == TABLE.foundation | {"outbound", "http"}
    assert {"auth", "backend", "policy", "pdp", "protocol"}.isdisjoint(RULES["app"])
    assert "wiring" in RULES["commands"] and "*" not in RULES["commands"]
    assert {"auth", "backend", "http", "protocol", "pdp"}.isdisjoint(RULES["commands"])
    faces = {"auth.token_reading", "backend.catalog.lock_file", "backend.catalog.pinning"}
    assert faces <= RULES["commands"]
    assert RULES[""] == TABLE.foundation
    # The shared mechanisms (one of each) and the version: importable from every layer.
    assert {
        "",
        "schema",
        "b64url",
        "jsonkit",
        "bounded",
        "background",
        "filewatch",
    } <= NEUTRAL_TARGETS
    assert all(RULES[name] == frozenset() for name in NEUTRAL_TARGETS - {""})
    # The decision point's client: only the composition root builds it; http/ sees the seam.
    assert RULES["pdp"] == TABLE.foundation | {"outbound", "policy"}
    # The guardrail processors' client likewise (http/ sees the Guardrails seam).
    assert RULES["guardrails"] == TABLE.foundation | {"outbound", "protocol"}
    assert {
        "dev": {"commands", "demo"},
        "workers": {"commands"},
        "pdp": {"wiring"},
        "guardrails": {"wiring"},
        "connections": {"wiring"},
        "approvals": {"wiring"},
    } == ONLY_IMPORTED_BY
    # Human approval: the pages and the desk; http/ sees the Approvals seam.
    assert RULES["approvals"] == TABLE.foundation | {"outbound", "login"}


def test_the_parser_reads_every_form_of_a_rule() -> None:
    table = parse_layer_table(
        TABLE_HEADING
        + """

| Module | May import from `gateway.` | Imported by |
|---|---|---|
| `a`, `b/` (two) | `a`, `b` (foundation) | |
| `c` | foundation, `x` (and commentary naming `y`) | |
| `d` | foundation except `b` | only `c` |
| `__init__` | nothing | every layer |
| `e` | anything | |
| `f` | `a`, `x.y` (one module of `x`) | |
"""
    )
    assert table.rules == {
        "a": {"a", "b"},
        "b": {"a", "b"},
        "c": {"a", "b", "x"},
        "d": {"a"},
        "": set(),
        "e": ANYTHING,
        "f": {"a", "x.y"},
    }
    assert table.only_imported_by == {"d": {"c"}}
    assert table.neutral == {""}


def test_no_two_modules_share_a_name() -> None:
    """A basename names one module of the package: a traceback, a search or a review comment
    that says ``surface.py`` means one file (docs/architecture.md, "Where does my change go")."""
    places: dict[str, set[str]] = {}
    for path in (ROOT / "gateway").rglob("*.py"):
        if path.name != "__init__.py":
            places.setdefault(path.name, set()).add(path.parent.name)
    shared = {name: where for name, where in places.items() if len(where) > 1}
    assert shared == {}


def test_the_layers_import_each_other_without_cycles() -> None:
    """Below the composition (layers that may import anything), imports run one way."""
    graph: dict[str, set[str]] = {}
    root = ROOT / "gateway"
    for path in root.rglob("*.py"):
        module = _module_name(path, root, "gateway")
        layer = _layer_of(module, "gateway")
        if "*" in RULES[layer]:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for _, target in _imports(tree, module, path.name == "__init__.py", root, "gateway"):
            target_layer = _layer_of(target, "gateway")
            if target_layer != layer:
                graph.setdefault(layer, set()).add(target_layer)
    cycles = sorted(
        f"{a} <-> {b}"
        for a, targets in graph.items()
        for b in targets
        if a < b and a in graph.get(b, set())
    )
    assert cycles == []


def test_the_rooms_of_a_layer_import_only_the_rooms_below_them() -> None:
    assert find_room_violations(ROOT / "gateway") == []


def test_every_room_of_a_layer_with_rooms_is_in_the_table_and_every_row_is_a_room() -> None:
    root = ROOT / "gateway"
    layers = {room.split("/")[0] for room in ROOMS}
    on_disk = {f"{layer}/" for layer in layers} | {
        f"{layer}/{sub.name}/"
        for layer in layers
        for sub in (root / layer).iterdir()
        if (sub / "__init__.py").is_file()
    }
    assert set(ROOMS) == on_disk
    for allowed in ROOMS.values():
        assert allowed == EVERY_ROOM or allowed <= on_disk


def test_the_rooms_table_has_floors_and_no_circle() -> None:
    """Each room's allowed rooms are strictly below it: walking them never comes back."""
    below: dict[str, set[str]] = {}

    def reach(room: str, seen: tuple[str, ...]) -> set[str]:
        assert room not in seen, f"rooms in a circle: {' -> '.join((*seen, room))}"
        if room not in below:
            allowed = ROOMS[room]
            direct = set() if allowed == EVERY_ROOM else set(allowed)
            below[room] = direct.union(*(reach(r, (*seen, room)) for r in direct))
        return below[room]

    for room in ROOMS:
        reach(room, ())
    # The known floors, as the table states them.
    assert ROOMS["backend/credentials/"] == frozenset()
    assert "backend/catalog/" not in below["backend/upstream/"]
    assert below["http/pipeline/"] == {"http/", "http/subscriptions/", "http/methods/"}


def module_circles(root: Path, package: str = "gateway") -> list[frozenset[str]]:
    """The circles among the modules of ``root``: each set of modules that import one another,
    directly or through others (a package's ``__init__`` is the package's module)."""
    graph: dict[str, set[str]] = {}
    for path in root.rglob("*.py"):
        module = _module_name(path, root, package)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        targets = _imports(tree, module, path.name == "__init__.py", root, package)
        graph[module] = {target for _, target in targets if target != module}
    reach: dict[str, set[str]] = {}

    def reachable(start: str) -> set[str]:
        if start not in reach:
            seen: set[str] = set()
            todo = [start]
            while todo:
                for target in graph.get(todo.pop(), ()):
                    if target in graph and target not in seen:
                        seen.add(target)
                        todo.append(target)
            reach[start] = seen
        return reach[start]

    circles = {
        frozenset({module} | {other for other in reachable(module) if module in reachable(other)})
        for module in graph
        if module in reachable(module)
    }
    return sorted(circles, key=sorted)


KNOWN_MODULE_CIRCLES: Final = {
    frozenset(f"gateway.{name}" for name in circle.split())
    for circle in (
        # Each is a package face and the modules it re-exports, or a lazy import back; their
        # layers' owners are taking them apart. A new circle anywhere else fails the test.
        "seams.backends seams.policy seams.requests seams.task_relay",
        "outbound.http1 outbound.http1_codec",
        "app.listener app.server",
        "dev.issuer_authlib_endpoints dev.issuer_exchange dev.issuer_grants dev.issuer_server",
    )
}


def test_the_modules_import_each_other_without_circles() -> None:
    """A module that needs another's caller is a split in the wrong place (the policy set and
    its ladder were one: the set's module forwarded to ``evaluate.py``, which took the set back)."""
    assert set(module_circles(ROOT / "gateway")) <= KNOWN_MODULE_CIRCLES


def test_a_circle_of_modules_is_found(tmp_path: Path) -> None:
    package = _write(
        tmp_path,
        {
            "__init__.py": "",
            "policy/__init__.py": "",
            "policy/policy_set.py": "from gateway.policy import evaluate\n",
            "policy/evaluate.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from gateway.policy.policy_set import PolicySet\n",
            "policy/rules.py": "from gateway.policy.evaluate import x\n",
        },
    )
    assert module_circles(package) == [
        frozenset({"gateway.policy.evaluate", "gateway.policy.policy_set"})
    ]


# --- the checker itself ---------------------------------------------------------------------


def _write(root: Path, files: dict[str, str]) -> Path:
    package = root / "gateway"
    for name, source in files.items():
        target = package / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(source, encoding="utf-8")
    return package


ALLOWED_TREE: Final = {
    "__init__.py": "",
    "errors.py": "",
    "seams.py": "from gateway.errors import GatewayError\n",
    "config.py": "from gateway import errors\nfrom .yaml_source import load_yaml\n",
    "yaml_source.py": "",
    "outbound.py": "import gateway.config\n",
    "policy/__init__.py": "from . import model\n",
    "policy/model.py": "from ..seams import Decision\nfrom gateway.policy.model import x\n",
    "auth/__init__.py": "",
    "auth/introspection.py": "from gateway.outbound import Outbound\n",
    "http/__init__.py": "",
    "http/pipeline.py": "from gateway.protocol import decode\n",
    "protocol/__init__.py": "",
    "protocol/decode.py": "import json\nimport gateway\n",
    "dev/__init__.py": "from gateway.outbound import Outbound\n",
    "backend/__init__.py": "",
    "backend/proxy.py": "from gateway.protocol import decode\n",
    "backend/catalog/__init__.py": "",
    "backend/catalog/lock_file.py": "",
    "auth/token_reading.py": "",
    "app/__init__.py": "",
    "app/ops.py": "from gateway.http import pipeline\nfrom gateway.seams import Decision\n",
    "wiring/__init__.py": "",
    "wiring/services.py": "from gateway.auth import introspection\nimport gateway.backend.proxy\n",
    "commands/__init__.py": "",
    "commands/cli.py": "import gateway.dev\nfrom gateway.wiring.production import build\n",
    "commands/catalog.py": "from gateway.backend.catalog import lock_file\nimport gateway.app\n",
    "commands/explain.py": "from gateway.auth import token_reading\nimport gateway.policy\n",
}


ROOMY_TREE: Final = {
    "__init__.py": "",
    "x/__init__.py": "",
    "x/top.py": "from gateway.x.b import mid\nfrom gateway.x.a.low import f\n",
    "x/a/__init__.py": "",
    "x/a/low.py": "from gateway.x.a import other\n",
    "x/a/other.py": "",
    "x/b/__init__.py": "",
    "x/b/mid.py": "from ..a.low import f\n",
}
ROOMY_RULES: Final = {
    "x/": EVERY_ROOM,
    "x/a/": frozenset(),
    "x/b/": frozenset({"x/a/"}),
}


class TestTheRoomChecker:
    def test_the_table_is_read_with_every_form_of_a_row(self) -> None:
        rooms = parse_room_table(
            ROOMS_HEADING
            + """

| Room | May import from its own layer |
|---|---|
| `x/a/` (the ground) | nothing |
| `x/b/`, `x/c/` | `x/a/` (and commentary naming `x/d/`) |
| `x/` | every room |

## Next
| `x/z/` | nothing |
"""
        )
        assert rooms == {
            "x/a/": frozenset(),
            "x/b/": {"x/a/"},
            "x/c/": {"x/a/"},
            "x/": EVERY_ROOM,
        }

    def test_a_tree_that_keeps_its_floors_has_no_violations(self, tmp_path: Path) -> None:
        assert find_room_violations(_write(tmp_path, ROOMY_TREE), ROOMY_RULES) == []

    @pytest.mark.parametrize(
        ("name", "source", "expected"),
        [
            pytest.param(
                "x/a/low.py",
                "from gateway.x.b.mid import g\n",
                "gateway/x/a/low.py:1: room x/a/ must not import gateway.x.b.mid",
                id="a floor imports the one above",
            ),
            pytest.param(
                "x/a/other.py",
                "def f():\n    from ...x import top\n",
                "gateway/x/a/other.py:2: room x/a/ must not import gateway.x.top",
                id="lazy relative import of the layer's own modules",
            ),
            pytest.param(
                "x/c/__init__.py",
                "",
                "gateway/x/c/__init__.py:1: room 'x/c/' is not in the rooms table",
                id="a new room without a row",
            ),
        ],
    )
    def test_an_import_against_the_floors_is_reported(
        self, tmp_path: Path, name: str, source: str, expected: str
    ) -> None:
        package = _write(tmp_path, {**ROOMY_TREE, name: source})
        assert find_room_violations(package, ROOMY_RULES) == [expected]


class TestTheChecker:
    def test_a_tree_that_follows_the_rules_has_no_violations(self, tmp_path: Path) -> None:
        assert find_violations(_write(tmp_path, ALLOWED_TREE)) == []

    @pytest.mark.parametrize(
        ("name", "source", "expected"),
        [
            pytest.param(
                "policy/evaluate.py",
                "from gateway.auth import introspection\n",
                "gateway/policy/evaluate.py:1: policy must not import gateway.auth.introspection",
                id="policy imports auth",
            ),
            pytest.param(
                "protocol/decode.py",
                "import json\n\n\ndef f():\n    from ..auth import introspection\n",
                "gateway/protocol/decode.py:5: protocol must not import gateway.auth.introspection",
                id="lazy relative import protocol -> auth",
            ),
            pytest.param(
                "auth/introspection.py",
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import gateway.app\n",
                "gateway/auth/introspection.py:3: auth must not import gateway.app",
                id="TYPE_CHECKING import auth -> app",
            ),
            pytest.param(
                "errors.py",
                "from gateway.seams import Principal\n",
                "gateway/errors.py:1: errors must not import gateway.seams",
                id="errors imports seams",
            ),
            pytest.param(
                "config.py",
                "from gateway import outbound\n",
                "gateway/config.py:1: config must not import gateway.outbound",
                id="foundation imports outbound",
            ),
            pytest.param(
                "app/ops.py",
                "from gateway.dev import issuer\n",
                "gateway/app/ops.py:1: app must not import gateway.dev",
                id="app imports dev tooling",
            ),
            pytest.param(
                "app/ops.py",
                "from gateway.auth.revocation_key import kept_until\n",
                "gateway/app/ops.py:1: app must not import gateway.auth.revocation_key",
                id="app reaches into auth",
            ),
            pytest.param(
                "app/ops.py",
                "from gateway.backend.proxy import UpstreamBackend\n",
                "gateway/app/ops.py:1: app must not import gateway.backend.proxy",
                id="app reaches into backend",
            ),
            pytest.param(
                "app/ops.py",
                "from gateway.policy import model\n",
                "gateway/app/ops.py:1: app must not import gateway.policy.model",
                id="app reaches into policy",
            ),
            pytest.param(
                "commands/catalog.py",
                "from gateway.backend.proxy import UpstreamBackend\n",
                "gateway/commands/catalog.py:1: commands must not import gateway.backend.proxy",
                id="a command builds a backend itself",
            ),
            pytest.param(
                "commands/explain.py",
                "from gateway.auth.introspect import Client\n",
                "gateway/commands/explain.py:1: commands must not import gateway.auth.introspect",
                id="a command reaches into auth past the allowed module",
            ),
            pytest.param(
                "commands/catalog.py",
                "from gateway.backend.catalog.lock_files import load\n",
                "gateway/commands/catalog.py:1: commands must not import "
                "gateway.backend.catalog.lock_files",
                id="a module named like an allowed one",
            ),
            pytest.param(
                "commands/cli.py",
                "from gateway.http import endpoint\n",
                "gateway/commands/cli.py:1: commands must not import gateway.http",
                id="a command reaches into http",
            ),
            pytest.param(
                "metrics_extra.py",
                "",
                "gateway/metrics_extra.py:1: layer 'metrics_extra' is not in the layer table",
                id="unknown layer",
            ),
        ],
    )
    def test_a_forbidden_import_is_reported_with_file_and_line(
        self, tmp_path: Path, name: str, source: str, expected: str
    ) -> None:
        package = _write(tmp_path, {**ALLOWED_TREE, name: source})
        assert find_violations(package) == [expected]
