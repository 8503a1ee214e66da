"""In-process fakes of the seams in :mod:`gateway.seams`, for front-door tests.

They behave like the real layers at the seam (same exceptions, same challenge shapes), without
I/O: :class:`FakeAuthenticator` maps token strings to principals, :class:`FakePolicy` holds a
baseline and per-tool rules, :class:`FakeBackend` serves a fixed catalog whose tools echo, fail,
sleep, report progress or return oversized results.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import fnmatch
import hashlib
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gateway.errors import (
    GatewayError,
    InsufficientScope,
    InvalidToken,
    IssuerUnavailable,
    NoCredentials,
    TokenInQuery,
)
from gateway.policy.uri import resource_uri
from gateway.seams import (
    EMPTY_SURFACE,
    AccessQuestion,
    AuthRequest,
    CallerToken,
    Decision,
    HeaderParam,
    Listing,
    Principal,
    RequestContext,
    Surface,
    SurfaceReply,
    SurfaceRequest,
    ToolCall,
    ToolDef,
)

__all__ = [
    "BASELINE",
    "PRM_URL",
    "FakeAuthenticator",
    "FakeBackend",
    "FakeCatalog",
    "FakePolicy",
    "FakePolicySource",
    "FakeRule",
    "default_catalog",
    "default_policy",
    "principal",
]

BASELINE = ("mcp:access",)
PRM_URL = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"


def principal(
    subject: str = "alice",
    scopes: str = "mcp:access docs:read",
    *,
    client_id: str | None = "cli",
    ttl_s: float = 3600.0,
) -> Principal:
    return Principal(
        subject=subject,
        client_id=client_id,
        scopes=frozenset(scopes.split()),
        expires_at=time.time() + ttl_s,
        issuer="https://id.example.com",
        fingerprint=f"fp-{subject}",
    )


class FakeAuthenticator:
    """Tokens are plain strings mapped to principals; behaves like ``gateway.auth`` at the seam.

    Special tokens: ``"issuer-down"`` raises IssuerUnavailable (Retry-After 5).
    """

    def __init__(self, tokens: Mapping[str, Principal] | None = None) -> None:
        self.tokens: dict[str, Principal] = dict(tokens or {})
        self.calls = 0

    async def authenticate(self, request: AuthRequest) -> Principal:
        self.calls += 1
        if "access_token" in request.query_keys:
            raise TokenInQuery()
        if len(request.authorization) > 1:
            raise TokenInQuery(detail="several Authorization headers")
        if not request.authorization:
            raise NoCredentials()
        scheme, _, token = request.authorization[0].partition(" ")
        if scheme.lower() != "bearer":
            raise NoCredentials(detail="not a bearer credential")
        if not token.strip():
            raise InvalidToken(detail="empty bearer token")
        token = token.strip()
        if token == "issuer-down":
            raise IssuerUnavailable(retry_after=5)
        found = self.tokens.get(token)
        if found is None or found.expired():
            raise InvalidToken()
        return found

    def challenge(self, error: GatewayError) -> str | None:
        metadata = f'resource_metadata="{PRM_URL}"'
        if isinstance(error, TokenInQuery):
            return 'Bearer error="invalid_request"'
        if isinstance(error, NoCredentials):
            return f'Bearer {metadata}, scope="{" ".join(BASELINE)}"'
        if isinstance(error, InvalidToken):
            return f'Bearer error="invalid_token", {metadata}'
        if isinstance(error, InsufficientScope):
            return (
                f'Bearer error="insufficient_scope", scope="{" ".join(error.scopes)}", {metadata}'
            )
        if isinstance(error, IssuerUnavailable):
            return f"Bearer {metadata}"
        return None

    def caller_token(self, request: AuthRequest) -> CallerToken:
        token = request.authorization[0].partition(" ")[2].strip()
        return CallerToken(token, hashlib.sha256(token.encode()).digest())

    def revocation_key(self, request: AuthRequest) -> bytes:
        return self.caller_token(request).digest  # no revocations here

    def outward_scopes(self, scopes: Sequence[str], principal: Principal | None) -> tuple[str, ...]:
        return tuple(scopes)  # one issuer, no scope_map


@dataclass(frozen=True, slots=True)
class FakeRule:
    scopes: tuple[str, ...] = ()
    clients: tuple[str, ...] | None = None
    deny: bool = False
    rate_limit: tuple[int, float] | None = None
    max_concurrency: int | None = None


@dataclass(slots=True)
class FakePolicy:
    """Default deny: tools without a rule are hidden; globs allowed as rule keys."""

    rules: dict[str, FakeRule]
    baseline_scopes: tuple[str, ...] = BASELINE
    method_scopes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    version: str = "fake-1"
    listing: Listing = "allowed"

    def _rule(self, tool: str) -> tuple[str, FakeRule] | None:
        if tool in self.rules:
            return tool, self.rules[tool]
        for key, rule in self.rules.items():
            if fnmatch.fnmatchcase(tool, key):
                return key, rule
        return None

    def decide_conditions(
        self, principal: Principal, question: AccessQuestion, client_ip: str = ""
    ) -> Decision | None:
        return None  # the fake has no when: conditions

    def decide_tool(self, principal: Principal, tool: str) -> Decision:
        found = self._rule(tool)
        if found is None:
            return Decision(allowed=False, visible=False, rule=None, reason="no rule")
        key, rule = found
        if rule.deny or (rule.clients is not None and principal.client_id not in rule.clients):
            return Decision(allowed=False, visible=False, rule=key, reason="hidden")
        decision = self._scopes(principal, key, rule.scopes)
        reason = "missing scopes" if decision.missing_scopes else "allowed"
        return dataclasses.replace(decision, reason=reason)

    def decide_method(self, principal: Principal, method: str) -> Decision:
        return self._scopes(principal, method, self.method_scopes.get(method, ()))

    def _scopes(self, principal: Principal, rule: str, scopes: Iterable[str]) -> Decision:
        """Allowed when ``principal`` holds the baseline and ``scopes``; visible either way."""
        required = tuple(dict.fromkeys((*self.baseline_scopes, *scopes)))
        missing = tuple(s for s in required if s not in principal.scopes)
        return Decision(
            allowed=not missing,
            visible=True,
            rule=rule,
            required_scopes=required,
            missing_scopes=missing,
        )

    def rate_limit(self, tool: str) -> tuple[int, float] | None:
        found = self._rule(tool)
        return found[1].rate_limit if found else None

    def max_concurrency(self, tool: str) -> int | None:
        found = self._rule(tool)
        return found[1].max_concurrency if found else None

    def allows_tasks(self, tool: str) -> bool:
        return False  # the fake governs no tasks

    # Prompts and resources: the fake governs tools only, so they are all hidden (no rule).
    def decide_prompt(self, principal: Principal, prompt: str) -> Decision:
        return Decision(allowed=False, visible=False, rule=None, reason="no_rule")

    def resource_uri(self, uri: str) -> str | None:
        return resource_uri(uri)

    def decide_resource(self, principal: Principal, uri: str) -> Decision:
        return Decision(allowed=False, visible=False, rule=None, reason="no_rule")

    def decide_template(self, principal: Principal, uri_template: str) -> Decision:
        return Decision(allowed=False, visible=False, rule=None, reason="no_rule")

    def limits(
        self, section: str, rule_key: str | None
    ) -> tuple[tuple[int, float] | None, int | None]:
        return None, None


class FakePolicySource:
    def __init__(self, policy: FakePolicy) -> None:
        self.policy = policy

    def current(self) -> FakePolicy:
        return self.policy


def default_policy() -> FakePolicy:
    return FakePolicy(
        rules={
            "echo": FakeRule(),
            "fail": FakeRule(),
            "slow": FakeRule(max_concurrency=1),
            "progress": FakeRule(),
            "big": FakeRule(),
            "crash": FakeRule(),
            "progress_crash": FakeRule(),
            "region_lookup": FakeRule(scopes=("docs:read",)),
            "search_docs": FakeRule(scopes=("docs:read",)),
            "create_ticket": FakeRule(scopes=("tickets:write",), rate_limit=(2, 60.0)),
            "admin_*": FakeRule(scopes=("admin",), clients=("ops-console",)),
        }
    )


class FakeCatalog:
    def __init__(
        self, tools: list[ToolDef], version: str = "cat-1", ttl_ms: int | None = None
    ) -> None:
        self._tools = {tool.name: tool for tool in sorted(tools, key=lambda t: t.name)}
        self.version = version
        self.ttl_ms = ttl_ms

    def get(self, name: str) -> ToolDef | None:
        return self._tools.get(name)

    def __iter__(self) -> Iterator[ToolDef]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)


def _tool(name: str, properties: dict[str, Any] | None = None, **extra: Any) -> ToolDef:
    schema: dict[str, Any] = {"type": "object", "properties": properties or {}}
    definition: dict[str, Any] = {
        "name": name,
        "description": f"Fake {name}",
        "inputSchema": schema,
    }
    header_params = extra.pop("header_params", ())
    definition.update(extra)
    return ToolDef(name=name, definition=definition, header_params=header_params)


def default_catalog() -> FakeCatalog:
    return FakeCatalog(
        [
            _tool("echo", {"text": {"type": "string"}}),
            _tool("fail"),
            _tool("slow", {"seconds": {"type": "number"}}),
            _tool("progress", {"steps": {"type": "integer"}}),
            _tool("big", {"size": {"type": "integer"}}),
            _tool("crash"),
            _tool("progress_crash"),
            _tool(
                "region_lookup",
                {"region": {"type": "string", "x-mcp-header": "Region"}},
                header_params=(HeaderParam("Region", ("region",), "string"),),
            ),
            _tool("search_docs", {"query": {"type": "string"}}),
            _tool("create_ticket", {"title": {"type": "string"}}),
            _tool("admin_reset"),
            _tool("unlisted_tool"),
        ]
    )


@dataclass(slots=True)
class RecordedCall:
    call: ToolCall
    principal: Principal
    deadline: float


class FakeBackend:
    """Implements ``seams.Backend`` with canned tools; records every call."""

    def __init__(self, catalog: FakeCatalog | None = None) -> None:
        self._catalog = catalog or default_catalog()
        self.calls: list[RecordedCall] = []
        self.cancelled = 0
        """How many calls were cancelled (client disconnect with handler_cancellation)."""
        self.release = asyncio.Event()
        """``slow`` waits for this (or its ``seconds`` argument) before answering."""

    def catalog(self) -> FakeCatalog:
        return self._catalog

    # No prompts or resources: those methods answer method_not_found, as before they existed.
    def surface(self) -> Surface:
        return EMPTY_SURFACE

    async def surface_request(
        self, request: SurfaceRequest, principal: Principal, ctx: RequestContext, deadline: float
    ) -> SurfaceReply:
        return SurfaceReply(fault="garbled")

    def route_uri(self, uri: str) -> tuple[str, str] | None:
        return None

    async def call_tool(
        self, call: ToolCall, principal: Principal, ctx: RequestContext, deadline: float
    ) -> dict[str, Any]:
        self.calls.append(RecordedCall(call, principal, deadline))
        name = call.tool.name
        args = call.arguments
        if name == "fail":
            return {"content": [{"type": "text", "text": "Upstream failed"}], "isError": True}
        if name == "slow":
            seconds = args.get("seconds", 30)
            try:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.release.wait(), timeout=float(seconds))
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
            return _text("slept")
        if name == "progress":
            steps = int(args.get("steps", 3))
            for step in range(1, steps + 1):
                if call.on_progress is not None:
                    await call.on_progress(
                        {"progressToken": call.progress_token, "progress": step, "total": steps}
                    )
            return _text(f"done after {steps} steps")
        if name == "progress_crash":
            if call.on_progress is not None:
                await call.on_progress({"progressToken": call.progress_token, "progress": 1})
            raise RuntimeError("backend bug after the stream started")
        if name == "crash":
            raise RuntimeError("backend bug with secret detail s3cr3t")
        if name == "big":
            return _text("x" * int(args.get("size", 10)))
        if name == "echo":
            return _text(str(args.get("text", "")))
        return _text(f"{name} ok")


def _text(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": False}
