"""The seams between layers: shared value objects and the Protocols each layer implements.

Only :mod:`gateway.wiring` (the composition root) wires concrete classes to these Protocols;
every other module depends on the Protocol. This module imports nothing from the gateway except
:mod:`gateway.errors`, so every layer may import it without breaking the layer rules
(``tests/test_layers.py``).
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, Protocol, get_args, runtime_checkable

from gateway.errors import GatewayError, JsonRpcId

__all__ = [
    "ANNOTATION_HINTS",
    "AUTH_METHODS",
    "EMPTY_SURFACE",
    "NO_CLAIMS",
    "TOOL_NAME",
    "AccessQuestion",
    "AuthMethod",
    "AuthRequest",
    "Authenticator",
    "Backend",
    "CachedPrincipal",
    "CallRecord",
    "CallerToken",
    "Catalog",
    "ConcurrencyLimiter",
    "Decision",
    "DecisionPoint",
    "DpopReplays",
    "Era",
    "HeaderParam",
    "InputRequired",
    "Lease",
    "ListenEvent",
    "ListenFilter",
    "ListenOffer",
    "ListenRefused",
    "Listening",
    "Listing",
    "Observer",
    "Policy",
    "PolicySource",
    "Principal",
    "PrincipalMemo",
    "PromptDef",
    "RateLimiter",
    "RequestContext",
    "ResourceDef",
    "Resume",
    "Revocations",
    "SharedTokenCache",
    "Surface",
    "SurfaceReply",
    "SurfaceRequest",
    "ToolCall",
    "ToolDef",
    "ToolOverride",
    "UpstreamListen",
    "frozen_claims",
    "listed",
]

Era = Literal["modern", "legacy"]
AuthMethod = Literal[
    "introspection",
    "jwt",
    "jwt+introspection",
    "introspection+dpop",
    "jwt+dpop",
    "jwt+introspection+dpop",
]
"""How a principal's token was checked (``issuer.tokens``, and ``+dpop`` when the request
carried a valid DPoP proof for a bound token, RFC 9449): a bounded metrics label and an audit
field, nothing else downstream may depend on it."""
Listing = Literal["allowed", "step_up"]
"""Policy ``listing``: which tools ``tools/list`` shows (docs/policy.md)."""
JsonObject = dict[str, Any]
AUTH_METHODS: tuple[AuthMethod, ...] = get_args(AuthMethod)
"""Every :data:`AuthMethod`, read from the ``Literal`` so the two cannot drift."""


# --- identity -------------------------------------------------------------------------------


NO_CLAIMS: Mapping[str, Any] = MappingProxyType({})
"""``Principal.claims`` of a principal built without a token (tests, ``policy explain``)."""


def _no_claims() -> Mapping[str, Any]:
    return NO_CLAIMS


class PrincipalMemo:
    """What is derived from one principal once and reused for as long as the principal object
    lives (it is cached by the auth layer, so: once per token and replica, not once per call).

    ``conditions``: the policy layer's CEL context holding the token facts
    (:mod:`gateway.policy.conditions`), built at the first condition a call of this principal
    meets. ``bound``: the DPoP layer's copy of the principal with its ``+dpop`` method
    (:mod:`gateway.auth.dpop_guard`), so a bound token's copy, and its memo, is made once too.
    Never serialised, compared or shown; a ``dataclasses.replace`` copy starts a memo of its own.
    """

    __slots__ = ("bound", "conditions")

    def __init__(self) -> None:
        self.conditions: Any = None
        self.bound: Principal | None = None


def frozen_claims(claims: Mapping[str, Any]) -> Mapping[str, Any]:
    """A read-only copy of a validated token's claims for ``Principal.claims`` (shallow: the
    values are the JSON the issuer sent, never written to afterwards)."""
    return MappingProxyType(dict(claims)) if claims else NO_CLAIMS


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling, as established by introspection or local JWT validation. Never holds
    the token itself."""

    subject: str
    client_id: str | None
    scopes: frozenset[str]
    expires_at: float
    """Unix time (``exp``) as the issuer said it."""
    issuer: str
    fingerprint: str
    """Short, non-reversible token fingerprint (safe for logs)."""
    skew_s: float = 0.0
    """``issuer.clock_skew_s``: how long past ``exp`` the token is still accepted."""
    auth_method: AuthMethod = "introspection"
    actor: str | None = None
    """``act.sub`` of a delegated token (RFC 8693 §4.1): who acts for the subject, if anyone."""
    binding: str | None = None
    """The key the token is bound to (RFC 9449 ``cnf.jkt``: the RFC 7638 thumbprint), None for
    a bearer token. A bound principal is served only to a request whose DPoP proof is signed
    by that key (``gateway/auth``); it is part of every cached or shared copy."""
    claims: Mapping[str, Any] = field(default_factory=_no_claims, compare=False, repr=False)
    """The validated token's claims, read-only (:func:`frozen_claims`): the verified JWT's
    payload, or the introspection answer's members without ``active``; for
    ``jwt+introspection`` the JWT's. Absent keys are absent. The base of policy conditions
    (issue 25). Never logged (``repr=False``: they name people), never sent to a backend; the
    shared token cache carries them (:mod:`gateway.state.token_cache`)."""
    memo: PrincipalMemo = field(
        default_factory=PrincipalMemo, init=False, compare=False, repr=False
    )
    """Values derived from this principal once (:class:`PrincipalMemo`); not part of it."""

    @property
    def valid_until(self) -> float:
        """The one effective expiry (``exp + clock_skew_s``): the claim check, the re-check
        before dispatch and the cache lifetime all use it."""
        return self.expires_at + self.skew_s

    def expired(self, now: float | None = None) -> bool:
        return (time.time() if now is None else now) >= self.valid_until


@dataclass(frozen=True, slots=True)
class AuthRequest:
    """What the authenticator may look at: header values and query keys, nothing else."""

    authorization: tuple[str, ...]
    """Every ``Authorization`` header line, in order (more than one is a malformed request)."""
    query_keys: frozenset[str]
    client_ip: str
    dpop: tuple[str, ...] = ()
    """Every ``DPoP`` header line, in order (RFC 9449 §4.3: exactly one is a proof)."""
    method: str = "POST"
    """The request's method (a proof's ``htm``)."""


class CallerToken:
    """The caller's bearer token, for the one consumer allowed to send it on: the RFC 8693
    token-exchange credential of a backend (``credential.type: token_exchange``), which sends it
    to its issuer's token endpoint and nowhere else.

    Built by :meth:`Authenticator.caller_token` only when a backend exchanges tokens, and carried
    on :attr:`ToolCall.caller_token` only for calls to such a backend. ``repr``/``str`` never show
    the value, and it cannot be pickled or copied into another process by accident.
    """

    __slots__ = ("_value", "digest")

    def __init__(self, value: str, digest: bytes) -> None:
        self._value = value
        self.digest = digest
        """SHA-256 of the token: the key of everything derived from it (exchanged tokens)."""

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "CallerToken(***)"

    __str__ = __repr__

    def __reduce__(self) -> Any:
        raise TypeError("a CallerToken is not serialisable")


@runtime_checkable
class Authenticator(Protocol):
    """**Protocol:** the OAuth resource server (``gateway/auth``)."""

    async def authenticate(self, request: AuthRequest) -> Principal:
        """Return the principal or raise TokenInQuery / NoCredentials / InvalidToken /
        IssuerUnavailable / RateLimited. Baseline scopes are the pipeline's check (they live in
        the policy), not the authenticator's."""
        ...

    def challenge(self, error: GatewayError) -> str | None:
        """The ``WWW-Authenticate`` value for ``error`` (None when the row has no challenge)."""
        ...

    def caller_token(self, request: AuthRequest) -> CallerToken:
        """The bearer token of a request :meth:`authenticate` accepted (for token exchange)."""
        ...

    def outward_scopes(self, scopes: Sequence[str], principal: Principal | None) -> tuple[str, ...]:
        """``scopes`` (the policy's names) as the issuer of ``principal``'s token spells them
        (the reverse of its ``scope_map``); without a principal, as the first issuer does (the
        one clients discover). For every scope the gateway names to a client."""
        ...


class Revocations(Protocol):
    """**Protocol:** tokens revoked at the gateway, by revocation key (``gateway/state``): 32
    bytes naming what the issuer signed (``gateway/auth/revocation_key.py``), the same for
    every spelling of one token, never the SHA-256 of the token's bytes alone."""

    async def revoked(self, digest: bytes) -> bool:
        """Whether the token with this revocation key is revoked. Raises RevocationUnavailable
        when it cannot tell and must fail closed. Asked before a token that was not cached is
        accepted; a revocation also evicts every spelling of the token from every cache
        (``forget``), and a cache hit asks :meth:`revoked_locally`."""
        ...

    def revoked_locally(self, digest: bytes) -> bool:
        """Whether this replica already knows the key is revoked (memory only, no I/O): asked
        on every cache hit and before any issuer call, so a revoked token costs the issuer
        nothing."""
        ...


class DpopReplays(Protocol):
    """**Protocol:** DPoP proofs already used (RFC 9449 §11.1), shared by replicas with Redis
    (``gateway/state``). Keyed by what the proof's key signed (its thumbprint and ``jti``)."""

    async def first_use(self, key: bytes, until: float) -> bool:
        """Record ``key`` until the Unix time ``until``; False when it was recorded before (a
        replay). Raises DpopReplayUnavailable when it cannot tell and must fail closed."""
        ...


@dataclass(frozen=True, slots=True)
class CachedPrincipal:
    principal: Principal
    fresh_until: float
    """Unix time until which the introspection result may be used without asking again."""


class SharedTokenCache(Protocol):
    """**Protocol:** introspection results shared by replicas, keyed by the token's SHA-256.

    Store faults never raise: a failed lookup is a miss, a failed claim lets this replica
    introspect itself, a failed write is dropped (the cache is an optimisation).
    """

    async def get(self, digest: bytes) -> CachedPrincipal | None: ...

    async def claim(self, digest: bytes, hold_s: float) -> bool:
        """True: this replica introspects (then :meth:`put` or :meth:`release`); False:
        another replica is introspecting this token right now (:meth:`wait` for it)."""
        ...

    async def wait(self, digest: bytes, timeout_s: float) -> CachedPrincipal | None:
        """The other replica's result, or None when it gave up or ``timeout_s`` passed."""
        ...

    async def put(self, digest: bytes, entry: CachedPrincipal) -> None:
        """Share an accepted token until ``entry.fresh_until`` and release the claim."""
        ...

    async def release(self, digest: bytes) -> None: ...


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
    one is refused (``argument_not_settable``). Empty: nothing to check on a call."""
    origin: ToolDef | None = None
    """The backend's own definition when a policy ``override:`` changed this one (the backend
    validates arguments and derives ``Mcp-Param-*`` headers from it); None: not overridden."""


ANNOTATION_HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
"""The boolean ``ToolAnnotations`` hints an ``override.annotations`` may set (besides
``title``), MCP 2026-07-28 server/tools.mdx §Tool annotations."""


@dataclass(frozen=True, slots=True)
class ToolOverride:
    """A policy rule's ``override:``: how the gateway exposes the tools the rule governs.

    Plain data, parsed by :mod:`gateway.policy.overrides`, applied to a backend definition by
    :func:`gateway.backend.exposed.exposed_tool` when the catalogs are merged (never per call).
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


# --- prompts, resources, completions ----------------------------------------------------------


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


@dataclass(frozen=True, slots=True)
class ResourceDef:
    """One resource (``resources/list``) or resource template (``resources/templates/list``)."""

    uri: str
    """The exposed URI, or URI template (for a template)."""
    definition: Mapping[str, Any]
    """The Resource / ResourceTemplate object (validated, rebuilt; URI the exposed one)."""
    upstream_uri: str
    backend: str


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


@dataclass(frozen=True, slots=True)
class ListenFilter:
    """What one ``subscriptions/listen`` asks a backend for (or what it acknowledged):
    2026-07-28 basic/patterns/subscriptions.mdx §Notification Filter."""

    tools: bool = False
    prompts: bool = False
    resources: bool = False
    uris: tuple[str, ...] = ()
    """``resourceSubscriptions``: exposed URIs (the gateway's form with several backends)."""

    @property
    def empty(self) -> bool:
        return not (self.tools or self.prompts or self.resources or self.uris)


@dataclass(frozen=True, slots=True)
class ListenOffer:
    """What one backend can send on a listen stream (its 2026-07-28 capabilities)."""

    backend: str
    list_changed: frozenset[str]
    """Of ``tools``, ``prompts``, ``resources``: the kinds whose ``listChanged`` it advertised."""
    subscribe: bool
    """It advertised ``resources.subscribe``."""


@dataclass(frozen=True, slots=True)
class ListenEvent:
    """One notification from a backend's listen stream, in the exposed names.

    ``kind``: ``tools`` / ``prompts`` / ``resources`` (a ``list_changed``), ``updated``
    (``notifications/resources/updated`` of ``uri``), or ``end`` (the backend ended the stream;
    ``graceful`` when it answered the listen request first)."""

    kind: Literal["tools", "prompts", "resources", "updated", "end"]
    uri: str | None = None
    graceful: bool = False


class UpstreamListen(Protocol):
    """An open listen stream at one backend (with the gateway's own credential)."""

    acknowledged: ListenFilter
    """What the backend agreed to honour (exposed URIs)."""

    def events(self) -> AsyncIterator[ListenEvent]:
        """The stream's notifications; the last is an ``end`` event, or it raises on a
        transport failure."""
        ...


class Listening(Protocol):
    """**Protocol:** backends' listen streams (``gateway/backend/federation.py``)."""

    def listen_offers(self) -> tuple[ListenOffer, ...]: ...

    def listen(
        self, backend: str, wanted: ListenFilter, *, ack_deadline: float, deadline: float
    ) -> AbstractAsyncContextManager[UpstreamListen]:
        """Open a listen at ``backend`` for ``wanted``, wait for its acknowledgment until
        ``ack_deadline``; the stream ends at ``deadline`` at the latest. Raises
        :class:`ListenRefused` when the backend cannot listen or fails before acknowledging."""
        ...


class ListenRefused(Exception):
    """A backend did not acknowledge a listen (refused, unreachable, garbled)."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


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
        """(backend, the backend's own URI) for a resource URI a client sends, or None when no
        backend can own it."""
        ...

    async def call_tool(
        self, call: ToolCall, principal: Principal, ctx: RequestContext, deadline: float
    ) -> JsonObject | InputRequired:
        """Call the tool and return a CallToolResult object (modern shape, without
        ``resultType``), or, for a modern client, the upstream's validated request for input.
        Upstream faults become ``isError: true`` results; ``deadline`` is a
        ``time.monotonic()`` instant."""
        ...


# --- policy ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Decision:
    """The outcome of one policy evaluation, with what an audit line and `explain` need."""

    allowed: bool
    visible: bool
    """False when the tool must be answered as unknown (no rule, deny, client/subject rules)."""
    rule: str | None
    """The matched rule's key (exact name or glob), or None."""
    required_scopes: tuple[str, ...] = ()
    """Every scope the operation needs, baseline included (for the 403 challenge)."""
    missing_scopes: tuple[str, ...] = ()
    reason: str = ""
    granted_scopes: tuple[str, ...] = ()
    """The caller's scopes the decision rested on, in the policy's vocabulary (after each
    issuer's ``scope_map``): every required scope it holds, or for one it holds only through
    ``scope_hierarchy``, the granted scope that implies it. The audit trail records them."""
    detail: str = ""
    """For the log only, never the client: why a ``when:`` condition could not be evaluated."""


class Policy(Protocol):
    """**Protocol:** one loaded, immutable policy set."""

    version: str
    baseline_scopes: tuple[str, ...]
    listing: Listing
    """``allowed``: ``tools/list`` shows callable tools only; ``step_up``: also the visible tools
    the caller could call with more scopes (so clients reach the 403 step-up)."""

    def decide_tool(self, principal: Principal, tool: str) -> Decision: ...

    def decide_conditions(
        self,
        principal: Principal,
        name: str,
        arguments: Mapping[str, Any] | None,
        *,
        section: str = "tools",
        backend: str = "",
        client_ip: str = "",
    ) -> Decision | None:
        """The ``when:`` conditions of the rule governing ``name`` in ``section`` (``tools``,
        ``prompts``, ``resources``; call after the ladder allowed): None when they all hold (or
        there are none), else a refusal. ``arguments=None`` is a listing: only the conditions
        that do not read ``arguments`` are decided (docs/policy.md#conditions)."""
        ...

    def decide_method(self, principal: Principal, method: str) -> Decision:
        """Extra per-method scopes (``server/discover``, ``tools/list``); baseline included."""
        ...

    def rate_limit(self, tool: str) -> tuple[int, float] | None:
        """(count, per_seconds) per subject for this tool, if the rule sets one."""
        ...

    def max_concurrency(self, tool: str) -> int | None: ...

    def decide_prompt(self, principal: Principal, prompt: str) -> Decision:
        """``prompts:`` rules; a hidden prompt is answered as an unknown one (-32602)."""
        ...

    def decide_resource(self, principal: Principal, uri: str) -> Decision:
        """``resources:`` rules on the URI's normal form; hidden = not found (-32002)."""
        ...

    def decide_template(self, principal: Principal, uri_template: str) -> Decision:
        """Whether a resource template is listed and completed (reads decide per URI)."""
        ...

    def limits(
        self, section: str, rule_key: str | None
    ) -> tuple[tuple[int, float] | None, int | None]:
        """(rate_limit, max_concurrency) of the ``prompts``/``resources`` rule ``rule_key``."""
        ...


class PolicySource(Protocol):
    """**Protocol:** hands out the current policy; a reload swaps it atomically."""

    def current(self) -> Policy: ...


@dataclass(frozen=True, slots=True)
class AccessQuestion:
    """What the external decision point is asked about one request the local policy allowed."""

    action: Literal["tools/call", "prompts/get", "resources/read"]
    target: str
    """The tool or prompt name as the caller sees it, or the resource URI (normal form)."""
    backend: str | None = None
    arguments: Mapping[str, Any] | None = None
    """The call's (schema-checked) arguments; sent only with ``send_arguments``."""


class DecisionPoint(Protocol):
    """**Protocol:** the external decision point (``policy_external:``, ``gateway/pdp``).

    Asked only after the local policy allowed, so it can only narrow. Wired only when
    configured: without the section the routes hold None and never call it."""

    async def consult(
        self, principal: Principal, question: AccessQuestion, ctx: RequestContext,
        deadline: float,
    ) -> None:  # fmt: skip
        """Return when the request may go on (allowed, or a failure under ``on_error:
        allow_local``); raise ExternalPolicyDenied or PolicyUnavailable otherwise. Records the
        outcome in ``ctx.extra["pdp"]`` for the audit trail. ``deadline``: monotonic instant."""
        ...


# --- limits ---------------------------------------------------------------------------------


class RateLimiter(Protocol):
    """**Protocol:** a fixed or sliding window limiter (memory or Redis)."""

    async def hit(self, key: str, count: int, per_s: float) -> float | None:
        """Record one event; return None when allowed, else seconds until retry."""
        ...


class Lease(Protocol):
    """**Protocol:** one held concurrency slot."""

    async def release(self) -> None: ...


class ConcurrencyLimiter(Protocol):
    """**Protocol:** counted slots per key (memory, or leases in Redis shared by replicas)."""

    async def acquire(self, key: str, limit: int, hold_s: float) -> Lease | None:
        """Take one of ``limit`` slots of ``key``, or None when all are taken. The slot is held
        until released, and at most ``hold_s`` seconds where it is shared (a replica that dies
        mid-call cannot leak it)."""
        ...


# --- per-request state and observation ------------------------------------------------------


@dataclass(slots=True)
class RequestContext:
    """Everything one MCP request accumulates, for logs, metrics and the audit trail.

    Mutable on purpose: the pipeline fills it as it goes; observers read it once at the end.
    """

    request_id: str
    trace_id: str
    span_id: str
    started: float
    """``time.monotonic()`` at arrival."""
    client_ip: str
    traceparent: str | None = None
    tracestate: str | None = None
    http_method: str = "POST"
    method: str | None = None
    """JSON-RPC method once decoded."""
    jsonrpc_id: JsonRpcId | None = None
    tool: str | None = None
    backend: str | None = None
    """The backend that owns ``tool`` (a bounded name from the configuration), once resolved."""
    era: Era | None = None
    protocol_version: str | None = None
    principal: Principal | None = None
    decision: Decision | None = None
    status: int = 0
    jsonrpc_code: int | None = None
    error_row: str | None = None
    outcome: str | None = None
    """tools/call outcome: ok | tool_error | invalid_arguments | timeout | upstream_error |
    too_large | cancelled | input_required (an input round relayed) | input_refused (one the
    gateway would not relay)."""
    backend_ms: float | None = None
    bytes_in: int = 0
    bytes_out: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    calls: list[CallRecord] = field(default_factory=list)
    """One record per ``tools/call`` member of a 2025-03-26 batch (the audit trail writes one
    event each); empty for a single request, whose call is described by the fields above."""


@dataclass(frozen=True, slots=True)
class CallRecord:
    """One ``tools/call`` inside a batch: what the audit event of that call needs."""

    tool: str
    decision: Decision | None
    outcome: str
    backend_ms: float | None = None
    backend: str | None = None
    jsonrpc_code: int | None = None
    error_row: str | None = None
    arguments: Mapping[str, Any] | None = None
    exchange: Mapping[str, Any] | None = None
    """The token exchange of this call (``RequestContext.extra["exchange"]``), if any."""
    pdp: Mapping[str, Any] | None = None
    """What the external decision point said of this call (``RequestContext.extra["pdp"]``)."""


class Observer(Protocol):
    """**Protocol:** logs, metrics and audit (``gateway/observability``)."""

    def request_started(self, ctx: RequestContext) -> None: ...

    def request_finished(self, ctx: RequestContext) -> None: ...


def listed(decision: Decision, listing: Listing) -> bool:
    """Whether ``tools/list`` shows a tool with this decision under the policy's ``listing``.

    ``step_up`` also lists the tools a caller could unlock with more scopes, so clients that only
    call listed tools (MCP Inspector) reach the 403 step-up. Hidden tools (no rule, deny,
    client/subject conditions) have ``visible=False`` and stay hidden either way.
    """
    return decision.allowed or (listing == "step_up" and decision.visible)


def sorted_tools(tools: Sequence[ToolDef]) -> list[ToolDef]:
    return sorted(tools, key=lambda t: t.name)
