"""``policy_external:``: the external decision point (OpenID AuthZEN 1.0 Access Evaluation API).

A sibling of ``policy:`` rather than a key inside it: ``policy:`` is the path (or list of paths)
of the policy files, which are hot-reloaded, hold no secrets and stay pure; the decision point
is a service the gateway connects to at startup with a credential of its own, like ``issuer:``
or ``backend:``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gateway.config.builder import Builder
from gateway.config.declare import fill
from gateway.config.policy_external_model import (
    PDP_FIXED_PROPERTIES,
    PdpCredential,
    PolicyExternalConfig,
)
from gateway.config.urls import is_loopback_url
from gateway.yaml_source import PathPart

__all__ = ["build_policy_external"]


def build_policy_external(b: Builder, raw: dict[str, Any] | None) -> PolicyExternalConfig | None:
    """None without the section. ``url`` is https, or plain http to a loopback or private
    address (a sidecar or in-cluster PDP) with ``allow_insecure_http: true``."""
    if raw is None:
        return None
    where: tuple[PathPart, ...] = ("policy_external",)
    # The declared keys first; the checked ones below, in the order their problems are reported.
    external = fill(b, PolicyExternalConfig, raw, where, leave=("credential", "subject_properties"))
    url = b.url(
        external.url, (*where, "url"), insecure_ok=external.allow_insecure_http, private_ok=True
    )
    if "?" in url:
        b.doc.problem((*where, "url"), "must not contain a query")
    properties: list[tuple[str, str]] = []
    for name, claim in sorted(raw.get("subject_properties", {}).items()):
        if name in PDP_FIXED_PROPERTIES:
            fixed = ", ".join(PDP_FIXED_PROPERTIES)
            b.doc.problem(
                (*where, "subject_properties", name),
                f"{name!r} is sent by the gateway itself (one of {fixed})",
            )
        properties.append((name, claim))
    if external.on_error == "allow_local":
        b.warnings.append(
            f"{b.doc.where((*where, 'on_error'))}: policy_external.on_error: allow_local: when "
            "the decision point cannot decide, requests are served on the local policy alone"
        )
    if "credential" not in raw and not is_loopback_url(url):
        b.warnings.append(
            f"{b.doc.where(where)}: policy_external: no credential: the decision point cannot "
            "tell the gateway from anyone else who reaches its URL"
        )
    return replace(
        external,
        credential=_credential(b, raw.get("credential"), (*where, "credential")),
        subject_properties=tuple(properties),
    )


def _credential(b: Builder, raw: Any, where: tuple[PathPart, ...]) -> PdpCredential | None:
    if raw is None:
        return None
    if raw["type"] == "bearer":
        return PdpCredential("bearer", token=b.secret(raw["token"], (*where, "token")))
    return PdpCredential(
        "basic", username=raw["username"], password=b.secret(raw["password"], (*where, "password"))
    )
