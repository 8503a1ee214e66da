"""The typed identity settings: how the gateway tells a backend who is calling.

``backends.<name>.identity.assertion`` (a signed caller assertion per ``tools/call``) and the
top-level ``identity_jwks`` (where the public keys of every assertion key are published). The
RFC 8693 token-exchange credential is a kind of ``credential`` (:class:`CredentialConfig
<gateway.config.model.CredentialConfig>`). Built by :mod:`gateway.config.identity`.
"""

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Final, Literal, get_args

from gateway.config.declare import Key
from gateway.config.secrets import SecretRef

__all__ = [
    "ASSERTION_ALGS",
    "DEFAULT_ASSERTION_HEADER",
    "MAX_ASSERTION_TTL_S",
    "AssertionAlg",
    "AssertionConfig",
    "IdentityConfig",
    "IdentityJwksConfig",
]

AssertionAlg = Literal["EdDSA", "ES256", "RS256"]
ASSERTION_ALGS: Final[tuple[AssertionAlg, ...]] = get_args(AssertionAlg)
DEFAULT_ASSERTION_HEADER: Final = "X-MCP-Gateway-Assertion"
MAX_ASSERTION_TTL_S: Final = 300
"""An assertion is a bearer statement about the caller: it lives minutes at most."""


@dataclass(frozen=True, slots=True)
class AssertionConfig:
    """``identity.assertion``: a JWT the gateway signs for every ``tools/call`` it forwards."""

    key: Annotated[SecretRef, Key(required=True)]
    """The private signing key (PEM); a ``{file: ...}`` key is re-read when the file changes."""
    audience: Annotated[str, Key(min_length=1, max_length=2048)]
    """``aud`` of every assertion (default: the backend's URL)."""
    header: Annotated[
        str,
        Key(
            pattern="^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$",
            message="must be an HTTP header name (RFC 9110 token, at most 64 characters)",
        ),
    ] = DEFAULT_ASSERTION_HEADER
    key_id: Annotated[
        str | None,
        Key(
            pattern="^[A-Za-z0-9._~-]{1,128}$",
            message="may hold only letters, digits, '.', '_', '~' and '-' (at most 128)",
        ),
    ] = None
    """``kid``; None: the RFC 7638 thumbprint of the current key (changes with the key)."""
    alg: AssertionAlg = "EdDSA"
    ttl_s: Annotated[int, Key(minimum=1, maximum=MAX_ASSERTION_TTL_S)] = 60
    reuse: bool = True
    """Reuse an assertion for the same caller token and tool while half its lifetime is left."""


@dataclass(frozen=True, slots=True)
class IdentityConfig:
    """``identity``: what a backend learns about the caller, beyond its own credential."""

    assertion: AssertionConfig | None = None


@dataclass(frozen=True, slots=True)
class IdentityJwksConfig:
    """``identity_jwks``: the gateway's JWK Set of assertion keys (``/.well-known/jwks.json``)."""

    public: bool = False
    """Also serve it on the public listener (it is public-key material only)."""
    publish_keys: Annotated[
        tuple[Path, ...],
        Key(
            schema={
                "type": "array",
                "maxItems": 8,
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["file"],
                    "properties": {"file": {"type": "string", "minLength": 1}},
                },
            }
        ),
    ] = field(default_factory=tuple)
    """Files of extra public keys to publish (the next key ahead of a rotation, the previous
    one after it); each holds zero or more PEM keys and is re-read when it changes."""
