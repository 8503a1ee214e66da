"""Prompts, resources, templates and completions: what the backends offer besides tools, and
one request for them as the front door hands it on (``gateway/backend``, ``gateway/http``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from gateway.seams.callers import CallerToken
from gateway.seams.questions import AccessQuestion

__all__ = [
    "EMPTY_SURFACE",
    "GATEWAY_SCHEME",
    "SURFACE_METHODS",
    "PromptDef",
    "ResourceDef",
    "Surface",
    "SurfaceReply",
    "SurfaceRequest",
]


GATEWAY_SCHEME: Final = "mcp-gw"
"""The scheme of the resource URIs the gateway owns when several backends offer resources,
``mcp-gw://<backend>/<the backend's URI>`` (``gateway/backend/catalog/surface_merge.py`` writes
them; ``gateway/policy/uri.py`` normalises the inner URI on its own)."""

SURFACE_METHODS: Final = (
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "completion/complete",
)
"""The prompts, resources and completion requests (both eras): the front door serves them when a
backend offers them (else -32601 at dispatch), and they are ``method`` labels of their own."""


@dataclass(frozen=True, slots=True)
class PromptDef:
    """One prompt as the gateway advertises it (name already carries any backend prefix)."""

    name: str
    definition: Mapping[str, Any]
    """The Prompt object for ``prompts/list`` (validated, rebuilt; ``name`` the exposed one)."""
    upstream_name: str
    backend: str
    arguments: tuple[tuple[str, bool], ...] = ()
    """The declared arguments: (name, required)."""
    question: AccessQuestion = field(init=False, repr=False, compare=False)
    """What is asked about the prompt without a call's arguments (``prompts/list``): built once
    with the definition."""

    def __post_init__(self) -> None:
        question = AccessQuestion("prompts/get", self.name, self.backend)
        object.__setattr__(self, "question", question)


@dataclass(frozen=True, slots=True)
class ResourceDef:
    """One resource (``resources/list``) or resource template (``resources/templates/list``)."""

    uri: str
    """The exposed URI, or URI template (for a template)."""
    definition: Mapping[str, Any]
    """The Resource / ResourceTemplate object (validated, rebuilt; URI the exposed one)."""
    upstream_uri: str
    backend: str
    question: AccessQuestion = field(init=False, repr=False, compare=False)
    """What is asked about the resource (``resources/list``; a template's is never asked):
    built once with the definition."""

    def __post_init__(self) -> None:
        question = AccessQuestion("resources/read", self.uri, self.backend)
        object.__setattr__(self, "question", question)


@dataclass(frozen=True, slots=True)
class Surface:
    """The prompts, resources and templates every backend offers, sorted (immutable)."""

    prompts: tuple[PromptDef, ...] = ()
    resources: tuple[ResourceDef, ...] = ()
    templates: tuple[ResourceDef, ...] = ()
    offers: frozenset[str] = frozenset()
    """Which of ``prompts``, ``resources``, ``completions`` some backend advertises."""
    subscribe: bool = False
    """Some backend advertises ``resources.subscribe``."""
    version: str = ""
    ttl_ms: int | None = None
    _prompts: Mapping[str, PromptDef] = field(default_factory=dict, repr=False, compare=False)
    _templates: Mapping[str, ResourceDef] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_prompts", {p.name: p for p in self.prompts})
        object.__setattr__(self, "_templates", {t.uri: t for t in self.templates})

    def prompt(self, name: str) -> PromptDef | None:
        return self._prompts.get(name)

    def template(self, uri_template: str) -> ResourceDef | None:
        return self._templates.get(uri_template)


EMPTY_SURFACE = Surface()


@dataclass(frozen=True, slots=True)
class SurfaceRequest:
    """A validated prompts/resources/completion request as the front door hands it on."""

    method: str
    backend: str
    """The backend to ask (its configured name): the owner of the prompt, resource or template."""
    params: Mapping[str, Any]
    """The request's params in the backend's own names (without ``_meta``), plain JSON."""
    name: str | None = None
    """The ``Mcp-Name`` value for a modern upstream (``prompts/get``, ``resources/read``)."""
    traceparent: str | None = None
    tracestate: str | None = None
    caller_token: CallerToken | None = None
    """Set only for a backend whose credential exchanges the caller's token (RFC 8693)."""


@dataclass(frozen=True, slots=True)
class SurfaceReply:
    """The backend's answer: a result object, or the JSON-RPC error code it answered with."""

    result: Mapping[str, Any] | None = None
    error_code: int | None = None
    fault: str | None = None
    """Set when there is no usable answer (timeout, connection, garbled, too large ...)."""
