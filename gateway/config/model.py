"""The typed configuration: :class:`Config` and the small sections, frozen dataclasses whose fields
declare the keys of ``gateway.yaml`` (:mod:`gateway.config.declare`); the larger sections have
modules of their own (``issuer_model``, ``backend_model``, ``limits_model``, ``state_model``,
``identity_model``, ``policy_external_model``, ``guardrails_model``, ``approvals_model``,
``catalog``).

Built by :mod:`gateway.config.loader`; immutable, so a reload builds a new :class:`Config`.
"""

import ipaddress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Final, Literal
from urllib.parse import urlsplit

from gateway.config.approvals_model import ApprovalsConfig
from gateway.config.backend_model import NAME_PREFIX, BackendConfig, BackendReadiness
from gateway.config.catalog import CatalogConfig
from gateway.config.declare import INTERNAL, Key
from gateway.config.guardrails_model import GUARDRAIL_NAME_PATTERN, GuardrailConfig
from gateway.config.identity_model import IdentityJwksConfig
from gateway.config.issuer_model import IssuerConfig
from gateway.config.limits_model import Limits
from gateway.config.login_model import LoginConfig
from gateway.config.policy_external_model import PolicyExternalConfig
from gateway.config.secrets import SECRET, SecretRef
from gateway.config.state_model import AdminConfig, StateConfig

__all__ = [
    "AuditCheckpoint",
    "AuditConfig",
    "Config",
    "CorsConfig",
    "EventLoop",
    "InputRequestsConfig",
    "Listen",
    "LoggingConfig",
    "OtlpConfig",
    "ProtocolConfig",
    "SealKey",
    "ServerInfo",
    "TasksConfig",
    "TracingConfig",
    "UserOAuthConfig",
]

EventLoop = Literal["auto", "uvloop", "asyncio"]
"""``event_loop``: uvloop when installed (``auto``), required (``uvloop``), or the stdlib's."""


@dataclass(frozen=True, slots=True)
class Listen:
    """``listen`` / ``ops_listen``: a listener's address (each key has its own default)."""

    host: Annotated[str, Key(min_length=1)]
    port: Annotated[int, Key(minimum=0, maximum=65_535)]


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """``server:``: how the gateway presents itself to MCP clients and in its metadata."""

    name: Annotated[str, Key(min_length=1, max_length=128)] = "mcp-resource-gateway"
    title: Annotated[str | None, Key(max_length=256)] = None
    instructions: Annotated[str | None, Key(max_length=16_384)] = None
    resource_name: Annotated[str, Key(max_length=256)] = "MCP resource gateway"
    resource_documentation: Annotated[str | None, Key(max_length=2048)] = None


@dataclass(frozen=True, slots=True)
class ProtocolConfig:
    """``protocol:``: MCP protocol tunables."""

    discover_ttl_ms: Annotated[int, Key(minimum=0)] = 3_600_000
    tools_list_ttl_ms: Annotated[int, Key(minimum=0)] = 60_000
    page_size: Annotated[int, Key(minimum=1, maximum=1000)] = 100
    legacy_subscriptions: bool = True
    """Offer legacy ``resources/subscribe`` and its session (docs/protocol.md#legacy-subscriptions);
    off for replicas behind a balancer without affinity by client address."""


@dataclass(frozen=True, slots=True)
class LoggingConfig:
    """``logging:``: log format and content."""

    format: Literal["json", "console"] = "json"
    level: Literal["debug", "info", "warning", "error"] = "info"
    subject: Literal["plain", "fingerprint"] = "plain"
    log_arguments: bool = False


@dataclass(frozen=True, slots=True)
class AuditCheckpoint:
    """``audit.checkpoint``: sign a checkpoint event every ``every`` events and at shutdown."""

    key: Annotated[SecretRef, Key(required=True)]
    """An Ed25519 private key, PEM (checked at load)."""
    every: Annotated[int, Key(minimum=1, maximum=1_000_000)] = 1000


@dataclass(frozen=True, slots=True)
class AuditConfig:
    """``audit:``: the audit trail (one event per MCP decision)."""

    sink: Annotated[
        Literal["stdout", "file", "off"],
        Key(schema={"enum": ["stdout", "file", "off", False]}),  # YAML 1.1: a bare off is false
    ] = "stdout"
    path: Annotated[str | None, Key(min_length=1)] = None
    max_bytes: Annotated[int, Key(minimum=4096)] = 50_000_000
    backups: Annotated[int, Key(minimum=0, maximum=1000)] = 5
    checkpoint: AuditCheckpoint | None = None


SEAL_KEY_ID: Final = Key(pattern="^[A-Za-z0-9_-]{1,16}$")
"""A seal key's id (``input_requests``, ``user_oauth``)."""


@dataclass(frozen=True, slots=True)
class SealKey:
    """One ``input_requests.seal_keys`` entry: a key id and its 32-byte AEAD key."""

    id: Annotated[str, SEAL_KEY_ID, Key(required=True)]
    """Short, non-secret name carried in every sealed state (rotation)."""
    key: Annotated[bytes, SECRET, Key(required=True)] = field(repr=False)
    """The decoded key (from a base64, base64url or hex secret reference); never logged."""


@dataclass(frozen=True, slots=True)
class InputRequestsConfig:
    """``input_requests:``: relaying 2026-07-28 input requests with gateway-sealed state.

    Off unless configured: without it an upstream ``input_required`` result is refused as a
    tool error, as before the relay existed."""

    enabled: Annotated[bool, Key(default=True)] = False
    """Off without the section; writing the section turns it on unless it says ``false``."""
    seal_keys: Annotated[tuple[SealKey, ...], Key(min_items=1, max_items=8)] = ()
    """Every key that may open a sealed ``requestState`` (old keys stay here during rotation)."""
    seal_key_id: Annotated[str, SEAL_KEY_ID] = ""
    """The key that seals new rounds (default: the first of ``seal_keys``)."""
    ttl_s: Annotated[int, Key(minimum=10, maximum=3600)] = 600
    max_rounds: Annotated[int, Key(minimum=1, maximum=32)] = 8
    max_state_bytes: Annotated[int, Key(minimum=256, maximum=32_768)] = 8192
    """Largest upstream ``requestState`` (UTF-8 bytes) the gateway will seal."""
    max_input_response_bytes: Annotated[int, Key(minimum=1024, maximum=1_048_576)] = 32768
    """Largest ``inputResponses`` object (canonical JSON bytes) a retry may carry."""


@dataclass(frozen=True, slots=True)
class UserOAuthConfig:
    """``user_oauth:``: the store of per-user upstream tokens and the consent links; required
    by a backend whose ``credential.type`` is ``user_oauth``
    (docs/user-authorization.md#per-user-upstream-authorization)."""

    seal_keys: Annotated[tuple[SealKey, ...], Key(required=True, min_items=1, max_items=8)] = ()
    """The key ring the stored upstream tokens are sealed under (its own: records live for
    days, far longer than a ``requestState``); old keys stay here while records are re-sealed."""
    seal_key_id: Annotated[str, SEAL_KEY_ID] = ""
    """The key that seals new records (default: the first of ``seal_keys``)."""
    consent_ttl_s: Annotated[int, Key(minimum=60, maximum=3600)] = 600
    """How long a consent link (and the upstream authorization it starts) may take."""
    max_idle_days: Annotated[int, Key(minimum=1, maximum=365)] = 30
    """A person's stored tokens are deleted after this many days without a call using them."""


@dataclass(frozen=True, slots=True)
class TasksConfig:
    """``tasks:``: relaying the tasks extension (``io.modelcontextprotocol/tasks``).

    Off unless configured: without it the extension is never advertised nor forwarded, and
    ``tasks/*`` are unknown methods. The handles are sealed under ``input_requests.seal_keys``."""

    enabled: Annotated[bool, Key(default=True)] = False
    """Off without the section; writing the section turns it on unless it says ``false``."""
    max_ttl_s: Annotated[int, Key(minimum=60, maximum=2_592_000)] = 86_400
    """The longest a task handle lives (a task's ``ttlMs`` is clamped to it)."""
    min_poll_interval_ms: Annotated[int, Key(minimum=100, maximum=60_000)] = 1000
    """The shortest ``pollIntervalMs`` the gateway tells clients; a caller's requests for one
    task beyond twice that rate are refused (429)."""


@dataclass(frozen=True, slots=True)
class CorsConfig:
    """``cors:``: CORS answers for browser clients from the trusted origins (docs/protocol.md)."""

    enabled: bool = False
    max_age_s: Annotated[int, Key(minimum=0, maximum=86_400)] = 600
    """``Access-Control-Max-Age`` of a preflight answer (browsers cap it: Chromium at 7200)."""


@dataclass(frozen=True, slots=True)
class OtlpConfig:
    """``tracing.otlp``: where spans go (an OpenTelemetry Collector or a vendor's OTLP intake)."""

    endpoint: Annotated[str, Key(required=True, min_length=1)]
    """``http/protobuf``: the traces URL (``/v1/traces`` appended to a URL without a path);
    ``grpc``: the collector's address (``http://host:4317``; ``https`` for TLS)."""
    protocol: Literal["http/protobuf", "grpc"] = "http/protobuf"
    headers: Annotated[
        tuple[tuple[str, SecretRef], ...],
        Key(max_properties=16, names=Key(pattern="^[A-Za-z0-9-]{1,64}$")),
    ] = ()
    """Sent with every export (e.g. a vendor's API key); values are secret references."""
    timeout_s: Annotated[float, Key(exclusive_minimum=0, maximum=60)] = 10.0


@dataclass(frozen=True, slots=True)
class TracingConfig:
    """``tracing:``: OpenTelemetry spans of every MCP request (docs/operations.md#tracing)."""

    otlp: Annotated[OtlpConfig, Key(required=True)]
    sample_ratio: Annotated[float, Key(minimum=0, maximum=1)] = 1.0
    """For a trace the gateway starts; a caller's sampled flag decides for its own traces."""
    service_name: Annotated[str, Key(min_length=1, max_length=128)] = "mcp-gateway"
    max_queue_spans: Annotated[int, Key(minimum=1, maximum=1_000_000)] = 2048
    """Spans waiting for export; past it new spans are dropped (counted), never waited for."""


_LISTEN = Key(ref="listen")


@dataclass(frozen=True, slots=True)
class Config:
    """The whole validated configuration. Immutable; a reload builds a new one."""

    source: Annotated[str, INTERNAL]
    resource: Annotated[str, Key(required=True, min_length=1)]
    """Canonical resource URI (RFC 8707): lowercase scheme/host, no fragment, no query."""
    issuer: Annotated[IssuerConfig, Key(ref="issuer")]
    """The first trusted issuer (``issuer:``, or the first entry of ``issuers:``): its
    ``token_endpoint`` and ``timeout_s`` serve the backends' ``client_credentials``."""
    backend: Annotated[
        BackendConfig | None, Key(ref="backend", extend={"name_prefix": NAME_PREFIX})
    ]
    """The ``backend:`` section as written (None with ``backends:``); the running gateway reads
    :attr:`backends`, which holds it as its one entry."""
    policy_paths: Annotated[
        tuple[Path, ...],
        Key(
            yaml="policy",
            required=True,
            shorthand=True,
            min_items=1,
            items=Key(min_length=1),
            message="must be a path or a non-empty list of paths",
        ),
    ]
    server: ServerInfo = field(default_factory=ServerInfo)
    listen: Annotated[Listen, _LISTEN] = Listen("0.0.0.0", 8080)  # noqa: S104 - behind the TLS proxy by design
    ops_listen: Annotated[Listen, _LISTEN] = Listen("127.0.0.1", 9090)
    policy_poll_s: Annotated[float, Key(minimum=0, maximum=3600)] = 2.0
    event_loop: EventLoop = "auto"
    limits: Limits = field(default_factory=Limits)
    protocol: ProtocolConfig = field(default_factory=ProtocolConfig)
    trusted_proxies: Annotated[
        tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...],
        Key(schema={"type": "array", "items": {"type": "string", "minLength": 1}}),
    ] = ()
    allowed_origins: Annotated[frozenset[str], Key(items=Key(min_length=1))] = frozenset()
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    audit: AuditConfig = field(default_factory=AuditConfig)
    state: StateConfig = field(default_factory=StateConfig)
    admin: AdminConfig = field(default_factory=AdminConfig)
    backends: Annotated[
        tuple[BackendConfig, ...],
        Key(
            by_name=True,
            min_properties=1,
            max_properties=32,
            items=Key(ref="backend", extend={"prefix": NAME_PREFIX}),
        ),
    ] = ()
    """Every backend, in configuration order (``backends:``, or the one ``backend:``)."""
    backend_readiness: BackendReadiness = "all"
    input_requests: InputRequestsConfig = field(default_factory=InputRequestsConfig)
    tasks: TasksConfig = field(default_factory=TasksConfig)
    warnings: Annotated[tuple[str, ...], INTERNAL] = ()
    more_issuers: Annotated[
        tuple[IssuerConfig, ...],
        Key(yaml="issuers", min_items=1, max_items=16, items=Key(ref="issuer")),
    ] = ()
    """The entries of ``issuers:`` after the first (see :attr:`issuers`; in the file,
    ``issuers:`` lists them all)."""
    identity_jwks: IdentityJwksConfig = field(default_factory=IdentityJwksConfig)
    cors: CorsConfig = field(default_factory=CorsConfig)
    tracing: TracingConfig | None = None
    """None without a ``tracing:`` section: no tracing code runs at all."""
    policy_external: PolicyExternalConfig | None = None
    """None without a ``policy_external:`` section: no decision point is consulted at all."""
    catalog: CatalogConfig | None = None
    """None without a ``catalog:`` section: no lock is read, nothing is compared."""
    login: LoginConfig | None = None
    """None without a ``login:`` section: no page of the browser login surface is served."""
    guardrails: Annotated[
        tuple[GuardrailConfig, ...],
        Key(
            by_name=True,
            max_properties=32,
            names=Key(
                pattern=GUARDRAIL_NAME_PATTERN,
                message="must be 1-32 characters of a-z, 0-9, '_' and '-', starting with a "
                "letter or digit",
            ),
        ),
    ] = ()
    """The named content processors policy rules may select (``guardrails: [name]``); empty:
    no processor is ever asked."""
    approvals: ApprovalsConfig = field(default_factory=ApprovalsConfig)
    """How calls a rule holds for approval (``approval:``) are approved: the approvers' claims
    kept at sign-in, the retry's wait, the webhook (docs/policy.md#approvals)."""
    user_oauth: UserOAuthConfig | None = None
    """None without a ``user_oauth:`` section (then no backend may be ``type: user_oauth``)."""

    @property
    def issuers(self) -> tuple[IssuerConfig, ...]:
        """Every trusted issuer, in configuration order (``issuer:`` is a list of one)."""
        return (self.issuer, *self.more_issuers)

    @property
    def issuer_urls(self) -> tuple[str, ...]:
        """Every trusted issuer's ``url``, in order: what the policy qualifies its ``subjects``
        and ``clients`` entries by (a plain entry is the first issuer's)."""
        return tuple(issuer.url for issuer in self.issuers)

    def __post_init__(self) -> None:
        if not self.backends and self.backend is not None:
            # The single `backend:` is the one backend (frozen: set once, here).
            object.__setattr__(self, "backends", (self.backend,))

    @property
    def mcp_path(self) -> str:
        return urlsplit(self.resource).path or "/"

    @property
    def public_origin(self) -> str:
        parts = urlsplit(self.resource)
        return f"{parts.scheme}://{parts.netloc}"

    @property
    def trusted_origins(self) -> frozenset[str]:
        """The one list of trusted browser origins: ``allowed_origins`` plus the resource's own
        origin (a page it serves is same-origin with us, never a DNS-rebinding attacker). The
        Origin check (pipeline step 3) and the CORS answers both read it."""
        return self.allowed_origins | {self.public_origin.lower()}

    @property
    def prm_path(self) -> str:
        """RFC 9728 §3.1: the well-known path with the resource's path appended."""
        path = self.mcp_path
        return "/.well-known/oauth-protected-resource" + ("" if path == "/" else path)

    @property
    def prm_url(self) -> str:
        return self.public_origin + self.prm_path
