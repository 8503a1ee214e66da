"""The demo's second backend: it gets the caller by RFC 8693 token exchange (DEVELOPMENT ONLY).

``mcp-gateway demo`` puts two backends behind its one endpoint (``backends:``): the notebook
(:mod:`gateway.dev.demo_backend`, a static service token and a signed caller assertion) and this
vault, whose credential is ``type: token_exchange``. For every ``tools/call`` the gateway
exchanges the caller's token at the development issuer for a token whose audience is this
backend, and sends that; catalog traffic carries the exchange client's own client-credentials
token for the same audience. The vault is what a backend owner writes: an OAuth resource server
that checks every bearer token at the issuer (:class:`IssuerTokenCheck`: RFC 7662 introspection
with its own client, or, when the issuer has no introspection endpoint, the RFC 9068 JWT against
the issuer's JWK Set) and serves it only when it is active and meant for this backend (``aud``).
Its one tool, ``whoami`` (exposed as ``vault__whoami``), shows what the issuer vouched for.

A 2026-07-28 server only (the gateway detects the era with ``server/discover``).
"""

from __future__ import annotations

import base64
import time
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Final

import aiohttp
from aiohttp import web
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet
from joserfc.jwt import JWTClaimsRegistry

from gateway.dev.demo_identity import NotVerified, fetch_json
from gateway.dev.demo_records import RecordsRequests
from gateway.dev.loopback import McpOnLoopback
from gateway.dev.simple_rpc import VERSION, RpcCall, read_call, rpc_error, rpc_result

__all__ = ["VAULT_WHOAMI", "IssuerTokenCheck", "VaultBackend"]

SERVER_INFO: Final = {"name": "mcp-gateway-demo-vault", "version": "1.0.0"}
VAULT_WHOAMI: Final[dict[str, Any]] = {
    "name": "whoami",
    "title": "Who am I (to the vault)?",
    "description": "Shows the caller as the vault backend sees it: the token the gateway "
    "obtained for you by RFC 8693 token exchange, as the issuer vouched for it.",
    "inputSchema": {"type": "object", "properties": {}, "additionalProperties": False},
    "annotations": {"readOnlyHint": True},
}
MAX_BODY: Final = 65_536
_MAX_ISSUER_REPLY: Final = 65_536
_JWT_ALGORITHMS: Final = ("RS256", "ES256", "EdDSA")


class IssuerTokenCheck:
    """Ask the issuer about a bearer token (see the module docstring); the claims, or raise
    :class:`~gateway.dev.demo_identity.NotVerified`."""

    def __init__(
        self,
        issuer: str,
        *,
        audience: str,
        introspection: tuple[str, str] | None,
    ) -> None:
        """``introspection``: this backend's (client_id, secret) at the issuer's
        ``/introspect``; None: verify JWT access tokens against ``/jwks`` instead."""
        self.issuer = issuer
        self.audience = audience
        self._client = introspection
        self._claims = JWTClaimsRegistry(
            iss={"essential": True, "value": issuer},
            exp={"essential": True},
            sub={"essential": True},
        )

    async def verify(self, token: str) -> dict[str, Any]:
        claims = await (self._introspect(token) if self._client else self._jwt(token))
        audience = claims.get("aud")
        audiences = audience if isinstance(audience, list) else [audience]
        if self.audience not in audiences:
            raise NotVerified("the token is not meant for this backend (aud)")
        return claims

    async def _introspect(self, token: str) -> dict[str, Any]:
        assert self._client is not None
        basic = base64.b64encode(":".join(self._client).encode()).decode()
        headers = {"Authorization": f"Basic {basic}"}
        document = await self._fetch("POST", "/introspect", data={"token": token}, headers=headers)
        if document.get("active") is not True:
            raise NotVerified("the issuer says the token is not active")
        return document

    async def _jwt(self, token: str) -> dict[str, Any]:
        keys = KeySet.import_key_set(await self._fetch("GET", "/jwks"))  # type: ignore[arg-type]
        try:
            decoded = jwt.decode(token, keys, algorithms=list(_JWT_ALGORITHMS))
            self._claims.validate(decoded.claims)
        except (JoseError, ValueError) as exc:
            raise NotVerified("the token is not a valid JWT of the issuer") from exc
        return dict(decoded.claims)

    async def _fetch(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        try:
            document = await fetch_json(method, self.issuer + path, limit=_MAX_ISSUER_REPLY, **kw)
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise NotVerified("the issuer could not be asked") from exc
        if not isinstance(document, dict):
            raise NotVerified("the issuer's answer is not a JSON object")
        return document


@dataclass
class VaultBackend(RecordsRequests, McpOnLoopback):
    """A 2026-07-28 MCP server on loopback that accepts only issuer-vouched tokens for itself.
    Set :attr:`token_check` before traffic; ``await start()``, read :attr:`url`."""

    _: KW_ONLY
    token_check: IssuerTokenCheck | None = None
    seen_subjects: list[str] = field(default_factory=list)
    """``sub`` of every ``tools/call`` token the issuer vouched for."""
    auth_failures: int = 0
    max_body = MAX_BODY

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await self._record(request)
        if request.method != "POST":
            return web.Response(status=405, headers={"Allow": "POST"})
        supplied = request.headers.get("Authorization", "")
        try:
            if self.token_check is None or not supplied.startswith("Bearer "):
                raise NotVerified("no bearer token")
            claims = await self.token_check.verify(supplied[7:])
        except NotVerified as exc:
            self.auth_failures += 1
            return web.json_response(
                {"error": "invalid_token", "error_description": str(exc)},
                status=401,
                headers={"WWW-Authenticate": 'Bearer realm="demo-vault", error="invalid_token"'},
            )
        call = read_call(body, request.headers)
        if not isinstance(call, RpcCall):
            return call
        rid, method = call.rid, call.method
        if method == "server/discover":
            result: dict[str, Any] = {
                "supportedVersions": [VERSION],
                "capabilities": {"tools": {"listChanged": False}},
                "instructions": "The demo vault: whoami shows the token the gateway obtained "
                "for you by token exchange.",
                "ttlMs": 3_600_000,
                "cacheScope": "public",
            }
        elif method == "tools/list":
            result = {"tools": [VAULT_WHOAMI], "ttlMs": 60_000, "cacheScope": "public"}
        elif method == "tools/call" and call.params.get("name") == VAULT_WHOAMI["name"]:
            self.seen_subjects.append(str(claims.get("sub")))
            result = whoami_result(claims)
        elif method == "tools/call":
            return rpc_error(rid, 400, -32602, "Unknown tool")
        else:
            return rpc_error(rid, 404, -32601, "Method not found")
        return rpc_result(rid, result, SERVER_INFO)


def whoami_result(claims: Mapping[str, Any]) -> dict[str, Any]:
    """What the issuer vouched for about the token this backend received."""
    raw_act = claims.get("act")
    act: dict[str, Any] | None = raw_act if isinstance(raw_act, dict) else None
    shown = {
        "sub": claims.get("sub"),
        "scope": claims.get("scope"),
        "aud": claims.get("aud"),
        "client_id": claims.get("client_id"),
        "act": act,
        "expires_in_s": int(claims.get("exp", 0) - time.time()),
    }
    actor = act.get("sub") if act else "nobody"
    text = (
        f"The issuer vouched for the token this backend received: you are {shown['sub']} "
        f"(scopes {shown['scope']}), in a token minted for {shown['aud']} by RFC 8693 token "
        f"exchange, obtained by {actor}; valid {shown['expires_in_s']} s more. Your own token "
        "never reached this backend."
    )
    return {"content": [{"type": "text", "text": text}], "structuredContent": shown}
