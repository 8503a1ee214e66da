"""What the backends offer and how a call reaches them: tools, a tool call, and the
:class:`Backend` Protocol (``gateway/backend``). Prompts and resources: :mod:`.surface`; the
listen streams of subscriptions: :mod:`.listening`."""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from gateway.seams.callers import NO_CLAIMS, CallerToken, Principal
from gateway.seams.questions import AccessQuestion
from gateway.seams.surface import Surface, SurfaceReply, SurfaceRequest
from gateway.seams.task_relay import TaskCreated

if TYPE_CHECKING:
    from gateway.seams.requests import RequestContext

__all__ = [
    "ANNOTATION_HINTS",
    "TOOL_NAME",
    "Backend",
    "Catalog",
    "Era",
    "HeaderParam",
    "InputRequired",
    "JsonObject",
    "Resume",
    "ToolCall",
    "ToolDef",
    "ToolOverride",
    "fold_argument",
]

Era = Literal["modern", "legacy"]


JsonObject = dict[str, Any]


# --- tools ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HeaderParam:
    """An ``x-mcp-header`` annotated argument (MCP 2026-07-28 tools.mdx §x-mcp-header)."""

    header: str
    """Header suffix as declared: the client sends ``Mcp-Param-<header>``."""
    path: tuple[str, ...]
    """Property path inside ``arguments`` (only ``properties`` chains are legal)."""
    type: Literal["string", "integer", "boolean"]


TOOL_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,64}")
"""An upstream's and an advertised (prefixed) tool name: 1-64 characters of ``[A-Za-z0-9_.-]``
(digest §6.17). The catalog drops other names, so a policy rule that needs one never applies."""


@dataclass(frozen=True, slots=True)
class ToolDef:
    """One tool as the gateway advertises it (name already carries any backend prefix)."""

    name: str
    definition: Mapping[str, Any]
    """The Tool object for ``tools/list`` (modern shape); treat as read-only."""
    header_params: tuple[HeaderParam, ...] = ()
    upstream_name: str = ""
    """The name the upstream knows (without the prefix); empty means same as ``name``."""
    backend: str = ""
    """The name of the backend that owns the tool (``backends:`` key, ``default`` for a single
    ``backend:``): where a call goes, and the audit trail's ``backend``. Empty: not known."""
    fixed_arguments: Mapping[str, Any] = field(default_factory=lambda: NO_CLAIMS)
    """``override.arguments.fixed``: values the gateway injects toward the backend (top-level
    argument name -> JSON value). Empty for a tool without such an override."""
    closed_arguments: frozenset[str] = frozenset()
    """Argument names a caller may not set (fixed and hidden ones): a ``tools/call`` that sets
    one, or a near-miss spelling of one (:meth:`refused_arguments`), is refused
    (``argument_not_settable``). Empty: nothing to check on a call."""
    origin: ToolDef | None = None
    """The backend's own definition when a policy ``override:`` changed this one (the backend
    validates arguments and derives ``Mcp-Param-*`` headers from it); None: not overridden."""
    question: AccessQuestion = field(init=False, repr=False, compare=False)
    """What is asked about the tool without a call's arguments (``tools/list``): built once with
    the definition, so a listing builds none per tool."""

    def __post_init__(self) -> None:
        question = AccessQuestion("tools/call", self.name, self.backend or None)
        object.__setattr__(self, "question", question)

    def sent_arguments(self, arguments: Mapping[str, Any]) -> Mapping[str, Any]:
        """What goes upstream: the caller's arguments (as the rule's processors left them), plus
        the override's fixed ones (which neither was let set, so nothing of theirs is replaced);
        the same mapping when there are none."""
        if self.fixed_arguments:
            return {**arguments, **self.fixed_arguments}
        return arguments

    def refused_arguments(self, names: Iterable[str]) -> tuple[str, ...]:
        """The closed arguments (their policy names, sorted) that a call setting ``names``
        would reach: a name equal to one, or equal to one after :func:`fold_argument`.

        A backend whose schema admits extra properties gets every key the caller sends; one
        that folds keys (Go's ``encoding/json`` matches them case-insensitively, Unicode
        folding included; .NET binders and Jackson can be set to) would read ``Env``, ``env ``
        or ``ｅｎｖ`` as the pinned ``env``. Such a key is refused like the name itself."""
        closed = self.closed_arguments
        folds = {fold_argument(name): name for name in closed}
        found: set[str] = set()
        for name in names:
            if name in closed:
                found.add(name)
                continue
            folded = fold_argument(name)
            if folded in folds:
                found.add(folds[folded])
            elif not folded.isascii():
                found.update(folds[f] for f in folds if _looks_like(folded, f))
        return tuple(sorted(found))


def _looks_like(folded: str, closed: str) -> bool:
    """Whether a non-ASCII key could be read as the closed name ``closed`` by eye: with its
    invisible characters (format controls, combining marks) removed, it has the same length
    and the same ASCII characters in the same places, any other character standing for any.
    This catches letters of another script that look like Latin ones (Cyrillic ``е`` in
    ``еnv``, Greek ``ν``) without a confusables table (Unicode TR39 has no maintained Python
    implementation): a look-alike is a different key to a JSON decoder, but not to the model
    or the person reading the call, and a tool with pinned arguments refuses what could pass
    for one. The price is that such a tool also refuses an unrelated non-ASCII key of the same
    length and shape, which its schema does not declare anyway."""
    visible = [c for c in folded if unicodedata.category(c) not in ("Cf", "Mn", "Me")]
    if len(visible) != len(closed):
        return False
    return all(a == b or not a.isascii() for a, b in zip(visible, closed, strict=True))


@functools.lru_cache(maxsize=4096)
def fold_argument(name: str) -> str:
    """``name`` as a case- and compatibility-insensitive key: Unicode's compatibility caseless
    match (Unicode §3.13 D146: NFKD(casefold(NFKD(casefold(NFD(name)))))), then trimmed of
    white space. Two names fold equal when they differ only in case (``Env``), in compatibility
    forms (fullwidth ``ｅｎｖ``, the Kelvin sign, ``ſ``) or in surrounding spaces (``env ``).
    Letters of other scripts that merely look alike (Cyrillic ``е``) stay distinct here (no JSON
    decoder folds them); :meth:`ToolDef.refused_arguments` refuses them by shape. Memoised
    (bounded): the names come from clients."""
    if name.isascii():
        return name.lower().strip()  # NFKD and casefold of ASCII are lower()
    nfd = unicodedata.normalize("NFD", name).casefold()
    return unicodedata.normalize("NFKD", unicodedata.normalize("NFKD", nfd).casefold()).strip()


ANNOTATION_HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
"""The boolean ``ToolAnnotations`` hints an ``override.annotations`` may set (besides
``title``), MCP 2026-07-28 server/tools.mdx §Tool annotations."""


@dataclass(frozen=True, slots=True)
class ToolOverride:
    """A policy rule's ``override:``: how the gateway exposes the tools the rule governs.

    Plain data, parsed by :mod:`gateway.policy.overrides`, applied to a backend definition by
    :func:`gateway.backend.catalog.exposed.exposed_tool` when the catalogs are merged (never per
    call).
    """

    where: str
    """``file:line:col`` of the ``override:`` key (logs name it when a tool does not fit)."""
    title: str | None = None
    description: str | None = None
    """Replace the backend's ``title`` / ``description`` (the rule's own ``description`` is a
    note for people and is never shown to clients)."""
    annotations: Mapping[str, bool | str] = field(default_factory=lambda: NO_CLAIMS)
    """Single ``annotations`` members to set: a hint of :data:`ANNOTATION_HINTS` -> bool, or
    ``title`` -> str; the backend's other hints are kept."""
    rename: str | None = None
    """The exposed name (verbatim: no backend prefix is added); the backend still gets its own."""
    fixed: Mapping[str, Any] = field(default_factory=lambda: NO_CLAIMS)
    """Top-level arguments pinned to a JSON value: removed from the advertised schema (and from
    ``required``), injected toward the backend, refused from a caller."""
    hidden: tuple[str, ...] = ()
    """Optional top-level arguments removed from the advertised schema, refused from a caller."""

    @property
    def closed(self) -> frozenset[str]:
        """The argument names a caller may not set."""
        return frozenset(self.fixed) | frozenset(self.hidden)


class Catalog(Protocol):
    """**Protocol:** an immutable snapshot of the tools the backend offers, sorted by name."""

    version: str
    ttl_ms: int | None
    """How long the snapshot is expected to stay current (the ``tools/list`` ``ttlMs`` is at
    most this); None: no hint, the configured ``protocol.tools_list_ttl_ms`` applies."""

    def get(self, name: str) -> ToolDef | None: ...

    def __iter__(self) -> Iterator[ToolDef]: ...

    def __len__(self) -> int: ...


@dataclass(frozen=True, slots=True)
class Resume:
    """The retry of an input round, after the gateway opened and checked its sealed state.

    MCP 2026-07-28 basic/patterns/mrtr.mdx: the upstream gets its own ``requestState`` back
    (never the envelope) and the client's ``inputResponses`` as validated and rebuilt."""

    backend: str
    """The backend that asked for the input; only it may receive this retry."""
    state: str | None
    """The upstream's own ``requestState``, if it sent one."""
    responses: Mapping[str, Any] | None
    """Validated ``inputResponses`` (only keys the upstream asked for), None when not sent."""
    round: int
    """The round this retry answers (1 for the first input request)."""
    kinds: Mapping[str, str] = field(default_factory=dict)
    """Each answered key's input request method (``elicitation/create`` ...), as sealed."""
    consent: bool = False
    """The round was the gateway's own consent link (``user_oauth``): nothing of it goes
    upstream, the backend is called afresh."""
    approval: str | None = None
    """The round was the gateway's own approval round: the approval record's id (nothing of it
    goes upstream; the call runs once that record is approved)."""


@dataclass(frozen=True, slots=True)
class InputRequired:
    """An upstream ``input_required`` result for a modern client, validated, not yet sealed."""

    backend: str
    """The backend that answered: the sealed state binds it."""
    requests: Mapping[str, Any]
    """``inputRequests`` rebuilt from the schema-valid upstream objects (may be empty)."""
    state: str | None
    """The upstream's ``requestState`` (within ``input_requests.max_state_bytes``)."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A validated ``tools/call`` as the front door hands it to the backend."""

    tool: ToolDef
    arguments: Mapping[str, Any]
    era: Era
    protocol_version: str
    progress_token: str | int | None = None
    accepts_sse: bool = False
    header_params: Mapping[str, str] = field(default_factory=dict)
    """``Mcp-Param-*`` values to forward (header suffix -> raw header value)."""
    traceparent: str | None = None
    tracestate: str | None = None
    on_progress: Callable[[Mapping[str, Any]], Awaitable[None]] | None = None
    """Set when the client sent a progressToken and accepts SSE: relay each upstream
    ``notifications/progress`` params object (progressToken already rewritten to the client's)."""
    client_capabilities: Mapping[str, Any] = field(default_factory=dict)
    """Modern clients: ``_meta["io.modelcontextprotocol/clientCapabilities"]`` as received (the
    backend forwards its schema-known part); legacy: empty (declared in ``initialize``, which a
    stateless gateway does not keep)."""
    caller_token: CallerToken | None = None
    """Set only for a backend whose credential exchanges the caller's token (RFC 8693)."""
    resume: Resume | None = None
    """Set on the retry of an input round (2026-07-28 clients only)."""
    tasks: bool = False
    """The call may become a task: the client declared the tasks extension on it, the policy's
    rule says ``tasks: true`` and ``tasks:`` is on. Otherwise the extension is taken out of
    the capabilities sent upstream, and a task in reply is an upstream error."""


class Backend(Protocol):
    """**Protocol:** the upstream MCP server behind the service credential (``gateway/backend``)."""

    def catalog(self) -> Catalog: ...

    def surface(self) -> Surface:
        """The merged prompts, resources and templates of every backend."""
        ...

    async def surface_request(
        self, request: SurfaceRequest, principal: Principal, ctx: RequestContext, deadline: float
    ) -> SurfaceReply:
        """Send one prompts/resources/completion request to ``request.backend``; never raises
        for an upstream fault (``SurfaceReply.fault``)."""
        ...

    def route_uri(self, uri: str) -> tuple[str, str] | None:
        """(backend, the backend's own URI) for a resource URI a client sends, already in normal
        form (``Policy.resource_uri``: the backend is asked for the URI the policy decided on),
        or None when no backend can own it."""
        ...

    async def call_tool(
        self, call: ToolCall, principal: Principal, ctx: RequestContext, deadline: float
    ) -> JsonObject | InputRequired | TaskCreated:
        """Call the tool and return a CallToolResult object (modern shape, without
        ``resultType``), or, for a modern client, the upstream's validated request for input,
        or (``call.tasks``) the task it created.
        Upstream faults become ``isError: true`` results; ``deadline`` is a
        ``time.monotonic()`` instant."""
        ...
