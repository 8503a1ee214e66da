"""The typed configuration: frozen dataclasses, one per section of ``gateway.yaml``.

Built by :mod:`gateway.config.loader`; immutable, so a reload builds a new :class:`Config`.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal, get_args
from urllib.parse import urlsplit

from gateway.config.catalog import CatalogConfig
from gateway.config.identity_model import IdentityConfig, IdentityJwksConfig
from gateway.config.policy_external_model import PolicyExternalConfig
from gateway.config.secrets import Secret
from gateway.jsonkit.read import JsonLimits

__all__ = [
    "ACCESS_TOKEN_TYPE",
    "DEFAULT_BACKEND",
    "DEFAULT_DPOP_ALGORITHMS",
    "DEFAULT_JWT_ALGORITHMS",
    "JWT_ALGORITHMS",
    "TOKEN_EXCHANGE_GRANT",
    "AdminConfig",
    "AuditCheckpoint",
    "AuditConfig",
    "BackendConfig",
    "BackendReadiness",
    "CacheConfig",
    "ClientAuth",
    "Config",
    "CredentialConfig",
    "DpopConfig",
    "DpopMode",
    "InputRequestsConfig",
    "IssuerConfig",
    "JsonLimits",
    "Limits",
    "Listen",
    "LoggingConfig",
    "ProtocolConfig",
    "Rate",
    "RedisConfig",
    "RolesConfig",
    "ScopeMapEntry",
    "SealKey",
    "ServerInfo",
    "StateConfig",
    "StoreErrorPolicies",
    "StoreErrorPolicy",
    "TlsConfig",
    "TokenMode",
    "parse_rate",
]

ClientAuth = Literal["client_secret_basic", "client_secret_post", "private_key_jwt"]
CLIENT_AUTHS: Final = get_args(ClientAuth)
"""The values of ``client_auth`` (check's guarded pass skips the checks of any other value)."""
TokenMode = Literal["introspection", "jwt", "jwt+introspection"]
EventLoop = Literal["auto", "uvloop", "asyncio"]
"""``event_loop``: uvloop when installed (``auto``), required (``uvloop``), or the stdlib's."""
"""``issuer.tokens``: how this issuer's tokens are checked (RFC 7662 introspection, RFC 9068
local validation against the issuer's JWKS, or both: locally first, then introspected)."""

JWT_ALGORITHMS = (
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512",
    "EdDSA", "Ed25519", "Ed448",
)  # fmt: skip
"""Every JWS algorithm ``issuer.algorithms`` may name: asymmetric only (RFC 8725 §3.1/§3.2:
``none`` and the HMAC family are refused at load, so a public key can never be an HMAC secret)."""
DEFAULT_JWT_ALGORITHMS = ("RS256", "PS256", "ES256", "EdDSA")
DEFAULT_DPOP_ALGORITHMS = ("ES256", "ES384", "EdDSA", "Ed25519", "PS256", "RS256")
"""``dpop.algorithms`` by default: what the DPoP clients and issuers we know sign proofs with."""
DpopMode = Literal["off", "allowed", "required"]


@dataclass(frozen=True, slots=True)
class DpopConfig:
    """``issuer.dpop``: DPoP-bound tokens (RFC 9449) of this issuer at the resource server."""

    mode: DpopMode = "off"
    """``off``: a token with ``cnf`` is refused (as before DPoP support); ``allowed``: bearer
    and DPoP-bound tokens; ``required``: DPoP-bound tokens only."""
    algorithms: tuple[str, ...] = DEFAULT_DPOP_ALGORITHMS
    iat_window_s: int = 300
    """How far a proof's ``iat`` may be from now, either way (clock skew included)."""
    nonce: bool = False
    """Require a server nonce (RFC 9449 §8/§9) in every proof for this issuer's tokens."""
    nonce_rotation_s: int = 120
    """A nonce is accepted in the period it was issued in and the next one."""

    @property
    def enabled(self) -> bool:
        return self.mode != "off"


@dataclass(frozen=True, slots=True)
class Rate:
    """``count`` events per ``per_s`` seconds (parsed from ``N/second|minute|hour``)."""

    count: int
    per_s: float


def parse_rate(text: str | None) -> Rate | None:
    if text is None:
        return None
    number, _, unit = text.partition("/")
    return Rate(int(number), {"second": 1.0, "minute": 60.0, "hour": 3600.0}[unit])


@dataclass(frozen=True, slots=True)
class Listen:
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class ServerInfo:
    name: str = "mcp-resource-gateway"
    title: str | None = None
    instructions: str | None = None
    resource_name: str = "MCP resource gateway"
    resource_documentation: str | None = None


@dataclass(frozen=True, slots=True)
class CacheConfig:
    max_ttl_s: int = 60
    negative_ttl_s: int = 5
    max_entries: int = 100_000
    negative_max_entries: int = 10_000
    stale_if_error_s: int = 0


@dataclass(frozen=True, slots=True)
class RolesConfig:
    """``issuer.roles`` / ``issuer.groups``: a claim of role or group names (Entra app roles
    and groups, Okta groups, Auth0 permissions, Keycloak realm roles) added to the scope set."""

    claim: tuple[str, ...] = ("roles",)
    """The claim, or a path into nested objects (``[realm_access, roles]`` for Keycloak)."""
    prefix: str = ""
    """Prepended to each role (``role:`` turns ``Notes.Write`` into ``role:Notes.Write``)."""


@dataclass(frozen=True, slots=True)
class ScopeMapEntry:
    """One ``issuer.scope_map`` entry: a scope as this issuer's clients request it -> the
    policy's name for it."""

    spelled: str
    """As the issuer's clients request it: after ``scope_prefix`` (scopes) or the roles' prefix
    (role values), so exactly what the 403 challenge of this issuer's callers names."""
    scope: str
    """The policy's name for it (the policy vocabulary)."""
    where: str = field(default="", compare=False)
    """``file:line:col`` of the key in ``gateway.yaml`` (for ``check``'s warnings)."""


@dataclass(frozen=True, slots=True)
class IssuerConfig:
    url: str
    client_id: str | None = None
    """The gateway's client id for introspection; None with ``tokens: jwt``."""
    client_auth: ClientAuth = "client_secret_basic"
    client_secret: Secret | None = None
    private_key: Secret | None = None
    private_key_id: str | None = None
    signing_alg: str = "RS256"
    assertion_audience: Literal["issuer", "token_endpoint", "introspection_endpoint"] = "issuer"
    """``aud`` of private_key_jwt introspection assertions: the issuer identifier (default,
    draft-ietf-oauth-rfc7523bis), the token endpoint, or the introspection endpoint."""
    introspection_endpoint: str | None = None
    token_endpoint: str | None = None
    timeout_s: float = 3.0
    metadata_refresh_s: float = 3600.0
    allow_insecure_http: bool = False
    require_iss: bool = False
    clock_skew_s: int = 30
    subject_fallback: Literal["none", "client_id"] = "none"
    audiences: tuple[str, ...] = ()
    """Extra accepted audiences besides ``resource``."""
    cache: CacheConfig = field(default_factory=CacheConfig)
    failed_auth_rate: Rate | None = Rate(30, 60.0)
    """Per client IP budget of failed authentications before 429 (protects the issuer)."""
    failed_auth_probe_interval_s: float = 5.0
    """Over budget, one uncached token per client IP per interval is still introspected, so a
    valid caller sharing an address with a guesser gets in; 0 disables the probes."""
    tokens: TokenMode = "introspection"
    jwks_uri: str | None = None
    """The JWK Set URL; None: the ``jwks_uri`` of the issuer's metadata."""
    algorithms: tuple[str, ...] = DEFAULT_JWT_ALGORITHMS
    accept_typ: tuple[str | None, ...] = ("application/at+jwt",)
    """Accepted JOSE ``typ`` values, normalised (lowercase, ``application/`` prefixed, RFC 7515
    §4.1.9); None accepts a token without ``typ``."""
    scope_claims: tuple[str, ...] = ("scope", "scp")
    scope_prefix: str = ""
    """Prepended to every scope read from ``scope_claims`` (Entra ID's ``scp`` carries
    ``mcp.access`` for the scope clients request as ``api://<app id>/mcp.access``)."""
    roles: RolesConfig | None = None
    groups: RolesConfig | None = None
    """``issuer.groups``: group names as scopes (claim ``groups`` by default), like ``roles``;
    an Entra group overage is refused (``groups_overage``)."""
    scope_map: tuple[ScopeMapEntry, ...] = ()
    """``scope_map``, in file order: this issuer's spellings -> the policy's names (every mode;
    scopes not in it pass unchanged unless ``scope_map_only``). Two entries may share a target;
    the first one is how the gateway spells that scope back to this issuer's callers."""
    scope_map_only: bool = False
    """``scope_map_only``: only ``scope_map`` keys grant policy scopes; every other scope, role
    or group of this issuer's tokens is dropped (a less trusted issuer cannot grant a policy
    scope by minting its name)."""
    subject_claim: str = "sub"
    client_id_claims: tuple[str, ...] = ("client_id", "azp", "appid")
    max_token_bytes: int = 8192
    max_token_lifetime_s: int = 86400
    """The longest a JWT of this issuer may still be valid (``exp`` at most this far ahead, plus
    ``clock_skew_s``; a later ``exp`` is refused): the bound of a revocation kept until ``exp``."""
    jwks_min_refresh_s: float = 60.0
    jwks_max_refresh_s: float = 3600.0
    jwks_unknown_kid_interval_s: float = 30.0
    dpop: DpopConfig = field(default_factory=DpopConfig)

    @property
    def introspects(self) -> bool:
        """Whether this issuer's tokens are introspected (RFC 7662)."""
        return self.tokens != "jwt"

    @property
    def validates_jwt(self) -> bool:
        """Whether this issuer's tokens are validated locally (RFC 9068)."""
        return self.tokens != "introspection"


TOKEN_EXCHANGE_GRANT: Final = "urn:ietf:params:oauth:grant-type:token-exchange"  # noqa: S105
ACCESS_TOKEN_TYPE: Final = "urn:ietf:params:oauth:token-type:access_token"  # noqa: S105
"""RFC 8693 §3: the token type URI of an OAuth 2.0 access token."""


@dataclass(frozen=True, slots=True)
class CredentialConfig:
    type: Literal["bearer", "client_credentials", "token_exchange"]
    token: Secret | None = None
    client_id: str | None = None
    client_secret: Secret | None = None
    client_auth: ClientAuth = "client_secret_basic"
    private_key: Secret | None = None
    private_key_id: str | None = None
    token_endpoint: str | None = None
    scope: str | None = None
    resource: str | None = None
    audience: str | None = None
    refresh_margin_s: int = 30
    requested_token_type: str = ACCESS_TOKEN_TYPE
    """``token_exchange``: RFC 8693 §2.1 ``requested_token_type``."""
    actor: Literal["none", "service"] = "none"
    """``token_exchange``: ``service`` sends the gateway's own client-credentials token as the
    RFC 8693 ``actor_token``."""
    issuer: str | None = None
    """``token_exchange``: exchange only tokens of this issuer (None: each caller's own)."""


@dataclass(frozen=True, slots=True)
class TlsConfig:
    ca_file: str | None = None
    client_cert: str | None = None
    client_key: str | None = None


DEFAULT_BACKEND: Final = "default"
"""The name of the one backend of a ``backend:`` section (metrics, logs, audit, ``/readyz``)."""

BackendReadiness = Literal["all", "any"]
"""``backend_readiness``: ``/readyz`` needs every backend's catalog, or at least one."""


@dataclass(frozen=True, slots=True)
class BackendConfig:
    """One upstream MCP server: ``backend:``, or one entry of ``backends:``.

    Everything the gateway needs to talk to it on its own: URL, service credential, TLS,
    deadlines, connection pool, catalog refresh, and how its tools are named to clients.
    """

    url: str
    credential: CredentialConfig
    allow_insecure_http: bool = False
    tls: TlsConfig = field(default_factory=TlsConfig)
    timeout_s: float = 10.0
    connect_timeout_s: float = 3.0
    catalog_refresh_s: float = 300.0
    name_prefix: str = ""
    """Added to the upstream's tool names as clients, policies and the audit trail see them:
    ``backend.name_prefix``, or ``backends.<name>.prefix`` (default ``<name>__``)."""
    identity_headers: bool = False
    tool_timeouts_s: tuple[tuple[str, float], ...] = ()
    max_connections: int = 100
    identity: IdentityConfig = field(default_factory=IdentityConfig)
    """Signed caller assertions (``identity.assertion``)."""
    name: str = DEFAULT_BACKEND
    """The key under ``backends:`` (``default`` for a ``backend:`` section): a bounded label of
    metrics, logs, the audit trail and ``/readyz``."""

    def tool_timeout(self, tool: str) -> float:
        for name, seconds in self.tool_timeouts_s:
            if name == tool:
                return seconds
        return self.timeout_s


@dataclass(frozen=True, slots=True)
class Limits:
    max_body_bytes: int = 65_536
    max_response_bytes: int = 1_048_576
    max_in_flight: int = 256
    request_deadline_s: float = 15.0
    drain_timeout_s: float = 10.0
    shutdown_delay_s: float = 0.0
    """On SIGTERM: keep serving (while /readyz says 503) this long before draining, so load
    balancers stop routing here first (Kubernetes removes endpoints asynchronously)."""
    pre_auth_rate: Rate | None = Rate(1200, 60.0)
    principal_rate: Rate | None = Rate(600, 60.0)
    json: JsonLimits = field(default_factory=JsonLimits)
    max_in_flight_per_principal: int | None = None
    """None: a quarter of ``max_in_flight`` (see :attr:`principal_in_flight`)."""
    max_in_flight_per_ip: int | None = None
    """None: a quarter of ``max_in_flight`` (see :attr:`ip_in_flight`)."""
    max_subscriptions: int = 1024
    """Open ``subscriptions/listen`` and legacy GET streams per replica (also each backend's
    listen pool); a quarter of it, the legacy GET streams one subject may have attached."""
    max_subscriptions_per_principal: int = 4
    """Open ``subscriptions/listen`` streams one subject may hold on a replica (legacy sessions
    take none)."""
    max_subscribed_uris_per_principal: int = 64
    """``resourceSubscriptions`` URIs one subject may hold across its streams on a replica."""
    subscription_lifetime_s: float = 900.0
    """A listen stream ends gracefully after this long (or at the token's expiry, if sooner)."""
    header_timeout_s: float = 10.0
    keepalive_timeout_s: float = 75.0
    max_header_bytes: int = 32_768
    max_connections: int = 1024
    max_connections_per_ip: int | None = None
    """None: a quarter of ``max_connections`` (see :attr:`ip_connections`)."""
    max_description_chars: int = 2048
    """Longest title or description of a backend's tool, prompt or resource, in characters;
    longer ones are cut (description hygiene, :mod:`gateway.backend.catalog.hygiene`)."""

    @property
    def principal_in_flight(self) -> int:
        """In-flight MCP requests one principal may hold (explicit, or max_in_flight / 4)."""
        return self.max_in_flight_per_principal or _quarter(self.max_in_flight)

    @property
    def ip_in_flight(self) -> int:
        """In-flight MCP requests one client IP may hold (explicit, or max_in_flight / 4)."""
        return self.max_in_flight_per_ip or _quarter(self.max_in_flight)

    @property
    def ip_connections(self) -> int:
        """Open connections one TCP peer may hold (explicit, or max_connections / 4)."""
        return self.max_connections_per_ip or _quarter(self.max_connections)


def _quarter(total: int) -> int:
    return max(1, total // 4)


@dataclass(frozen=True, slots=True)
class ProtocolConfig:
    discover_ttl_ms: int = 3_600_000
    tools_list_ttl_ms: int = 60_000
    page_size: int = 100
    legacy_subscriptions: bool = True
    """Offer legacy ``resources/subscribe`` and its session (docs/protocol.md#legacy-subscriptions);
    off for replicas behind a balancer without affinity by client address."""


@dataclass(frozen=True, slots=True)
class LoggingConfig:
    format: Literal["json", "console"] = "json"
    level: Literal["debug", "info", "warning", "error"] = "info"
    subject: Literal["plain", "fingerprint"] = "plain"
    log_arguments: bool = False


@dataclass(frozen=True, slots=True)
class AuditCheckpoint:
    """``audit.checkpoint``: sign a checkpoint event every ``every`` events and at shutdown."""

    key: Secret
    """An Ed25519 private key, PEM (checked at load)."""
    every: int = 1000


@dataclass(frozen=True, slots=True)
class AuditConfig:
    sink: Literal["stdout", "file", "off"] = "stdout"
    path: str | None = None
    max_bytes: int = 50_000_000
    backups: int = 5
    checkpoint: AuditCheckpoint | None = None


StoreErrorPolicy = Literal["local", "deny"]
"""What a decision that needs the shared store does when the store cannot answer in time."""


@dataclass(frozen=True, slots=True)
class StoreErrorPolicies:
    """``state.on_store_error``: one policy per kind of shared decision (docs/operations.md)."""

    ip: StoreErrorPolicy = "local"
    principal: StoreErrorPolicy = "local"
    tool: StoreErrorPolicy = "local"
    tool_concurrency: StoreErrorPolicy = "local"
    failed_auth: StoreErrorPolicy = "local"
    revocation: StoreErrorPolicy = "local"
    dpop_replay: StoreErrorPolicy = "deny"
    """A DPoP proof's ``jti`` Redis could not check: ``deny`` (503) by default, since ``local``
    lets a proof replayed at another replica through while Redis is down."""


DEFAULT_REDIS_TIMEOUT_MS: Final = 250
"""``state.redis.timeout_ms``. 100 ms tripped the 1 s back-off on a loaded host: 64 callers on a
shared 2-core machine saw Redis calls of 86-145 ms at the 99.9th percentile (docs/operations.md),
and under ``on_store_error: deny`` (the DPoP replay check's default) each trip refused every
call for a second."""


@dataclass(frozen=True, slots=True)
class RedisConfig:
    url: Secret
    """``redis://``, ``rediss://`` (TLS) or ``unix://``; may carry the password, hence a secret."""
    key_prefix: str = "mcp-gateway:"
    timeout_ms: int = DEFAULT_REDIS_TIMEOUT_MS
    tls: TlsConfig = field(default_factory=TlsConfig)


@dataclass(frozen=True, slots=True)
class StateConfig:
    """``state:``: where replica-shared state lives (``memory`` = this replica only)."""

    backend: Literal["memory", "redis"] = "memory"
    redis: RedisConfig | None = None
    share_token_cache: bool = False
    on_store_error: StoreErrorPolicies = field(default_factory=StoreErrorPolicies)


@dataclass(frozen=True, slots=True)
class AdminConfig:
    """``admin:``: the ops listener's admin API (``POST /admin/revoke``) and revocation."""

    token: Secret | None = None
    """The admin credential; without it there is no admin endpoint."""
    revocation_ttl_s: int = 3600
    """How long a token revoked at the gateway stays refused at least (>= the cache's longest
    hold); a JWT stays refused until its ``exp`` when that is later."""


@dataclass(frozen=True, slots=True)
class SealKey:
    """One ``input_requests.seal_keys`` entry: a key id and its 32-byte AEAD key."""

    id: str
    """Short, non-secret name carried in every sealed state (rotation)."""
    key: bytes = field(repr=False)
    """The decoded key (from a base64, base64url or hex secret reference); never logged."""


@dataclass(frozen=True, slots=True)
class InputRequestsConfig:
    """``input_requests:``: relaying 2026-07-28 input requests with gateway-sealed state.

    Off unless configured: without it an upstream ``input_required`` result is refused as a
    tool error, as before the relay existed."""

    enabled: bool = False
    seal_keys: tuple[SealKey, ...] = ()
    """Every key that may open a sealed ``requestState`` (old keys stay here during rotation)."""
    seal_key_id: str = ""
    """The key that seals new rounds (default: the first of ``seal_keys``)."""
    ttl_s: int = 600
    max_rounds: int = 8
    max_state_bytes: int = 8192
    """Largest upstream ``requestState`` (UTF-8 bytes) the gateway will seal."""
    max_input_response_bytes: int = 32768
    """Largest ``inputResponses`` object (canonical JSON bytes) a retry may carry."""


@dataclass(frozen=True, slots=True)
class CorsConfig:
    """``cors:``: CORS answers for browser clients from the trusted origins (docs/protocol.md)."""

    enabled: bool = False
    max_age_s: int = 600
    """``Access-Control-Max-Age`` of a preflight answer (browsers cap it: Chromium at 7200)."""


@dataclass(frozen=True, slots=True)
class OtlpConfig:
    """``tracing.otlp``: where spans go (an OpenTelemetry Collector or a vendor's OTLP intake)."""

    endpoint: str
    """``http/protobuf``: the traces URL (``/v1/traces`` appended to a URL without a path);
    ``grpc``: the collector's address (``http://host:4317``; ``https`` for TLS)."""
    protocol: Literal["http/protobuf", "grpc"] = "http/protobuf"
    headers: tuple[tuple[str, Secret], ...] = ()
    """Sent with every export (e.g. a vendor's API key); values are secret references."""
    timeout_s: float = 10.0


@dataclass(frozen=True, slots=True)
class TracingConfig:
    """``tracing:``: OpenTelemetry spans of every MCP request (docs/operations.md#tracing)."""

    otlp: OtlpConfig
    sample_ratio: float = 1.0
    """For a trace the gateway starts; a caller's sampled flag decides for its own traces."""
    service_name: str = "mcp-gateway"
    max_queue_spans: int = 2048
    """Spans waiting for export; past it new spans are dropped (counted), never waited for."""


@dataclass(frozen=True, slots=True)
class Config:
    """The whole validated configuration. Immutable; a reload builds a new one."""

    source: str
    resource: str
    """Canonical resource URI (RFC 8707): lowercase scheme/host, no fragment, no query."""
    issuer: IssuerConfig
    """The first trusted issuer (``issuer:``, or the first entry of ``issuers:``): its
    ``token_endpoint`` and ``timeout_s`` serve the backends' ``client_credentials``."""
    backend: BackendConfig | None
    """The ``backend:`` section as written (None with ``backends:``); the running gateway reads
    :attr:`backends`, which holds it as its one entry."""
    policy_paths: tuple[Path, ...]
    server: ServerInfo = field(default_factory=ServerInfo)
    listen: Listen = Listen("0.0.0.0", 8080)  # noqa: S104 - behind the TLS proxy by design
    ops_listen: Listen = Listen("127.0.0.1", 9090)
    policy_poll_s: float = 2.0
    event_loop: EventLoop = "auto"
    limits: Limits = field(default_factory=Limits)
    protocol: ProtocolConfig = field(default_factory=ProtocolConfig)
    trusted_proxies: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()
    allowed_origins: frozenset[str] = frozenset()
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    audit: AuditConfig = field(default_factory=AuditConfig)
    state: StateConfig = field(default_factory=StateConfig)
    admin: AdminConfig = field(default_factory=AdminConfig)
    backends: tuple[BackendConfig, ...] = ()
    """Every backend, in configuration order (``backends:``, or the one ``backend:``)."""
    backend_readiness: BackendReadiness = "all"
    input_requests: InputRequestsConfig = field(default_factory=InputRequestsConfig)
    warnings: tuple[str, ...] = ()
    more_issuers: tuple[IssuerConfig, ...] = ()
    """The entries of ``issuers:`` after the first (see :attr:`issuers`)."""
    identity_jwks: IdentityJwksConfig = field(default_factory=IdentityJwksConfig)
    cors: CorsConfig = field(default_factory=CorsConfig)
    tracing: TracingConfig | None = None
    """None without a ``tracing:`` section: no tracing code runs at all."""
    policy_external: PolicyExternalConfig | None = None
    """None without a ``policy_external:`` section: no decision point is consulted at all."""
    catalog: CatalogConfig | None = None
    """None without a ``catalog:`` section: no lock is read, nothing is compared."""

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
