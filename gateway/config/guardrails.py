"""``guardrails:``: named content processors (docs/policy.md#guardrails).

A sibling of ``policy:`` like ``policy_external:``: the policy files say *which* processors see
a rule's content (``guardrails: [name]``), this section says where each one is and how the
gateway proves itself there. Each entry: a URL (https, or http to a loopback or private address
with ``allow_insecure_http``), an optional service credential as a backend has one (``bearer``
or ``client_credentials``; never ``token_exchange``: the caller's token does not leave the
gateway towards a processor), the deadline, the body cap, ``on_error``, the checks it does and
the claims it is shown.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gateway.config.backend import build_credential
from gateway.config.builder import Builder
from gateway.config.declare import fill
from gateway.config.guardrails_model import GuardrailConfig
from gateway.config.urls import is_loopback_url
from gateway.yaml_source import PathPart

__all__ = ["build_guardrails"]


def build_guardrails(
    b: Builder, raw: dict[str, Any] | None, *, dev_http: bool
) -> tuple[GuardrailConfig, ...]:
    """Every processor in file order (none without the section)."""
    found: list[GuardrailConfig] = []
    for name, entry in (raw or {}).items():
        found.append(_processor(b, name, entry, dev_http=dev_http))
    return tuple(found)


def _processor(b: Builder, name: str, raw: dict[str, Any], *, dev_http: bool) -> GuardrailConfig:
    where: tuple[PathPart, ...] = ("guardrails", name)
    processor = fill(b, GuardrailConfig, raw, where, leave=("credential",), name=name)
    url = b.url(
        processor.url, (*where, "url"), insecure_ok=processor.allow_insecure_http, private_ok=True
    )
    if "?" in url:
        b.doc.problem((*where, "url"), "must not contain a query")
    credential = None
    if "credential" in raw:
        credential = build_credential(
            b, raw["credential"], (*where, "credential"), dev_http=dev_http
        )
        if credential.type in ("token_exchange", "user_oauth"):
            b.doc.problem(
                (*where, "credential", "type"),
                "a guardrail's credential is bearer or client_credentials: the caller's "
                "token (or their upstream token) is never sent to a processor",
            )
    elif not is_loopback_url(url):
        b.warnings.append(
            f"{b.doc.where(where)}: guardrails.{name}: no credential: the processor cannot "
            "tell the gateway from anyone else who reaches its URL"
        )
    if processor.on_error == "allow":
        b.warnings.append(
            f"{b.doc.where((*where, 'on_error'))}: guardrails.{name}.on_error: allow: when "
            "the processor cannot answer, content passes unchecked"
        )
    return replace(processor, credential=credential)
