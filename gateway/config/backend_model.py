"""``backend:`` / ``backends:``, typed and declared: each upstream MCP server, the gateway's
credential for it and the TLS to it. Built by :mod:`gateway.config.backend`."""

from dataclasses import dataclass, field
from typing import Annotated, Final, Literal

from gateway.config.declare import INTERNAL, Key, Seconds
from gateway.config.identity_model import IdentityConfig
from gateway.config.issuer_model import ClientAuth
from gateway.config.secrets import SecretRef

__all__ = [
    "ACCESS_TOKEN_TYPE",
    "DEFAULT_BACKEND",
    "NAME_PREFIX",
    "TOKEN_EXCHANGE_GRANT",
    "BackendConfig",
    "BackendReadiness",
    "CredentialConfig",
    "TlsConfig",
]

TOKEN_EXCHANGE_GRANT: Final = "urn:ietf:params:oauth:grant-type:token-exchange"  # noqa: S105
ACCESS_TOKEN_TYPE: Final = "urn:ietf:params:oauth:token-type:access_token"  # noqa: S105
"""RFC 8693 §3: the token type URI of an OAuth 2.0 access token."""

DEFAULT_BACKEND: Final = "default"
"""The name of the one backend of a ``backend:`` section (metrics, logs, audit, ``/readyz``)."""

BackendReadiness = Literal["all", "any"]
"""``backend_readiness``: ``/readyz`` needs every backend's catalog, or at least one."""

NAME_PREFIX: Final = Key(
    pattern="^[A-Za-z0-9_.-]{0,32}$",
    message="may hold only letters, digits, '_', '.' and '-' (at most 32)",
)
"""``backend.name_prefix`` and ``backends.<name>.prefix``."""

_GRANT: Final = ("client_credentials", "token_exchange")
_EXCHANGE: Final = ("token_exchange",)
_USER: Final = ("user_oauth",)
_CLIENT: Final = (*_GRANT, *_USER)
"""The forms whose gateway is an OAuth client somewhere (its client keys)."""
_URL: Final = Key(min_length=1, forms=_GRANT)
_USER_URL: Final = Key(min_length=1, forms=_USER)
_PARAM_NAME: Final = Key(
    pattern="^[A-Za-z0-9_.-]{1,64}$",
    message="is not an authorization request parameter name",
)


@dataclass(frozen=True, slots=True)
class CredentialConfig:
    """``credential``: the gateway's own identity at the backend, one form per ``type``."""

    type: Literal["bearer", "client_credentials", "token_exchange", "user_oauth"]
    token: Annotated[SecretRef | None, Key(forms=("bearer",), required=("bearer",))] = None
    client_id: Annotated[str | None, Key(min_length=1, forms=_CLIENT, required=_GRANT)] = None
    client_secret: Annotated[SecretRef | None, Key(forms=_CLIENT)] = None
    client_auth: Annotated[ClientAuth, Key(forms=_CLIENT)] = "client_secret_basic"
    private_key: Annotated[SecretRef | None, Key(forms=_CLIENT)] = None
    private_key_id: Annotated[str | None, Key(forms=_CLIENT)] = None
    token_endpoint: Annotated[str | None, Key(min_length=1, forms=_CLIENT)] = None
    scope: Annotated[str | None, Key(forms=_CLIENT)] = None
    resource: Annotated[str | None, Key(min_length=1, forms=_CLIENT)] = None
    audience: Annotated[str | None, _URL] = None
    refresh_margin_s: Annotated[int, Key(minimum=0, maximum=3600, forms=_CLIENT)] = 30
    requested_token_type: Annotated[
        str,
        Key(
            forms=_EXCHANGE,
            pattern="^urn:ietf:params:oauth:token-type:[a-z_]+$",
            message="must be an RFC 8693 token type URI (urn:ietf:params:oauth:token-type:...)",
        ),
    ] = ACCESS_TOKEN_TYPE
    """``token_exchange``: RFC 8693 §2.1 ``requested_token_type``."""
    actor: Annotated[Literal["none", "service"], Key(forms=_EXCHANGE)] = "none"
    """``token_exchange``: ``service`` sends the gateway's own client-credentials token as the
    RFC 8693 ``actor_token``."""
    issuer: Annotated[str | None, Key(min_length=1, forms=_EXCHANGE)] = None
    """``token_exchange``: exchange only tokens of this issuer (None: each caller's own)."""
    authorization_server: Annotated[str | None, _USER_URL] = None
    """``user_oauth``: the upstream's authorization server (its issuer identifier, RFC 8414);
    None: the first one the upstream's protected-resource metadata names (RFC 9728)."""
    authorization_endpoint: Annotated[str | None, _USER_URL] = None
    """``user_oauth``: with ``token_endpoint``, the endpoints of a server without RFC 8414
    metadata (nothing is discovered then)."""
    omit_resource: Annotated[bool, Key(forms=_USER)] = False
    """``user_oauth``: send no RFC 8707 ``resource`` (a server that refuses it: Entra ID)."""
    prompt: Annotated[str | None, Key(min_length=1, max_length=64, forms=_USER)] = None
    """``user_oauth``: the OpenID Connect ``prompt`` of the authorization request."""
    extra_authorize_params: Annotated[
        tuple[tuple[str, str], ...],
        Key(forms=_USER, max_properties=16, names=_PARAM_NAME, items=Key(max_length=512)),
    ] = ()
    """``user_oauth``: more authorization request parameters (``access_type: offline``)."""
    catalog_token: Annotated[SecretRef | None, Key(forms=_USER)] = None
    """``user_oauth``: the bearer token of the backend's own traffic (discovery, lists, change
    streams), which acts for nobody; None: that traffic carries no credential."""


_PATH: Final = Key(min_length=1)


@dataclass(frozen=True, slots=True)
class TlsConfig:
    """``tls``: the CA bundle and the client certificate of a TLS connection the gateway makes."""

    ca_file: Annotated[str | None, _PATH] = None
    client_cert: Annotated[str | None, _PATH] = None
    client_key: Annotated[str | None, _PATH] = None


@dataclass(frozen=True, slots=True)
class BackendConfig:
    """One upstream MCP server: ``backend:``, or one entry of ``backends:``.

    Everything the gateway needs to talk to it on its own: URL, service credential, TLS,
    deadlines, connection pool, catalog refresh, and how its tools are named to clients.
    """

    url: Annotated[str, Key(required=True, min_length=1)]
    credential: Annotated[
        CredentialConfig,
        Key(
            required=True,
            ref="credential",
            message="must be {type: bearer, token: <secret>}, {type: client_credentials, "
            "client_id: ..., ...} or {type: token_exchange, client_id: ..., ...}",
        ),
    ]
    allow_insecure_http: bool = False
    tls: TlsConfig = field(default_factory=TlsConfig)
    timeout_s: Seconds = 10.0
    connect_timeout_s: Seconds = 3.0
    catalog_refresh_s: Seconds = 300.0
    name_prefix: Annotated[str, INTERNAL] = ""
    """Added to the upstream's tool names as clients, policies and the audit trail see them:
    ``backend.name_prefix``, or ``backends.<name>.prefix`` (default ``<name>__``); declared
    where each is written (:class:`~gateway.config.model.Config`)."""
    identity_headers: bool = False
    tool_timeouts_s: tuple[tuple[str, Seconds], ...] = ()
    max_connections: Annotated[int, Key(minimum=1, maximum=10_000)] = 100
    identity: IdentityConfig = field(default_factory=IdentityConfig)
    """Signed caller assertions (``identity.assertion``)."""
    name: Annotated[str, INTERNAL] = DEFAULT_BACKEND
    """The key under ``backends:`` (``default`` for a ``backend:`` section): a bounded label of
    metrics, logs, the audit trail and ``/readyz``."""

    def tool_timeout(self, tool: str) -> float:
        for name, seconds in self.tool_timeouts_s:
            if name == tool:
                return seconds
        return self.timeout_s
