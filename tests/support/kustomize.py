"""Render the kustomize base of ``deploy/kubernetes`` without kustomize (the subset it uses).

Supported: ``resources`` (files, several documents each), ``configMapGenerator`` (``files``,
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
from pathlib import Path
from typing import Any, Final

import yaml

__all__ = ["SUPPORTED_KEYS", "normalise_generated_names", "render"]

SUPPORTED_KEYS: Final = frozenset(
    {"apiVersion", "kind", "labels", "resources", "images", "configMapGenerator"}
)


def _hash(data: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:10]


def render(directory: Path) -> list[dict[str, Any]]:
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
