"""Load and validate ``gateway.yaml`` into one immutable, typed :class:`Config`.

The package, by job:

* :mod:`~gateway.config.model`: the frozen dataclasses (:class:`Config` and one per section);
* :mod:`~gateway.config.loader`: :func:`load_config` (YAML with positions, the JSON Schema, then
  the sections' semantic checks; every problem reported at once as ``file:line:column``);
* :mod:`~gateway.config.builder`: the state the section builders share (document, directory,
  environment) and the URL checks;
* :mod:`~gateway.config.issuer` (``issuer:`` / ``issuers:``), :mod:`~gateway.config.backend`,
  :mod:`~gateway.config.state`, :mod:`~gateway.config.sections`,
  :mod:`~gateway.config.policy_external` (its dataclasses in ``policy_external_model``): one
  ``build_*`` function per section of the file;
* :mod:`~gateway.config.secrets`: :class:`Secret` and ``{env: NAME}`` / ``{file: PATH}``
  resolution (a ``Secret``'s ``repr`` never shows the value; literal secrets are warnings);
* :mod:`~gateway.config.urls`: :func:`canonical_uri` (RFC 8707) and :func:`is_loopback_url`.

Import the public names from here (``from gateway.config import Config``).
"""

from gateway.config.catalog import CatalogConfig, OnChange
from gateway.config.identity_model import (
    AssertionConfig,
    IdentityConfig,
    IdentityJwksConfig,
)
from gateway.config.loader import load_config
from gateway.config.model import (
    ACCESS_TOKEN_TYPE,
    DEFAULT_BACKEND,
    DEFAULT_DPOP_ALGORITHMS,
    DEFAULT_JWT_ALGORITHMS,
    JWT_ALGORITHMS,
    TOKEN_EXCHANGE_GRANT,
    AdminConfig,
    AuditCheckpoint,
    AuditConfig,
    BackendConfig,
    BackendReadiness,
    CacheConfig,
    Config,
    CorsConfig,
    CredentialConfig,
    DpopConfig,
    DpopMode,
    EventLoop,
    InputRequestsConfig,
    IssuerConfig,
    JsonLimits,
    Limits,
    Listen,
    LoggingConfig,
    OtlpConfig,
    ProtocolConfig,
    Rate,
    RedisConfig,
    RolesConfig,
    ScopeMapEntry,
    SealKey,
    ServerInfo,
    StateConfig,
    StoreErrorPolicies,
    StoreErrorPolicy,
    TlsConfig,
    TokenMode,
    TracingConfig,
    parse_rate,
)
from gateway.config.policy_external_model import PdpCredential, PolicyExternalConfig
from gateway.config.secrets import Secret
from gateway.config.urls import canonical_uri, is_loopback_url

__all__ = [
    "ACCESS_TOKEN_TYPE",
    "DEFAULT_BACKEND",
    "DEFAULT_DPOP_ALGORITHMS",
    "DEFAULT_JWT_ALGORITHMS",
    "JWT_ALGORITHMS",
    "TOKEN_EXCHANGE_GRANT",
    "AdminConfig",
    "AssertionConfig",
    "AuditCheckpoint",
    "AuditConfig",
    "BackendConfig",
    "BackendReadiness",
    "CacheConfig",
    "CatalogConfig",
    "Config",
    "CorsConfig",
    "CredentialConfig",
    "DpopConfig",
    "DpopMode",
    "EventLoop",
    "IdentityConfig",
    "IdentityJwksConfig",
    "InputRequestsConfig",
    "IssuerConfig",
    "JsonLimits",
    "Limits",
    "Listen",
    "LoggingConfig",
    "OnChange",
    "OtlpConfig",
    "PdpCredential",
    "PolicyExternalConfig",
    "ProtocolConfig",
    "Rate",
    "RedisConfig",
    "RolesConfig",
    "ScopeMapEntry",
    "SealKey",
    "Secret",
    "ServerInfo",
    "StateConfig",
    "StoreErrorPolicies",
    "StoreErrorPolicy",
    "TlsConfig",
    "TokenMode",
    "TracingConfig",
    "canonical_uri",
    "is_loopback_url",
    "load_config",
    "parse_rate",
]
