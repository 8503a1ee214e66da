"""``issuer:`` / ``issuers:``, typed and declared: each trusted authorization server and how its
tokens are checked. Built by :mod:`gateway.config.issuer`; every field that is a key of the file
is declared here once (:mod:`gateway.config.declare`)."""

from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar, Final, Literal, get_args

from gateway.config.declare import Key, Seconds
from gateway.config.limits_model import Rate, RateLimit
from gateway.config.secrets import SecretRef

__all__ = [
    "CLIENT_AUTHS",
    "DEFAULT_DPOP_ALGORITHMS",
    "DEFAULT_JWT_ALGORITHMS",
    "JWT_ALGORITHMS",
    "CacheConfig",
    "Claim",
    "ClientAuth",
    "DpopConfig",
    "DpopMode",
    "IssuerConfig",
    "RolesConfig",
    "ScopeMapEntry",
    "TokenMode",
    "normalise_typ",
]

ClientAuth = Literal["client_secret_basic", "client_secret_post", "private_key_jwt"]
CLIENT_AUTHS: Final = get_args(ClientAuth)
"""The values of ``client_auth`` (check's guarded pass skips the checks of any other value)."""
TokenMode = Literal["introspection", "jwt", "jwt+introspection"]
"""``issuer.tokens``: how this issuer's tokens are checked (RFC 7662 introspection, RFC 9068
local validation against the issuer's JWKS, or both: locally first, then introspected)."""

JWT_ALGORITHMS = (
    "RS256",
    "RS384",
    "RS512",
    "PS256",
    "PS384",
    "PS512",
    "ES256",
    "ES384",
    "ES512",
    "EdDSA",
    "Ed25519",
    "Ed448",
)
"""Every JWS algorithm ``issuer.algorithms`` may name: asymmetric only (RFC 8725 §3.1/§3.2:
``none`` and the HMAC family are refused at load, so a public key can never be an HMAC secret)."""
DEFAULT_JWT_ALGORITHMS = ("RS256", "PS256", "ES256", "EdDSA")
DEFAULT_DPOP_ALGORITHMS = ("ES256", "ES384", "EdDSA", "Ed25519", "PS256", "RS256")
"""``dpop.algorithms`` by default: what the DPoP clients and issuers we know sign proofs with."""
DpopMode = Annotated[Literal["off", "allowed", "required"], Key(ref="dpop_mode")]

Claim = Annotated[str, Key(ref="claim", min_length=1, max_length=128)]
"""A claim name (``sub``, ``https://example.com/roles``)."""
_ALGORITHMS: Final = Key(min_items=1, max_items=12, items=Key(min_length=1, max_length=16))
_SCOPE_TOKEN: Final = {
    "maxLength": 256,
    "pattern": "^[!#-\\[\\]-~]+$",
    "x-message": "is not a valid scope token (printable ASCII without spaces, quotes or "
    "backslashes; RFC 6749 §3.3, at most 256)",
}


def normalise_typ(value: str) -> str:
    """RFC 7515 §4.1.9: media types compare case-insensitively, and a ``typ`` without ``/`` is
    read as if ``application/`` were prepended (``at+jwt`` == ``application/at+jwt``)."""
    lowered = value.strip().lower()
    return lowered if "/" in lowered else "application/" + lowered


@dataclass(frozen=True, slots=True)
class DpopConfig:
    """``issuer.dpop``: DPoP-bound tokens (RFC 9449) of this issuer at the resource server."""

    mode: Annotated[DpopMode, Key(default="allowed")] = "off"
    """``off``: a token with ``cnf`` is refused (as before DPoP support); ``allowed``: bearer
    and DPoP-bound tokens; ``required``: DPoP-bound tokens only. Off without ``dpop``; a
    mapping without ``mode`` turns it on (``allowed``)."""
    algorithms: Annotated[tuple[str, ...], _ALGORITHMS] = DEFAULT_DPOP_ALGORITHMS
    iat_window_s: Annotated[int, Key(minimum=1, maximum=3600)] = 300
    """How far a proof's ``iat`` may be from now, either way (clock skew included)."""
    nonce: bool = False
    """Require a server nonce (RFC 9449 §8/§9) in every proof for this issuer's tokens."""
    nonce_rotation_s: Annotated[int, Key(minimum=10, maximum=3600)] = 120
    """A nonce is accepted in the period it was issued in and the next one."""

    @property
    def enabled(self) -> bool:
        return self.mode != "off"


@dataclass(frozen=True, slots=True)
class CacheConfig:
    """``issuer.cache``: the result cache (per token digest)."""

    max_ttl_s: Annotated[int, Key(minimum=0, maximum=3600)] = 60
    negative_ttl_s: Annotated[int, Key(minimum=0, maximum=60)] = 5
    max_entries: Annotated[int, Key(minimum=1, maximum=10_000_000)] = 100_000
    negative_max_entries: Annotated[int, Key(minimum=1, maximum=1_000_000)] = 10_000
    stale_if_error_s: Annotated[int, Key(minimum=0, maximum=3600)] = 0


@dataclass(frozen=True, slots=True)
class RolesConfig:
    """``issuer.roles`` / ``issuer.groups``: a claim of role or group names (Entra app roles
    and groups, Okta groups, Auth0 permissions, Keycloak realm roles) added to the scope set."""

    claim: Annotated[tuple[Claim, ...], Key(shorthand=True, min_items=1, max_items=4)] = ("roles",)
    """The claim, or a path into nested objects (``[realm_access, roles]`` for Keycloak)."""
    prefix: Annotated[str, Key(max_length=64)] = ""
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
    """One trusted authorization server: ``issuer:``, or one entry of ``issuers:``."""

    json_schema: ClassVar[dict[str, Any]] = {
        "if": {"required": ["tokens"], "properties": {"tokens": {"const": "jwt"}}},
        "else": {"required": ["client_id"]},
    }
    """``client_id`` is required unless ``tokens: jwt``."""

    url: Annotated[str, Key(required=True, min_length=1)]
    client_id: Annotated[str | None, Key(min_length=1)] = None
    """The gateway's client id for introspection; None with ``tokens: jwt``."""
    client_auth: ClientAuth = "client_secret_basic"
    client_secret: SecretRef | None = None
    private_key: SecretRef | None = None
    private_key_id: Annotated[str | None, Key(min_length=1)] = None
    signing_alg: Literal["RS256", "PS256", "ES256"] = "RS256"
    assertion_audience: Literal["issuer", "token_endpoint", "introspection_endpoint"] = "issuer"
    """``aud`` of private_key_jwt introspection assertions: the issuer identifier (default,
    draft-ietf-oauth-rfc7523bis), the token endpoint, or the introspection endpoint."""
    introspection_endpoint: Annotated[str | None, Key(min_length=1)] = None
    token_endpoint: Annotated[str | None, Key(min_length=1)] = None
    timeout_s: Seconds = 3.0
    metadata_refresh_s: Seconds = 3600.0
    allow_insecure_http: bool = False
    require_iss: bool = False
    clock_skew_s: Annotated[int, Key(minimum=0, maximum=600)] = 30
    subject_fallback: Literal["none", "client_id"] = "none"
    audiences: Annotated[tuple[str, ...], Key(max_items=16, items=Key(min_length=1))] = ()
    """Extra accepted audiences besides ``resource``."""
    cache: CacheConfig = field(default_factory=CacheConfig)
    failed_auth_rate: RateLimit = Rate(30, 60.0)  # noqa: RUF009 - a frozen value
    """Per client IP budget of failed authentications before 429 (protects the issuer)."""
    failed_auth_probe_interval_s: Annotated[float, Key(minimum=0, maximum=3600)] = 5.0
    """Over budget, one uncached token per client IP per interval is still introspected, so a
    valid caller sharing an address with a guesser gets in; 0 disables the probes."""
    tokens: TokenMode = "introspection"
    jwks_uri: Annotated[str | None, Key(min_length=1)] = None
    """The JWK Set URL; None: the ``jwks_uri`` of the issuer's metadata."""
    algorithms: Annotated[tuple[str, ...], _ALGORITHMS] = DEFAULT_JWT_ALGORITHMS
    accept_typ: Annotated[
        tuple[str | None, ...],
        Key(min_items=1, max_items=8, items=Key(min_length=1, max_length=64)),
    ] = ("at+jwt",)
    """Accepted JOSE ``typ`` values, normalised at construction (:func:`normalise_typ`); None
    accepts a token without ``typ``."""
    scope_claims: Annotated[tuple[Claim, ...], Key(min_items=1, max_items=4)] = ("scope", "scp")
    scope_prefix: Annotated[str, Key(max_length=256, pattern="^[!#-\\[\\]-~]*$")] = ""
    """Prepended to every scope read from ``scope_claims`` (Entra ID's ``scp`` carries
    ``mcp.access`` for the scope clients request as ``api://<app id>/mcp.access``)."""
    roles: RolesConfig | None = None
    groups: Annotated[RolesConfig | None, Key(fields={"claim": Key(default=("groups",))})] = None
    """``issuer.groups``: group names as scopes (claim ``groups`` by default), like ``roles``;
    an Entra group overage is refused (``groups_overage``)."""
    scope_map: Annotated[
        tuple[ScopeMapEntry, ...],
        Key(
            schema={
                "type": "object",
                "maxProperties": 256,
                "propertyNames": _SCOPE_TOKEN,
                "additionalProperties": {"type": "string", "minLength": 1, **_SCOPE_TOKEN},
            }
        ),
    ] = ()
    """``scope_map``, in file order: this issuer's spellings -> the policy's names (every mode;
    scopes not in it pass unchanged unless ``scope_map_only``). Two entries may share a target;
    the first one is how the gateway spells that scope back to this issuer's callers."""
    scope_map_only: bool = False
    """``scope_map_only``: only ``scope_map`` keys grant policy scopes; every other scope, role
    or group of this issuer's tokens is dropped (a less trusted issuer cannot grant a policy
    scope by minting its name)."""
    subject_claim: Claim = "sub"
    client_id_claims: Annotated[tuple[Claim, ...], Key(max_items=4)] = (
        "client_id",
        "azp",
        "appid",
    )
    max_token_bytes: Annotated[int, Key(minimum=512, maximum=16_000)] = 8192
    max_token_lifetime_s: Annotated[int, Key(minimum=60, maximum=31_536_000)] = 86400
    """The longest a JWT of this issuer may still be valid (``exp`` at most this far ahead, plus
    ``clock_skew_s``; a later ``exp`` is refused): the bound of a revocation kept until ``exp``."""
    jwks_min_refresh_s: Annotated[float, Key(minimum=1, maximum=86_400)] = 60.0
    jwks_max_refresh_s: Annotated[float, Key(minimum=1, maximum=86_400)] = 3600.0
    jwks_unknown_kid_interval_s: Annotated[float, Key(minimum=1, maximum=3600)] = 30.0
    dpop: Annotated[DpopConfig, Key(shorthand="mode")] = field(default_factory=DpopConfig)

    def __post_init__(self) -> None:
        normalised = tuple(None if typ is None else normalise_typ(typ) for typ in self.accept_typ)
        object.__setattr__(self, "accept_typ", normalised)  # frozen: set once, here

    @property
    def introspects(self) -> bool:
        """Whether this issuer's tokens are introspected (RFC 7662)."""
        return self.tokens != "jwt"

    @property
    def validates_jwt(self) -> bool:
        """Whether this issuer's tokens are validated locally (RFC 9068)."""
        return self.tokens != "introspection"

    @property
    def subject_source(self) -> str:
        """The claim a principal's subject is read from: ``subject_claim`` when JWTs are
        validated locally (``jwt+introspection`` too: the JWT says who), else the introspection
        answer's ``sub``. The browser login surface reads the same claim of an ID token, so a
        signed-in person compares with an MCP caller of this issuer (Entra: ``oid``)."""
        return self.subject_claim if self.validates_jwt else "sub"
