"""``login:``, typed: the browser login surface (docs/user-authorization.md#login-surface).

The gateway signs a person in at its own pages: as an OpenID Connect relying party of one of
the trusted issuers (authorization code + PKCE, a confidential client configured like the
introspection client), or, with ``verifier:``, by sending the browser to an operator's external
verifier whose signed assertion names the person. Built by :mod:`gateway.config.login`.
"""

from dataclasses import dataclass
from typing import Annotated, Final, Literal

from gateway.config.declare import Key, Seconds
from gateway.config.issuer_model import DEFAULT_JWT_ALGORITHMS, ClientAuth
from gateway.config.limits_model import Rate, RateLimit
from gateway.config.secrets import SecretRef

__all__ = ["DEFAULT_LOGIN_PREFIX", "LoginConfig", "LoginVerifierConfig"]

DEFAULT_LOGIN_PREFIX: Final = "/gateway"
"""Every page of the surface is under this path, on the origin of ``resource``."""
_PREFIX: Final = Key(
    pattern="^(/[A-Za-z0-9._~-]+)+$",
    max_length=64,
    message="must be a path like /gateway: segments of letters, digits, '.', '_', '~' and '-', "
    "no trailing '/'",
)
_ALGORITHMS: Final = Key(min_items=1, max_items=12, items=Key(min_length=1, max_length=16))
_SCOPE: Final = Key(pattern="^[!#-\\[\\]-~]{1,256}$", message="is not a valid scope token")


@dataclass(frozen=True, slots=True)
class LoginVerifierConfig:
    """``login.verifier``: an external verifier instead of the built-in relying party
    (docs/user-authorization.md#an-external-verifier)."""

    url: Annotated[str, Key(required=True, min_length=1)]
    """Where the browser is sent with the sign-in request (``https``; no fragment)."""
    issuer: Annotated[str, Key(required=True, min_length=1)]
    """The ``iss`` of the verifier's assertions."""
    jwks_uri: Annotated[str, Key(required=True, min_length=1)]
    """The verifier's JWK Set (its public signing keys)."""
    algorithms: Annotated[tuple[str, ...], _ALGORITHMS] = DEFAULT_JWT_ALGORITHMS
    timeout_s: Seconds = 3.0
    """Bound of one JWK Set fetch."""
    allow_insecure_http: bool = False
    """Plain ``http`` URLs, loopback only (development)."""


@dataclass(frozen=True, slots=True)
class LoginConfig:
    """``login:``: the browser login surface; None (no pages at all) without the section."""

    issuer: Annotated[str | None, Key(min_length=1)] = None
    """The ``url`` of the trusted issuer people sign in at (default: the first of ``issuers:``);
    also the issuer whose identities an external verifier may assert, besides the others."""
    client_id: Annotated[str | None, Key(min_length=1, max_length=256)] = None
    """The gateway's client at that issuer (required unless ``verifier``)."""
    client_auth: ClientAuth = "client_secret_basic"
    client_secret: SecretRef | None = None
    private_key: SecretRef | None = None
    private_key_id: Annotated[str | None, Key(min_length=1)] = None
    signing_alg: Literal["RS256", "PS256", "ES256"] = "RS256"
    token_endpoint: Annotated[str | None, Key(min_length=1)] = None
    """The token endpoint, when the issuer's metadata names one on another origin (it receives
    the client's credentials: only the issuer's own origin is taken from the metadata)."""
    scopes: Annotated[tuple[str, ...], Key(min_items=1, max_items=16, items=_SCOPE)] = ("openid",)
    """Requested at sign-in; ``openid`` is always sent (added when missing)."""
    path_prefix: Annotated[str, _PREFIX] = DEFAULT_LOGIN_PREFIX
    session_ttl_s: Annotated[int, Key(minimum=60, maximum=86_400)] = 3600
    """How long a sign-in lasts (the session cookie's lifetime; sign-out ends it earlier)."""
    login_ttl_s: Annotated[int, Key(minimum=30, maximum=3600)] = 600
    """How long a sign-in may take, from the gateway's redirect to the issuer's answer."""
    pre_auth_rate: RateLimit = Rate(300, 60.0)  # noqa: RUF009 - a frozen value
    """Requests per client address (IPv6: per /64; behind ``trusted_proxies`` the forwarded
    one) to every page of the surface, the connect API included, before anything else is
    done; past it 429 ``login_rate_limited`` with ``Retry-After``. A whole consent takes about
    ten requests, ``mcp-gateway connect`` polls every 2 s."""
    verifier: LoginVerifierConfig | None = None
    """An external verifier instead of the relying party (then no client at the issuer)."""
