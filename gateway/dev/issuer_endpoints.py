"""The development issuer's token, registration, introspection, revocation and demo-token
endpoints (DEVELOPMENT ONLY), mixed into :class:`~gateway.dev.dev_issuer.DevIssuer`.

``/token`` checks a DPoP proof first (RFC 9449 §5: the token is bound to its key) and lets the
token-exchange test knobs answer; ``/introspect`` has the outage and "not one of ours" knobs;
``/dev/tokens`` mints a token for a running demo, for loopback peers with the admin secret only.
The grants and endpoints themselves are authlib's (:mod:`gateway.dev.issuer_server`).
"""

from __future__ import annotations

import dataclasses
import hmac
import re
from collections.abc import Callable

from aiohttp import web

from gateway.config import TOKEN_EXCHANGE_GRANT
from gateway.dev.dpop_proofs import DpopRefused, TokenEndpointProofs
from gateway.dev.issuer_adapter import ParsedRequest, oauth_error
from gateway.dev.issuer_exchange import ExchangeFaults
from gateway.dev.issuer_server import DevAuthorizationServer
from gateway.dev.issuer_store import IssuerStore
from gateway.dev.loopback import is_loopback_host

__all__ = ["EndpointHandlers"]

_JWT_SHAPE = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*")
"""RFC 7519 §3 compact serialisation: three base64url parts (the signature may be empty)."""


class EndpointHandlers:
    """``/token``, ``/register``, ``/introspect``, ``/revoke``, ``/dev/tokens`` (mixed into the
    development issuer, which sets these attributes)."""

    server: DevAuthorizationServer
    store: IssuerStore
    dpop_proofs: TokenEndpointProofs
    exchange_faults: ExchangeFaults
    introspection_status: int | None
    jwt_introspection_error: str | None
    admin_secret: str
    user_sub: str

    @property
    def url(self) -> str:
        raise NotImplementedError

    mint_token: Callable[..., str]
    """The issuer's own :meth:`~gateway.dev.dev_issuer.DevIssuer.mint_token`."""

    async def _token(self, request: web.Request) -> web.StreamResponse:
        parsed = await ParsedRequest.read(request)
        proofs = request.headers.getall("DPoP", ())
        if proofs:
            try:
                jkt = self.dpop_proofs.check(proofs, htm="POST", htu=f"{self.url}/token")
            except DpopRefused as exc:
                return oauth_error(400, "invalid_dpop_proof", str(exc))
            parsed = dataclasses.replace(parsed, dpop_jkt=jkt)
        if (parsed.form.get("grant_type") or [""])[0] == TOKEN_EXCHANGE_GRANT:
            faulted = await self.exchange_faults.answer()
            if faulted is not None:
                return faulted
        return self._safe(lambda: self.server.create_token_response(parsed))

    async def _register(self, request: web.Request) -> web.StreamResponse:
        try:
            parsed = await ParsedRequest.read(request, json_body=True)
        except ValueError:
            return oauth_error(400, "invalid_client_metadata", "The body must be JSON.")
        if not isinstance(parsed.json, dict):
            return oauth_error(400, "invalid_client_metadata", "The body must be a JSON object.")
        return self._safe(
            lambda: self.server.create_endpoint_response("client_registration", parsed)
        )

    async def _introspect(self, request: web.Request) -> web.StreamResponse:
        parsed = await ParsedRequest.read(request)
        if self.introspection_status is not None:
            self.store.introspection_calls += 1
            return web.json_response(
                {"error": "temporarily_unavailable"}, status=self.introspection_status
            )
        response = self._safe(lambda: self.server.create_endpoint_response("introspection", parsed))
        token = (parsed.form.get("token") or [""])[0]
        if (
            self.jwt_introspection_error is not None
            and response.status == 200  # the client authenticated; the token is not ours
            and token not in self.store.tokens
            and _JWT_SHAPE.fullmatch(token)
        ):
            return oauth_error(400, self.jwt_introspection_error, "Token cannot be introspected.")
        return response

    async def _revoke(self, request: web.Request) -> web.StreamResponse:
        parsed = await ParsedRequest.read(request)
        return self._safe(lambda: self.server.create_endpoint_response("revocation", parsed))

    async def _mint_endpoint(self, request: web.Request) -> web.Response:
        """DEVELOPMENT ONLY: mint a token for ``mcp-gateway demo token``."""
        peer = request.remote or ""
        supplied = request.headers.get("Authorization", "")
        expected = f"Bearer {self.admin_secret}"
        authorized = hmac.compare_digest(supplied.encode(), expected.encode())
        if not is_loopback_host(peer) or not authorized:
            return oauth_error(401, "invalid_client", "Admin secret required (loopback only).")
        try:
            body = await request.json()
            scopes = str(body["scopes"]).split()
            sub = str(body.get("sub", self.user_sub))
            ttl = int(body.get("ttl_s", self.server.settings.access_token_ttl_s))
            audience = body.get("audience")
            if audience is not None and not isinstance(audience, str):
                raise TypeError("audience")
        except (ValueError, KeyError, TypeError, AttributeError):
            return oauth_error(400, "invalid_request", 'Expected {"scopes": "..."}.')
        jkt = None
        proofs = request.headers.getall("DPoP", ())
        if proofs:  # a bound token, as from the token endpoint (RFC 9449 §5)
            try:
                jkt = self.dpop_proofs.check(proofs, htm="POST", htu=f"{self.url}/dev/tokens")
            except DpopRefused as exc:
                return oauth_error(400, "invalid_dpop_proof", str(exc))
        unknown = [s for s in scopes if s not in self.server.settings.scopes_supported]
        if unknown or not 0 < ttl <= 30 * 86400:
            return oauth_error(400, "invalid_scope", "Unknown scope or bad ttl_s.")
        resources = self.server.settings.resources
        if audience is not None and resources and audience not in resources:
            return oauth_error(400, "invalid_target", "The resource is not served by this issuer.")
        token = self.mint_token(sub=sub, scopes=scopes, audience=audience, ttl_s=ttl, jkt=jkt)
        return web.json_response(
            {
                "access_token": token,
                "token_type": "Bearer" if jkt is None else "DPoP",
                "expires_in": ttl,
                "scope": " ".join(scopes),
            },
            headers={"Cache-Control": "no-store"},
        )

    def _safe(self, call: Callable[[], web.StreamResponse]) -> web.StreamResponse:
        try:
            response: web.StreamResponse = call()
        except ValueError:
            # authlib refuses to render an error description holding '"' or '\' (RFC 6749 §5.2).
            return oauth_error(400, "invalid_request", "Malformed request.")
        return response
