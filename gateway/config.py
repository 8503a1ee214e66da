"""Load and validate ``gateway.yaml`` into one immutable, typed :class:`Config`.

Order of work: parse YAML with positions, validate against the packaged JSON Schema
(``gateway/schema/gateway.schema.json``, also shipped as ``docs/schema/gateway.schema.json`` for
editors), then semantic checks (URLs, CIDRs, secret references). Every finding is collected and
reported at once as ``file:line:column: key.path: message``; :func:`load_config` raises
:class:`~gateway.errors.ConfigError` with all of them. Literal secrets are warnings, not errors.

Secrets are resolved at load (``{env: NAME}`` / ``{file: PATH}``) and wrapped in :class:`Secret`,
whose ``repr`` never shows the value.
"""

from __future__ import annotations

import ipaddress
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal
from urllib.parse import urlsplit

from gateway.errors import ConfigError
from gateway.yaml_source import Located, PathPart, SchemaValidator, load_yaml

__all__ = [
    "AuditConfig",
    "BackendConfig",
    "CacheConfig",
    "Config",
    "CredentialConfig",
    "IssuerConfig",
    "JsonLimits",
    "Limits",
    "Listen",
    "LoggingConfig",
    "ProtocolConfig",
    "Rate",
    "Secret",
    "ServerInfo",
    "TlsConfig",
    "is_loopback_url",
    "load_config",
    "parse_rate",
]

ClientAuth = Literal["client_secret_basic", "client_secret_post", "private_key_jwt"]


class Secret:
    """A resolved secret. ``reveal()`` gives the value; ``repr``/``str`` never do.

    File secrets remember their path so rotating consumers (backend bearer tokens) can call
    :meth:`current` to re-read the file when it changed.
    """

    __slots__ = ("_checked", "_mtime", "_path", "_value", "source")

    RECHECK_S: ClassVar[float] = 1.0
    """A file secret is stat()ed at most this often (it is read on the hot path)."""

    def __init__(self, value: str, source: str, mtime: float | None = None) -> None:
        self._value = value
        self.source = source
        """``env:NAME``, ``file:PATH`` or ``literal``."""
        self._mtime = mtime
        self._path = Path(source[5:]) if source.startswith("file:") else None
        self._checked = time.monotonic()

    def reveal(self) -> str:
        return self._value

    def current(self, *, force: bool = False) -> str:
        """The value, re-read from its file when the file changed (checked once a second, or
        now with ``force``, e.g. after the upstream refused the old value)."""
        path = self._path
        if path is not None and (force or time.monotonic() - self._checked >= self.RECHECK_S):
            self._checked = time.monotonic()
            try:
                mtime = path.stat().st_mtime
                if mtime != self._mtime:
                    self._value = path.read_text(encoding="utf-8").strip()
                    self._mtime = mtime
            except OSError:
                pass  # keep serving the last good value; rotation tooling may be mid-write
        return self._value

    def __repr__(self) -> str:
        return f"Secret({self.source}, ***)"

    __str__ = __repr__


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
    negative_ttl_s: int = 0
    max_entries: int = 100_000
    negative_max_entries: int = 10_000
    stale_if_error_s: int = 0


@dataclass(frozen=True, slots=True)
class IssuerConfig:
    url: str
    client_id: str
    client_auth: ClientAuth = "client_secret_basic"
    client_secret: Secret | None = None
    private_key: Secret | None = None
    private_key_id: str | None = None
    signing_alg: str = "RS256"
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


@dataclass(frozen=True, slots=True)
class CredentialConfig:
    type: Literal["bearer", "client_credentials"]
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


@dataclass(frozen=True, slots=True)
class TlsConfig:
    ca_file: str | None = None
    client_cert: str | None = None
    client_key: str | None = None


@dataclass(frozen=True, slots=True)
class BackendConfig:
    url: str
    credential: CredentialConfig
    allow_insecure_http: bool = False
    tls: TlsConfig = field(default_factory=TlsConfig)
    timeout_s: float = 10.0
    connect_timeout_s: float = 3.0
    catalog_refresh_s: float = 300.0
    name_prefix: str = ""
    identity_headers: bool = False
    tool_timeouts_s: tuple[tuple[str, float], ...] = ()
    max_connections: int = 100

    def tool_timeout(self, tool: str) -> float:
        for name, seconds in self.tool_timeouts_s:
            if name == tool:
                return seconds
        return self.timeout_s


@dataclass(frozen=True, slots=True)
class JsonLimits:
    """Caps for the strict JSON decoder; see docs/protocol.md for why these defaults."""

    max_depth: int = 32
    max_members: int = 256
    max_array_length: int = 1024
    max_string_bytes: int = 65_536
    max_number_chars: int = 32


@dataclass(frozen=True, slots=True)
class Limits:
    max_body_bytes: int = 65_536
    max_response_bytes: int = 1_048_576
    max_in_flight: int = 256
    request_deadline_s: float = 15.0
    drain_timeout_s: float = 10.0
    pre_auth_rate: Rate | None = Rate(1200, 60.0)
    principal_rate: Rate | None = Rate(600, 60.0)
    json: JsonLimits = field(default_factory=JsonLimits)


@dataclass(frozen=True, slots=True)
class ProtocolConfig:
    discover_ttl_ms: int = 3_600_000
    tools_list_ttl_ms: int = 60_000
    page_size: int = 100


@dataclass(frozen=True, slots=True)
class LoggingConfig:
    format: Literal["json", "console"] = "json"
    level: Literal["debug", "info", "warning", "error"] = "info"
    subject: Literal["plain", "fingerprint"] = "plain"
    log_arguments: bool = False


@dataclass(frozen=True, slots=True)
class AuditConfig:
    sink: Literal["stdout", "file", "off"] = "stdout"
    path: str | None = None
    max_bytes: int = 50_000_000
    backups: int = 5


@dataclass(frozen=True, slots=True)
class Config:
    """The whole validated configuration. Immutable; a reload builds a new one."""

    source: str
    resource: str
    """Canonical resource URI (RFC 8707): lowercase scheme/host, no fragment, no query."""
    issuer: IssuerConfig
    backend: BackendConfig
    policy_paths: tuple[Path, ...]
    server: ServerInfo = field(default_factory=ServerInfo)
    listen: Listen = Listen("0.0.0.0", 8080)  # noqa: S104 - behind the TLS proxy by design
    ops_listen: Listen = Listen("127.0.0.1", 9090)
    policy_poll_s: float = 2.0
    limits: Limits = field(default_factory=Limits)
    protocol: ProtocolConfig = field(default_factory=ProtocolConfig)
    trusted_proxies: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()
    allowed_origins: frozenset[str] = frozenset()
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    audit: AuditConfig = field(default_factory=AuditConfig)
    warnings: tuple[str, ...] = ()

    @property
    def mcp_path(self) -> str:
        return urlsplit(self.resource).path or "/"

    @property
    def public_origin(self) -> str:
        parts = urlsplit(self.resource)
        return f"{parts.scheme}://{parts.netloc}"

    @property
    def prm_path(self) -> str:
        """RFC 9728 §3.1: the well-known path with the resource's path appended."""
        path = self.mcp_path
        return "/.well-known/oauth-protected-resource" + ("" if path == "/" else path)

    @property
    def prm_url(self) -> str:
        return self.public_origin + self.prm_path


def is_loopback_url(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _is_private_url(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        # A name: "allow_insecure_http" is the operator's statement that it resolves privately.
        return True
    return address.is_private or address.is_loopback


def canonical_uri(url: str) -> str:
    """RFC 8707 / RFC 3986 §6.2.2 normalisation: lowercase scheme and host, no default port."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    port = parts.port
    if port is not None and not (
        (scheme == "https" and port == 443) or (scheme == "http" and port == 80)
    ):
        host = f"{host}:{port}"
    if ":" in (parts.hostname or "") and not host.startswith("["):
        host = f"[{parts.hostname}]" + (f":{port}" if port else "")
    path = parts.path
    return f"{scheme}://{host}{path}"


class _Builder:
    """Turns a schema-valid document into typed sections, recording semantic problems."""

    def __init__(self, doc: Located, base_dir: Path, environ: dict[str, str]) -> None:
        self.doc = doc
        self.base_dir = base_dir
        self.environ = environ
        self.warnings: list[str] = []

    def secret(self, raw: Any, path: tuple[PathPart, ...]) -> Secret | None:
        if raw is None:
            return None
        if isinstance(raw, str):
            self.warnings.append(
                f"{self.doc.where(path)}: {'.'.join(map(str, path))}: literal secret in the "
                "configuration file; use {env: NAME} or {file: PATH}"
            )
            return Secret(raw, "literal")
        if "env" in raw:
            name = raw["env"]
            if name not in self.environ:
                self.doc.problem(path, f"environment variable {name} is not set")
                return None
            return Secret(self.environ[name], f"env:{name}")
        file_path = self.path(raw["file"])
        try:
            value = file_path.read_text(encoding="utf-8").strip()
            mtime = file_path.stat().st_mtime
        except (OSError, UnicodeDecodeError):
            self.doc.problem(path, f"cannot read secret file {file_path}")
            return None
        if not value:
            self.doc.problem(path, f"secret file {file_path} is empty")
            return None
        return Secret(value, f"file:{file_path}", mtime)

    def path(self, raw: str) -> Path:
        candidate = Path(raw)
        return candidate if candidate.is_absolute() else self.base_dir / candidate

    def url(
        self, raw: str, path: tuple[PathPart, ...], *, insecure_ok: bool, private_ok: bool = False
    ) -> str:
        parts = urlsplit(raw)
        if parts.scheme not in {"https", "http"} or not parts.hostname:
            self.doc.problem(path, "must be an absolute http(s) URL")
            return raw
        if parts.fragment or "#" in raw:
            self.doc.problem(path, "must not contain a fragment")
        if parts.scheme == "http":
            allowed = is_loopback_url(raw) or (private_ok and _is_private_url(raw))
            if not (insecure_ok and allowed):
                self.doc.problem(
                    path,
                    "must use https (plain http only for loopback"
                    + (" or private" if private_ok else "")
                    + " addresses with allow_insecure_http: true)",
                )
        return raw


def load_config(path: str | Path, environ: dict[str, str] | None = None) -> Config:
    """Load ``path``; raise :class:`ConfigError` listing every problem (file:line:col)."""
    file_path = Path(path)
    doc = load_yaml(file_path)
    if doc.problems:
        raise ConfigError(doc.problems)
    if not isinstance(doc.value, dict):
        raise ConfigError([f"{file_path}:1:1: (top level): must be a mapping"])
    SchemaValidator.packaged("gateway.schema.json").check(doc)
    if doc.problems:
        raise ConfigError(doc.problems)
    b = _Builder(doc, file_path.resolve().parent, dict(os.environ if environ is None else environ))
    config = _build(b, doc.value, str(file_path))
    if doc.problems:
        raise ConfigError(doc.problems)
    return config


def _build(b: _Builder, raw: dict[str, Any], source: str) -> Config:
    doc = b.doc
    dev_http = bool(raw["issuer"].get("allow_insecure_http", False))
    resource_raw = raw["resource"]
    b.url(resource_raw, ("resource",), insecure_ok=dev_http)
    if urlsplit(resource_raw).query:
        doc.problem(("resource",), "must not contain a query (RFC 8707 §2)")
    resource = canonical_uri(resource_raw)
    if resource.endswith("/") and urlsplit(resource).path != "/":
        doc.problem(("resource",), "must not end with '/' (use the exact MCP endpoint URL)")

    ri = raw["issuer"]
    ip: tuple[PathPart, ...] = ("issuer",)
    b.url(ri["url"], (*ip, "url"), insecure_ok=dev_http)
    for key in ("introspection_endpoint", "token_endpoint"):
        if key in ri:
            b.url(ri[key], (*ip, key), insecure_ok=dev_http)
    client_auth = ri.get("client_auth", "client_secret_basic")
    client_secret = b.secret(ri.get("client_secret"), (*ip, "client_secret"))
    private_key = b.secret(ri.get("private_key"), (*ip, "private_key"))
    if client_auth == "private_key_jwt":
        if "private_key" not in ri:
            doc.problem(ip, "private_key is required with client_auth: private_key_jwt")
    elif "client_secret" not in ri:
        doc.problem(ip, f"client_secret is required with client_auth: {client_auth}")
    rc = ri.get("cache", {})
    issuer = IssuerConfig(
        url=ri["url"],
        client_id=ri["client_id"],
        client_auth=client_auth,
        client_secret=client_secret,
        private_key=private_key,
        private_key_id=ri.get("private_key_id"),
        signing_alg=ri.get("signing_alg", "RS256"),
        introspection_endpoint=ri.get("introspection_endpoint"),
        token_endpoint=ri.get("token_endpoint"),
        timeout_s=float(ri.get("timeout_s", 3.0)),
        metadata_refresh_s=float(ri.get("metadata_refresh_s", 3600.0)),
        allow_insecure_http=dev_http,
        require_iss=bool(ri.get("require_iss", False)),
        clock_skew_s=int(ri.get("clock_skew_s", 30)),
        subject_fallback=ri.get("subject_fallback", "none"),
        # Only URIs are normalised (RFC 8707); plain audience names ("mcp-gateway") stay as is.
        audiences=tuple(
            canonical_uri(a) if urlsplit(a).netloc else a for a in ri.get("audiences", [])
        ),
        cache=CacheConfig(**rc),
        **(
            {"failed_auth_rate": parse_rate(ri["failed_auth_rate"])}
            if "failed_auth_rate" in ri
            else {}
        ),
    )

    rb = raw["backend"]
    bp: tuple[PathPart, ...] = ("backend",)
    insecure_backend = bool(rb.get("allow_insecure_http", False))
    b.url(rb["url"], (*bp, "url"), insecure_ok=insecure_backend, private_ok=True)
    rcred = rb["credential"]
    cp = (*bp, "credential")
    if rcred["type"] == "bearer":
        credential = CredentialConfig(type="bearer", token=b.secret(rcred["token"], (*cp, "token")))
    else:
        cc_auth = rcred.get("client_auth", "client_secret_basic")
        if cc_auth == "private_key_jwt" and "private_key" not in rcred:
            doc.problem(cp, "private_key is required with client_auth: private_key_jwt")
        if cc_auth != "private_key_jwt" and "client_secret" not in rcred:
            doc.problem(cp, f"client_secret is required with client_auth: {cc_auth}")
        if "token_endpoint" in rcred:
            b.url(rcred["token_endpoint"], (*cp, "token_endpoint"), insecure_ok=dev_http)
        credential = CredentialConfig(
            type="client_credentials",
            client_id=rcred["client_id"],
            client_secret=b.secret(rcred.get("client_secret"), (*cp, "client_secret")),
            client_auth=cc_auth,
            private_key=b.secret(rcred.get("private_key"), (*cp, "private_key")),
            private_key_id=rcred.get("private_key_id"),
            token_endpoint=rcred.get("token_endpoint"),
            scope=rcred.get("scope"),
            resource=rcred.get("resource"),
            audience=rcred.get("audience"),
            refresh_margin_s=int(rcred.get("refresh_margin_s", 30)),
        )
    rtls = rb.get("tls", {})
    tls = TlsConfig(**{k: str(b.path(v)) for k, v in rtls.items()})
    if (tls.client_cert is None) != (tls.client_key is None):
        doc.problem((*bp, "tls"), "client_cert and client_key go together")
    for key, value in rtls.items():
        if not b.path(value).is_file():
            doc.problem((*bp, "tls", key), f"file not found: {b.path(value)}")
    backend = BackendConfig(
        url=rb["url"],
        credential=credential,
        allow_insecure_http=insecure_backend,
        tls=tls,
        timeout_s=float(rb.get("timeout_s", 10.0)),
        connect_timeout_s=float(rb.get("connect_timeout_s", 3.0)),
        catalog_refresh_s=float(rb.get("catalog_refresh_s", 300.0)),
        name_prefix=rb.get("name_prefix", ""),
        identity_headers=bool(rb.get("identity_headers", False)),
        tool_timeouts_s=tuple((k, float(v)) for k, v in rb.get("tool_timeouts_s", {}).items()),
        max_connections=int(rb.get("max_connections", 100)),
    )

    raw_policy = raw["policy"]
    policy_list = [raw_policy] if isinstance(raw_policy, str) else list(raw_policy)
    policy_paths = []
    for index, item in enumerate(policy_list):
        where: tuple[PathPart, ...] = (
            ("policy",) if isinstance(raw_policy, str) else ("policy", index)
        )
        resolved = b.path(item)
        if not resolved.exists():
            doc.problem(where, f"policy path not found: {resolved}")
        policy_paths.append(resolved)

    rl = dict(raw.get("limits", {}))
    for key in ("pre_auth_rate", "principal_rate"):
        if key in rl:
            rl[key] = parse_rate(rl[key])
    for key in ("request_deadline_s", "drain_timeout_s"):
        if key in rl:
            rl[key] = float(rl[key])
    limits = Limits(**{**rl, "json": JsonLimits(**rl.get("json", {}))})

    proxies = []
    for index, cidr in enumerate(raw.get("trusted_proxies", [])):
        try:
            proxies.append(ipaddress.ip_network(cidr, strict=False))
        except ValueError:
            doc.problem(("trusted_proxies", index), "not an IP address or CIDR range")
    origins = []
    for index, origin in enumerate(raw.get("allowed_origins", [])):
        parts = urlsplit(origin)
        if parts.scheme not in {"http", "https"} or not parts.netloc or parts.path not in {"", "/"}:
            doc.problem(
                ("allowed_origins", index), "must be an origin like https://app.example.com"
            )
        origins.append(f"{parts.scheme}://{parts.netloc}".lower())

    ra = dict(raw.get("audit", {}))
    if ra.get("sink") is False:  # YAML 1.1: a bare `off` is the boolean false
        ra["sink"] = "off"
    if ra.get("sink") == "file" and "path" not in ra:
        doc.problem(("audit",), "path is required with sink: file")
    audit = AuditConfig(**{**ra, **({"path": str(b.path(ra["path"]))} if "path" in ra else {})})

    return Config(
        source=source,
        resource=resource,
        issuer=issuer,
        backend=backend,
        policy_paths=tuple(policy_paths),
        server=ServerInfo(**raw.get("server", {})),
        listen=Listen(**{"host": "0.0.0.0", "port": 8080, **raw.get("listen", {})}),  # noqa: S104
        ops_listen=Listen(**{"host": "127.0.0.1", "port": 9090, **raw.get("ops_listen", {})}),
        policy_poll_s=float(raw.get("policy_poll_s", 2.0)),
        limits=limits,
        protocol=ProtocolConfig(**raw.get("protocol", {})),
        trusted_proxies=tuple(proxies),
        allowed_origins=frozenset(origins),
        logging=LoggingConfig(**raw.get("logging", {})),
        audit=audit,
        warnings=tuple(b.warnings),
    )
