"""The aiohttp adapter for authlib's OAuth 2.0 server (what its Flask integration provides).

DEVELOPMENT ONLY. authlib's server code is synchronous and reads the request through
``OAuth2Request`` / ``JsonRequest``; aiohttp bodies are read asynchronously. So a handler reads the
body up front into a :class:`ParsedRequest`, and these wrappers expose it the way authlib expects.
Also holds the issuer's settings and the RFC 8707 ``invalid_target`` error.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from authlib.oauth2.rfc6749 import (
    JsonPayload,
    JsonRequest,
    OAuth2Error,
    OAuth2Payload,
    OAuth2Request,
)
from multidict import CIMultiDictProxy, MultiMapping

from gateway.dev.dpop_proofs import PROOF_ALGS
from gateway.dev.issuer_store import OIDC_SCOPES

__all__ = [
    "CONFIDENTIAL_METHODS",
    "OIDC_SCOPES",
    "SIGNING_ALGS",
    "TOKEN_AUTH_METHODS",
    "AioJsonRequest",
    "AioOAuth2Request",
    "InvalidTargetError",
    "IssuerSettings",
    "ParsedRequest",
    "oauth_error",
]

CONFIDENTIAL_METHODS = ("client_secret_basic", "client_secret_post", "private_key_jwt")
TOKEN_AUTH_METHODS = (*CONFIDENTIAL_METHODS, "none")
SIGNING_ALGS = ("RS256", "PS256", "ES256")


def oauth_error(status: int, error: str, description: str) -> web.Response:
    """An RFC 6749 §5.2 error answer (``no-store``), for what the issuer refuses itself."""
    return web.json_response(
        {"error": error, "error_description": description},
        status=status,
        headers={"Cache-Control": "no-store"},
    )


class InvalidTargetError(OAuth2Error):  # type: ignore[misc]
    """RFC 8707 §2: the requested resource is invalid, unknown or not served."""

    error = "invalid_target"


@dataclass(frozen=True, slots=True)
class IssuerSettings:
    """Everything the issuer's grants need to know; ``issuer`` is set once the port is bound."""

    issuer: str
    resources: tuple[str, ...]
    scopes_supported: tuple[str, ...]
    access_token_ttl_s: int
    refresh_token_ttl_s: int
    code_ttl_s: int
    introspection: bool = True
    """False emulates an issuer without RFC 7662 (Microsoft Entra ID): no endpoint, no metadata."""

    @property
    def endpoints(self) -> dict[str, str]:
        base = self.issuer
        endpoints = {
            "authorization_endpoint": f"{base}/authorize",
            "token_endpoint": f"{base}/token",
            "registration_endpoint": f"{base}/register",
            "introspection_endpoint": f"{base}/introspect",
            "revocation_endpoint": f"{base}/revoke",
        }
        if not self.introspection:
            del endpoints["introspection_endpoint"]
        return endpoints

    def metadata(self, grant_types: tuple[str, ...]) -> dict[str, Any]:
        """RFC 8414 §2 authorization server metadata for these settings."""
        settings = self
        return {
            "issuer": settings.issuer,
            **settings.endpoints,
            "scopes_supported": [*settings.scopes_supported, *OIDC_SCOPES],
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "grant_types_supported": list(grant_types),
            "token_endpoint_auth_methods_supported": list(TOKEN_AUTH_METHODS),
            "token_endpoint_auth_signing_alg_values_supported": list(SIGNING_ALGS),
            "dpop_signing_alg_values_supported": list(PROOF_ALGS),  # RFC 9449 §5.1
            **(
                {
                    "introspection_endpoint_auth_methods_supported": list(CONFIDENTIAL_METHODS),
                    "introspection_endpoint_auth_signing_alg_values_supported": list(SIGNING_ALGS),
                }
                if settings.introspection
                else {}
            ),
            "revocation_endpoint_auth_methods_supported": list(TOKEN_AUTH_METHODS),
            "revocation_endpoint_auth_signing_alg_values_supported": list(SIGNING_ALGS),
            "jwks_uri": f"{settings.issuer}/jwks",
            "code_challenge_methods_supported": ["S256"],
            "authorization_response_iss_parameter_supported": True,
            # OpenID Connect Discovery 1.0 §3: the issuer signs people in too (login surface).
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["RS256", "ES256", "EdDSA"],
            "claims_supported": ["iss", "sub", "aud", "exp", "iat", "auth_time", "nonce", "azp"],
            "client_id_metadata_document_supported": False,
            "service_documentation": "https://github.com/mcp-resource-gateway/docs/quickstart.md",
        }


@dataclass(frozen=True, slots=True)
class ParsedRequest:
    """An aiohttp request with its body already read (authlib's server code is synchronous)."""

    method: str
    url: str
    headers: CIMultiDictProxy[str]
    query: MultiMapping[str]
    form: Mapping[str, list[str]]
    json: Any = None
    dpop_jkt: str | None = None
    """The thumbprint of the token request's checked DPoP proof (RFC 9449 §5), if any."""

    @classmethod
    async def read(cls, request: web.Request, *, json_body: bool = False) -> ParsedRequest:
        form: dict[str, list[str]] = defaultdict(list)
        body: Any = None
        if json_body:
            body = json.loads(await request.read() or b"null")
        elif request.method == "POST":
            posted = await request.post()
            for key, value in posted.items():
                if isinstance(value, str):
                    form[key].append(value)
        return cls(request.method, str(request.url), request.headers, request.query, form, body)


class _Payload(OAuth2Payload):  # type: ignore[misc]
    """Query and form parameters; the form wins, as in authlib's Flask integration."""

    def __init__(self, parsed: ParsedRequest) -> None:
        self._datalist: dict[str, list[str]] = defaultdict(list)
        for key, value in parsed.query.items():
            self._datalist[key].append(value)
        for key, values in parsed.form.items():
            self._datalist[key].extend(values)
        self._data = {key: values[0] for key, values in self._datalist.items() if values}

    @property
    def data(self) -> dict[str, str]:
        return self._data

    @property
    def datalist(self) -> dict[str, list[str]]:
        return self._datalist


class AioOAuth2Request(OAuth2Request):  # type: ignore[misc]
    def __init__(self, parsed: ParsedRequest, uri: str) -> None:
        super().__init__(method=parsed.method, uri=uri, headers=parsed.headers)
        self.payload = _Payload(parsed)
        self._args = dict(parsed.query.items())
        self._form = {k: v[0] for k, v in parsed.form.items() if v}
        self.resources: tuple[str, ...] = ()
        self.dpop_jkt = parsed.dpop_jkt

    @property
    def args(self) -> dict[str, str]:
        return self._args

    @property
    def form(self) -> dict[str, str]:
        return self._form


class _JsonBody(JsonPayload):  # type: ignore[misc]
    def __init__(self, data: Any) -> None:
        self._data = data

    @property
    def data(self) -> Any:
        return self._data


class AioJsonRequest(JsonRequest):  # type: ignore[misc]
    def __init__(self, parsed: ParsedRequest) -> None:
        super().__init__(parsed.method, parsed.url, parsed.headers)
        self.payload = _JsonBody(parsed.json)
