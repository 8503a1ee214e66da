"""A programmable loopback issuer for auth tests: RFC 8414 / OIDC metadata and RFC 7662
introspection with real client authentication, plus fault injection.

:class:`IssuerStub` is a plain object holding what the issuer answers; :meth:`IssuerStub.app`
builds the aiohttp application that serves it (start it with ``aiohttp_server``, then call
:meth:`IssuerStub.bind` with the server's base URL). Client authentication is checked for the
configured method: ``client_secret_basic`` (RFC 6749 §2.3.1 form-urlencoded parts),
``client_secret_post``, and ``private_key_jwt`` (RFC 7523 assertion verified with the public
key: signature, ``iss``/``sub``, ``aud`` = issuer, ``exp``, unique ``jti``).

Fault modes (``fault``): ``slow`` (sleeps ``slow_s`` before answering), ``5xx``, ``oversized``
(a 20 KiB JSON body), ``redirect`` (307 to another endpoint), ``wrong_content_type``,
``malformed`` (not JSON), ``deep`` (JSON nested past the cap), ``no_active``, ``refuse_token``
(HTTP 400 ``{"error": "invalid_token"}``, as oidc-provider answers for JWTs), and the token's
answer spelled as a lenient reader takes it: ``byte_order_mark``, ``utf16``, ``overflow``
(``exp`` 1e400), ``lone_surrogate`` (in ``sub``). A closed port
stands in for "down". Metadata modes: ``rfc8414`` (default), ``oidc_insert``, ``oidc_append``,
``none`` (404 everywhere); ``metadata_issuer`` overrides the ``issuer`` member (mismatch tests);
``metadata_spelling`` serves the metadata with a BOM, in UTF-16 or as ``text/plain``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import unquote_plus

from aiohttp import web
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import RSAKey

__all__ = ["IssuerStub", "generate_rsa_key"]
__test__ = False  # a support module, not a test module (its name matches test_*.py)

JWT_BEARER = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

Fault = Literal[
    "slow",
    "5xx",
    "oversized",
    "redirect",
    "wrong_content_type",
    "malformed",
    "deep",
    "no_active",
    "refuse_token",
    "byte_order_mark",
    "utf16",
    "overflow",
    "lone_surrogate",
]


def generate_rsa_key() -> tuple[str, str]:
    """(private PKCS#8 PEM, public SPKI PEM) of a fresh 2048-bit RSA key."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    public = (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    return private, public


@dataclass
class IssuerStub:
    """What the loopback issuer answers, and what it saw."""

    path: str = ""
    """Issuer path (``/realms/acme``); the issuer identifier is ``base_url + path``."""
    client_id: str = "mcp-gateway"
    client_secret: str = "s3cr&t:with=odd chars/%"
    client_auth: str = "client_secret_basic"
    public_key_pem: str | None = None
    resource: str = "https://mcp.example.com/mcp"
    metadata_mode: Literal["rfc8414", "oidc_insert", "oidc_append", "none"] = "rfc8414"
    metadata_issuer: str | None = None
    introspection_endpoint: str | None = None
    """Overrides the advertised endpoint (e.g. another origin)."""
    fault: Fault | None = None
    metadata_fault: Literal["5xx", "slow"] | None = None
    metadata_spelling: Literal["byte_order_mark", "utf16", "text_plain"] | None = None
    slow_s: float = 0.5
    tokens: dict[str, dict[str, Any]] = field(default_factory=dict)
    base_url: str = ""
    introspection_calls: int = 0
    metadata_calls: int = 0
    auth_failures: int = 0
    seen_jti: set[str] = field(default_factory=set)
    seen_requests: list[dict[str, Any]] = field(default_factory=list)
    """Every introspection request: method, headers and form (for assertions)."""

    # --- setup -----------------------------------------------------------------------------

    def bind(self, base_url: str) -> IssuerStub:
        self.base_url = base_url.rstrip("/")
        return self

    @property
    def issuer(self) -> str:
        return self.base_url + self.path

    @property
    def endpoint(self) -> str:
        return self.base_url + self.path + "/introspect"

    def grant(self, token: str, **claims: Any) -> dict[str, Any]:
        """Make ``token`` introspect as an active access token; ``claims`` override (a value
        of ``...`` removes the member)."""
        now = int(time.time())
        doc: dict[str, Any] = {
            "active": True,
            "iss": self.issuer,
            "aud": self.resource,
            "exp": now + 300,
            "iat": now - 5,
            "sub": "alice",
            "client_id": "claude-code",
            "scope": "mcp:access docs:read",
            "token_type": "Bearer",
        }
        doc.update(claims)
        self.tokens[token] = {k: v for k, v in doc.items() if v is not ...}
        return self.tokens[token]

    def revoke(self, token: str) -> None:
        self.tokens[token] = {"active": False}

    # --- the application ----------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/.well-known/{tail:.*}", self._metadata)
        app.router.add_get("/{prefix:.*}/.well-known/{tail:.*}", self._metadata)
        app.router.add_post("/{tail:.*}/introspect", self._introspect)
        app.router.add_post("/introspect", self._introspect)
        app.router.add_post("/elsewhere", self._introspect)
        return app

    def _metadata_path(self) -> str | None:
        if self.metadata_mode == "rfc8414":
            return "/.well-known/oauth-authorization-server" + self.path
        if self.metadata_mode == "oidc_insert":
            return "/.well-known/openid-configuration" + self.path
        if self.metadata_mode == "oidc_append":
            return self.path + "/.well-known/openid-configuration"
        return None

    async def _metadata(self, request: web.Request) -> web.StreamResponse:
        self.metadata_calls += 1
        if self.metadata_fault == "5xx":
            return web.Response(status=503)
        if self.metadata_fault == "slow":
            await asyncio.sleep(self.slow_s)
        if request.path != self._metadata_path():
            return web.json_response({"error": "not_found"}, status=404)
        doc = {
            "issuer": self.metadata_issuer if self.metadata_issuer is not None else self.issuer,
            "token_endpoint": self.issuer + "/token",
            "introspection_endpoint": self.introspection_endpoint or self.endpoint,
            "introspection_endpoint_auth_methods_supported": [
                "client_secret_basic",
                "client_secret_post",
                "private_key_jwt",
            ],
        }
        if self.metadata_spelling is not None:
            return _spelled(doc, self.metadata_spelling)
        return web.json_response(doc)

    def _client_ok(self, request: web.Request, form: dict[str, str]) -> bool:
        if self.client_auth == "client_secret_basic":
            header = request.headers.get("Authorization", "")
            if not header.startswith("Basic "):
                return False
            try:
                raw = base64.b64decode(header[6:], validate=True).decode()
            except ValueError:
                return False
            user, _, password = raw.partition(":")
            return (unquote_plus(user), unquote_plus(password)) == (
                self.client_id,
                self.client_secret,
            )
        if self.client_auth == "client_secret_post":
            return (form.get("client_id"), form.get("client_secret")) == (
                self.client_id,
                self.client_secret,
            )
        if form.get("client_assertion_type") != JWT_BEARER or self.public_key_pem is None:
            return False
        try:
            token = jwt.decode(
                form.get("client_assertion", ""),
                RSAKey.import_key(self.public_key_pem),
                algorithms=["RS256", "PS256"],
            )
        except (JoseError, ValueError):
            return False
        claims = token.claims
        jti = claims.get("jti")
        if (
            claims.get("iss") != self.client_id
            or claims.get("sub") != self.client_id
            or claims.get("aud") != self.issuer
            or not isinstance(claims.get("exp"), int)
            or claims["exp"] <= time.time()
            or claims["exp"] > time.time() + 300
            or not isinstance(jti, str)
            or jti in self.seen_jti
        ):
            return False
        self.seen_jti.add(jti)
        return True

    async def _introspect(self, request: web.Request) -> web.StreamResponse:
        self.introspection_calls += 1
        form = {k: v for k, v in (await request.post()).items() if isinstance(v, str)}
        self.seen_requests.append(
            {"path": request.path, "headers": dict(request.headers), "form": form}
        )
        if not self._client_ok(request, form):
            self.auth_failures += 1
            return web.json_response({"error": "invalid_client"}, status=401)
        if form.get("token_type_hint") != "access_token" or "token" not in form:
            return web.json_response({"error": "invalid_request"}, status=400)
        fault = self.fault
        if fault == "slow":
            await asyncio.sleep(self.slow_s)
        elif fault == "5xx":
            return web.json_response({"error": "server_error"}, status=503)
        elif fault == "oversized":
            return web.json_response({"active": True, "padding": "x" * 20_000})
        elif fault == "redirect":
            return web.Response(status=307, headers={"Location": self.base_url + "/elsewhere"})
        elif fault == "wrong_content_type":
            return web.Response(text=json.dumps({"active": False}), content_type="text/html")
        elif fault == "malformed":
            return web.Response(text="{not json", content_type="application/json")
        elif fault == "deep":
            nested: Any = {"active": True}
            for _ in range(10):
                nested = {"n": nested}
            return web.json_response({"active": True, "x": nested})
        elif fault == "no_active":
            return web.json_response({"sub": "alice"})
        elif fault == "refuse_token":
            return web.json_response({"error": "invalid_token"}, status=400)
        doc = self.tokens.get(form["token"], {"active": False})
        if fault in ("byte_order_mark", "utf16", "overflow", "lone_surrogate"):
            return _spelled(doc, fault)
        return web.json_response(doc)


def _spelled(doc: dict[str, Any], spelling: str) -> web.Response:
    """``doc`` as JSON a lenient reader (``json.loads`` of the bytes) takes, a strict one not."""
    text = json.dumps(doc)
    content_type = "application/json"
    if spelling == "overflow":  # an exp past the double range: inf to json.loads
        text = text.replace('"exp": ', '"exp": 1e400, "was": ', 1)
    elif spelling == "lone_surrogate":
        text = text.replace('"sub": "', '"sub": "\\ud800', 1)
    elif spelling == "text_plain":
        content_type = "text/plain"
    body = text.encode("utf-16") if spelling == "utf16" else text.encode()
    if spelling == "byte_order_mark":
        body = b"\xef\xbb\xbf" + body
    return web.Response(body=body, headers={"Content-Type": content_type})
