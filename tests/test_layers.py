"""Import-graph check: lower layers never import upward (docs/architecture.md, "Layer rules").

:func:`find_violations` parses every module under a package root (AST only, nothing is imported),
resolves absolute and relative ``gateway.*`` imports (including ones inside functions and
``TYPE_CHECKING`` blocks: a lazy import is still a dependency) and reports each import that the
layer table forbids, plus any module whose layer is not in the table, so a new layer is a
deliberate decision rather than an unchecked hole.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest

ROOT: Final = Path(__file__).resolve().parents[1]

ANYTHING: Final = frozenset({"*"})
FOUNDATION: Final = frozenset(
    {
        "errors", "seams", "flights", "deadlines", "retry", "yaml_source", "config", "limits",
        "observability", "state",
    }
)  # fmt: skip

RULES: Final[dict[str, frozenset[str]]] = {
    # Mirrors the table at the end of docs/architecture.md; keep both in step.
    "errors": frozenset({"errors"}),
    "seams": frozenset({"errors"}),
    "flights": frozenset(),
    "deadlines": frozenset(),
    "retry": frozenset(),
    "yaml_source": FOUNDATION,
    "config": FOUNDATION,
    "outbound": FOUNDATION,
    "limits": FOUNDATION,
    "state": FOUNDATION,
    "observability": FOUNDATION,
    "protocol": FOUNDATION,
    "auth": FOUNDATION | {"outbound"},
    "policy": frozenset({"errors", "seams", "config", "yaml_source"}),
    "backend": FOUNDATION | {"outbound", "protocol"},
    "http": FOUNDATION | {"protocol"},
    "dev": FOUNDATION | {"outbound"},
    "app": ANYTHING,
    # gateway/wiring.py builds app.Services from Config: the composition root, beside app.
    "wiring": ANYTHING,
    "cli": ANYTHING,
    # gateway/workers/: the supervisor of `serve --workers N` and its workers, beside cli.
    "workers": ANYTHING,
    # gateway/demo/ wires dev/ into `mcp-gateway demo`; it sits with cli at the top.
    "demo": ANYTHING,
    "__main__": ANYTHING,
    # The package root only carries the version; the schema package only carries data files.
    "": FOUNDATION,
    "schema": frozenset(),
}
"""Layer (first name below the package) -> layers it may import. A layer may import itself."""

NEUTRAL_TARGETS: Final = frozenset({"", "schema"})
"""Importable from every layer: the package root (``__version__``) and packaged data files."""

ONLY_IMPORTED_BY: Final[dict[str, frozenset[str]]] = {
    # Development tooling must never end up in the serving path.
    "dev": frozenset({"cli", "demo"}),
    # Only `serve --workers N` starts a supervisor; the serving path never depends on it.
    "workers": frozenset({"cli"}),
}


def _layer_of(module: str, package: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == package else ""


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
                    target_layer in NEUTRAL_TARGETS or "*" in allowed or target_layer in allowed
                )
            if not permitted:
                found.append(f"{rel}:{line}: {layer or package} must not import {target}")
    return found


def test_the_gateway_package_follows_the_layer_rules() -> None:
    assert find_violations(ROOT / "gateway") == []


def test_every_layer_named_in_the_architecture_table_has_a_rule() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    table = text[text.index("## Layer rules") :]
    named = set()
    for row in table.splitlines():
        if row.startswith("| `"):
            first_cell = row.split("|")[1]
            named |= {name.rstrip("/") for name in re.findall(r"`([a-z_/]+)`", first_cell)}
    assert named, "the layer table was not found in docs/architecture.md"
    assert named - RULES.keys() == set()


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
    "app.py": "from gateway.auth import introspection\nfrom gateway.http import pipeline\n",
    "cli.py": "import gateway.dev\n",
}


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
                "app.py",
                "from gateway.dev import issuer\n",
                "gateway/app.py:1: app must not import gateway.dev",
                id="app imports dev tooling",
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
