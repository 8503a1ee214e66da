"""Render the kustomize base of ``deploy/kubernetes`` without kustomize (the subset it uses).

Supported: ``resources`` (files, several documents each), ``components`` (given to
:func:`render`, as an overlay lists them: each a ``kind: Component`` with ``resources`` and
JSON 6902 ``patches`` whose ``target`` names a kind and a name; ops ``add``, ``replace``,
``remove``), ``configMapGenerator`` (``files``,
``options.disableNameSuffixHash``; a generated name gets a content-hash suffix and every
``configMap.name`` reference in a pod template follows it), ``labels`` (``pairs`` added to
``metadata.labels``, ``includeSelectors: false``) and ``images`` (``newName`` / ``newTag``).
:data:`SUPPORTED_KEYS` lists them so a test can refuse a kustomization that uses anything
else. When ``kubectl`` is installed the test also compares this rendering with
``kubectl kustomize``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import yaml

__all__ = ["COMPONENT_KEYS", "SUPPORTED_KEYS", "normalise_generated_names", "render"]

SUPPORTED_KEYS: Final = frozenset(
    {"apiVersion", "kind", "labels", "resources", "images", "configMapGenerator"}
)


def _hash(data: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:10]


COMPONENT_KEYS: Final = frozenset({"apiVersion", "kind", "resources", "patches"})


def render(directory: Path, components: Sequence[Path] = ()) -> list[dict[str, Any]]:
    """The base at ``directory``, then each of ``components`` applied in order."""
    documents = _render_base(directory)
    for component in components:
        _apply_component(component, documents)
    return documents


def _apply_component(directory: Path, documents: list[dict[str, Any]]) -> None:
    component = yaml.safe_load((directory / "kustomization.yaml").read_text())
    unsupported = set(component) - COMPONENT_KEYS
    if unsupported or component.get("kind") != "Component":
        raise ValueError(f"component keys this renderer does not know: {sorted(unsupported)}")
    for resource in component.get("resources", []):
        documents.extend(d for d in yaml.safe_load_all((directory / resource).read_text()) if d)
    for patch in component.get("patches", []):
        target = patch["target"]
        if set(target) - {"kind", "name"}:
            raise ValueError(f"patch targets this renderer does not know: {target}")
        matched = [
            d
            for d in documents
            if d["kind"] == target["kind"] and d["metadata"]["name"] == target["name"]
        ]
        if len(matched) != 1:
            raise ValueError(f"patch target {target} matches {len(matched)} objects")
        for op in yaml.safe_load(patch["patch"]):
            _json_patch(matched[0], op)


def _json_patch(document: dict[str, Any], op: dict[str, Any]) -> None:
    """One RFC 6902 operation (``add``, ``replace``, ``remove``) on ``document``."""
    *parents, last = [
        part.replace("~1", "/").replace("~0", "~") for part in op["path"][1:].split("/")
    ]
    node: Any = document
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    kind = op["op"]
    if isinstance(node, list):
        index = len(node) if last == "-" else int(last)
        if kind == "add":
            node.insert(index, op["value"])
        elif kind == "replace":
            node[index] = op["value"]
        elif kind == "remove":
            del node[index]
        else:
            raise ValueError(f"JSON patch op this renderer does not know: {kind}")
    elif kind in ("add", "replace"):
        if kind == "replace" and last not in node:
            raise ValueError(f"replace of a missing member: {op['path']}")
        node[last] = op["value"]
    elif kind == "remove":
        del node[last]
    else:
        raise ValueError(f"JSON patch op this renderer does not know: {kind}")


def _render_base(directory: Path) -> list[dict[str, Any]]:
    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
    unsupported = set(kustomization) - SUPPORTED_KEYS
    if unsupported:
        raise ValueError(f"kustomization keys this renderer does not know: {sorted(unsupported)}")
    documents: list[dict[str, Any]] = []
    renamed: dict[str, str] = {}
    for generator in kustomization.get("configMapGenerator", []):
        data = {Path(f).name: (directory / f).read_text() for f in generator.get("files", [])}
        name = generator["name"]
        if not generator.get("options", {}).get("disableNameSuffixHash", False):
            renamed[name] = f"{name}-{_hash(data)}"
        documents.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": renamed.get(name, name)},
                "data": data,
            }
        )
    for resource in kustomization.get("resources", []):
        for document in yaml.safe_load_all((directory / resource).read_text()):
            if document:
                documents.append(document)
    labels: dict[str, str] = {}
    for entry in kustomization.get("labels", []):
        if entry.get("includeSelectors") or entry.get("includeTemplates"):
            raise ValueError("labels with includeSelectors/includeTemplates are not supported")
        labels.update(entry["pairs"])
    images = {image["name"]: image for image in kustomization.get("images", [])}
    for document in documents:
        metadata = document.setdefault("metadata", {})
        metadata["labels"] = {**metadata.get("labels", {}), **labels}
        spec = document.get("spec", {}).get("template", {}).get("spec")
        if spec is None:
            continue
        for volume in spec.get("volumes", []):
            config_map = volume.get("configMap")
            if config_map is not None and config_map["name"] in renamed:
                config_map["name"] = renamed[config_map["name"]]
        for container in spec.get("containers", []):
            image = images.get(container["image"].split(":")[0])
            if image is not None:
                name = image.get("newName", image["name"])
                container["image"] = f"{name}:{image['newTag']}" if "newTag" in image else name
    return documents


def normalise_generated_names(documents: list[dict[str, Any]], bases: set[str]) -> list[Any]:
    """Documents with ``<base>-<hash>`` names (and references to them) replaced by ``<base>``."""
    text = json.dumps(documents, sort_keys=True)
    result: list[Any] = json.loads(text)
    for document in result:
        name = document["metadata"]["name"]
        for base in bases:
            if name.startswith(base + "-") and document["kind"] == "ConfigMap":
                document["metadata"]["name"] = base
        spec = document.get("spec", {}).get("template", {}).get("spec", {})
        for volume in spec.get("volumes", []):
            config_map = volume.get("configMap")
            for base in bases:
                if config_map is not None and config_map["name"].startswith(base + "-"):
                    config_map["name"] = base
    return sorted(result, key=lambda d: (d["kind"], d["metadata"]["name"]))
