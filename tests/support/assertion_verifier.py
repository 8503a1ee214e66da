"""A backend-side verifier of the gateway's caller assertions, independent of ``gateway/``.

What a backend owner would write (docs/backends.md#verifying-the-assertion): PyJWT checks the
signature against the gateway's JWK Set, fetched over HTTP from ``/.well-known/jwks.json`` (again
whenever an unknown ``kid`` arrives), and the registered claims. It runs as an aiohttp
middleware on a test upstream, so every ``tools/call`` the upstream receives is checked *when it
arrives* (``exp`` against the real clock). Nothing here imports the gateway.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import jwt
from aiohttp import web
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
    load_pem_private_key,
)

from tests.support.upstreams import ModernUpstream

__all__ = [
    "ASSERTION_HEADER",
    "ASSERTION_TYP",
    "AssertionVerifier",
    "Verified",
    "VerifiedUpstream",
    "public_pem",
    "write_key",
]

ASSERTION_HEADER = "X-MCP-Gateway-Assertion"
ASSERTION_TYP = "mcp-gateway-assertion+jwt"
REQUIRED = ["iss", "aud", "sub", "scope", "tool", "iat", "exp", "jti", "request_id"]


@dataclass
class Verified:
    claims: dict[str, Any]
    header: dict[str, Any]
    token: str
    request_id: str | None
    """The ``X-Request-Id`` the request carried."""


@dataclass
class AssertionVerifier:
    """Verify the assertion of every ``tools/call`` (set ``jwks_url`` once the gateway runs)."""

    issuer: str
    audience: str
    header: str = ASSERTION_HEADER
    algorithms: tuple[str, ...] = ("EdDSA", "ES256", "RS256")
    jwks_url: str | None = None
    verified: list[Verified] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    """Why a tools/call was refused (the upstream answered 401)."""
    jwks_fetches: int = 0
    _keys: dict[str, Any] = field(default_factory=dict)

    async def _fetch_keys(self) -> None:
        assert self.jwks_url is not None, "set jwks_url before the first tools/call"
        async with aiohttp.ClientSession() as session, session.get(self.jwks_url) as response:
            assert response.status == 200
            document = await response.json(content_type=None)
        self.jwks_fetches += 1
        self._keys = {jwk.key_id: jwk for jwk in jwt.PyJWKSet.from_dict(document).keys}

    async def verify(self, token: str) -> tuple[dict[str, Any], dict[str, Any]]:
        header = jwt.get_unverified_header(token)
        if header.get("typ") != ASSERTION_TYP:
            raise jwt.InvalidTokenError(f"typ {header.get('typ')!r}")
        kid = header.get("kid")
        if not isinstance(kid, str):
            raise jwt.InvalidTokenError("no kid")
        if kid not in self._keys:
            await self._fetch_keys()  # an unknown kid: the gateway rotated, fetch again
        if kid not in self._keys:
            raise jwt.InvalidTokenError(f"kid {kid} not in the JWK Set")
        claims = jwt.decode(
            token,
            self._keys[kid].key,
            algorithms=list(self.algorithms),
            audience=self.audience,
            issuer=self.issuer,
            options={"require": REQUIRED},
        )
        return claims, header

    @web.middleware
    async def middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        body = await request.read()  # cached by aiohttp: the upstream's handler reads it again
        try:
            method = json.loads(body).get("method") if body else None
        except ValueError:
            method = None
        if method != "tools/call":
            return await handler(request)
        values = request.headers.getall(self.header, [])
        try:
            if len(values) != 1:
                raise jwt.InvalidTokenError(f"{len(values)} assertion headers")
            claims, header = await self.verify(values[0])
        except jwt.PyJWTError as exc:
            self.failures.append(f"{type(exc).__name__}: {exc}")
            return web.Response(status=401)
        self.verified.append(
            Verified(claims, header, values[0], request.headers.get("X-Request-Id"))
        )
        return await handler(request)


@dataclass
class VerifiedUpstream(ModernUpstream):
    """A :class:`ModernUpstream` whose every ``tools/call`` passes :attr:`verifier` first."""

    verifier: AssertionVerifier = field(
        default_factory=lambda: AssertionVerifier(issuer="", audience="")
    )

    def app(self) -> web.Application:
        app = super().app()
        app.middlewares.append(self.verifier.middleware)
        return app


def write_key(path: Path, kind: str = "ed25519") -> Path:
    """A fresh unencrypted PKCS#8 private key (``ed25519``, ``p256``, ``rsa``) at ``path``."""
    key: Any
    if kind == "ed25519":
        key = ed25519.Ed25519PrivateKey.generate()
    elif kind == "p256":
        key = ec.generate_private_key(ec.SECP256R1())
    else:
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
    path.write_bytes(pem)
    return path


def public_pem(private: Path) -> bytes:
    key = load_pem_private_key(private.read_bytes(), password=None)
    return key.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
