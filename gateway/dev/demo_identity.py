"""The demo backend's side of the caller assertions (DEVELOPMENT ONLY).

``mcp-gateway demo`` configures ``identity.assertion`` for its backend, so every ``tools/call``
carries the gateway's signed assertion. :class:`CallerCheck` is what a backend owner writes
(docs/backends.md#verifying-the-assertion): it fetches the gateway's JWK Set from the ops
listener (again when an unknown ``kid`` arrives), checks the signature with the key of the
``kid`` and a fixed algorithm, ``typ``, ``iss``, ``aud`` and ``exp``. The demo backend refuses a
call without a valid assertion (401), and its ``whoami`` tool shows the verified caller.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from collections.abc import Mapping
from typing import Any, Final

import aiohttp
from joserfc.errors import JoseError
from joserfc.jwk import KeySet
from joserfc.jws import JWSRegistry
from joserfc.jwt import JWTClaimsRegistry

__all__ = [
    "ASSERTION_HEADER",
    "WHOAMI_TOOL",
    "CallerCheck",
    "NotVerified",
    "fetch_json",
    "whoami_result",
]

ASSERTION_HEADER: Final = "X-MCP-Gateway-Assertion"
ASSERTION_TYP: Final = "mcp-gateway-assertion+jwt"
ALGORITHM: Final = "EdDSA"
"""The demo's ``identity.assertion.alg``; a verifier never takes the algorithm from the token."""
WHOAMI_TOOL: Final[dict[str, Any]] = {
    "name": "whoami",
    "title": "Who am I (to the backend)?",
    "description": "Shows the caller as this backend verified it from the gateway's signed "
    "caller assertion: subject, client, scopes, tool, request id.",
    "inputSchema": {"type": "object", "properties": {}, "additionalProperties": False},
    "annotations": {"readOnlyHint": True},
}
_MAX_JWKS: Final = 65_536


class NotVerified(Exception):
    """The assertion is missing or does not verify (the message says why; no secrets)."""


class CallerCheck:
    """Verifies the gateway's caller assertions against its JWK Set (see the module docstring)."""

    def __init__(self, jwks_url: str, *, issuer: str, audience: str) -> None:
        self.jwks_url = jwks_url
        self._claims = JWTClaimsRegistry(
            iss={"essential": True, "value": issuer},
            aud={"essential": True, "value": audience},
            exp={"essential": True},
            sub={"essential": True},
            jti={"essential": True},
        )
        self._keys: KeySet | None = None
        self.fetches = 0

    async def verify(self, token: str | None) -> dict[str, Any]:
        """The verified claims, or raise :class:`NotVerified`."""
        if not token:
            raise NotVerified("no caller assertion")
        parts = token.split(".")
        if len(parts) != 3:
            raise NotVerified("not a compact JWS")
        header = _json_part(parts[0])
        if header.get("typ") != ASSERTION_TYP or header.get("alg") != ALGORITHM:
            raise NotVerified("not a gateway assertion (typ/alg)")
        kid = header.get("kid")
        key = await self._key(kid if isinstance(kid, str) else "")
        signature = _b64(parts[2])
        signing_input = f"{parts[0]}.{parts[1]}".encode("ascii")
        # The algorithm object directly: joserfc warns about the name EdDSA (RFC 9864).
        if not JWSRegistry.algorithms[ALGORITHM].verify(signing_input, signature, key):
            raise NotVerified("bad signature")
        claims = _json_part(parts[1])
        try:
            self._claims.validate(claims)
        except JoseError as exc:
            raise NotVerified(f"claims: {exc.error}") from exc
        return claims

    async def _key(self, kid: str) -> Any:
        for attempt in range(2):
            if self._keys is not None:
                try:
                    return self._keys.get_by_kid(kid)
                except JoseError:
                    if attempt:
                        break
            await self._fetch()  # unknown kid (or nothing yet): the gateway may have rotated
        raise NotVerified("unknown kid")

    async def _fetch(self) -> None:
        self.fetches += 1
        try:
            document = await fetch_json("GET", self.jwks_url, limit=_MAX_JWKS)
            if not isinstance(document, dict):
                raise ValueError("not a JWK Set")
            self._keys = KeySet.import_key_set(document)  # type: ignore[arg-type]
        except (aiohttp.ClientError, TimeoutError, ValueError, TypeError, JoseError) as exc:
            raise NotVerified("the gateway's JWK Set could not be fetched") from exc


async def fetch_json(method: str, url: str, *, limit: int, **kw: Any) -> Any:
    """The JSON document a demo backend asks for (at most ``limit`` bytes read, 3 s), or None
    when the answer is not 200; raises ``aiohttp.ClientError``, ``TimeoutError`` or
    ``ValueError``."""
    async with (
        aiohttp.ClientSession() as session,
        session.request(method, url, timeout=aiohttp.ClientTimeout(total=3), **kw) as response,
    ):
        raw = await response.content.read(limit)
        return json.loads(raw) if response.status == 200 else None


def whoami_result(claims: Mapping[str, Any]) -> dict[str, Any]:
    """The ``whoami`` tool result: the verified claims, as text and as structured content."""
    raw_tool = claims.get("tool")
    tool: Mapping[str, Any] = raw_tool if isinstance(raw_tool, dict) else {}
    shown = {
        "sub": claims.get("sub"),
        "client_id": claims.get("client_id"),
        "scope": claims.get("scope"),
        "tool": tool,
        "request_id": claims.get("request_id"),
        "jti": claims.get("jti"),
        "expires_in_s": int(claims.get("exp", 0) - time.time()),
    }
    text = (
        f"The backend verified the gateway's signed assertion: you are {shown['sub']} "
        f"(client {shown['client_id']}, scopes {shown['scope']}), calling "
        f"{tool.get('name')} (upstream name {tool.get('upstream')}); request "
        f"{shown['request_id']}, assertion {shown['jti']} valid {shown['expires_in_s']} s more."
    )
    return {"content": [{"type": "text", "text": text}], "structuredContent": shown}


def _b64(part: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
    except (ValueError, binascii.Error) as exc:
        raise NotVerified("not base64url") from exc


def _json_part(part: str) -> dict[str, Any]:
    try:
        value = json.loads(_b64(part))
    except ValueError as exc:
        raise NotVerified("not JSON") from exc
    if not isinstance(value, dict):
        raise NotVerified("not a JSON object")
    return value
