"""RFC 8693 token exchange at the development issuer (DEVELOPMENT ONLY).

``grant_type=urn:ietf:params:oauth:grant-type:token-exchange`` at ``/token`` (§2.1): a client
that may exchange (its ``grant_types`` include the grant, and :class:`ExchangePolicy` lists it)
presents a ``subject_token`` this issuer issued (``subject_token_type`` access_token or jwt),
optionally an ``actor_token``, and the target as ``audience`` and/or ``resource`` values. The
answer (§2.2.1) is a new access token for exactly those targets with the subject token's
``sub``, an ``act`` claim naming the acting party (§4.1: the actor token's subject, else the
authenticated client), the subject token's scope or a subset (``scope``), ``issued_token_type``,
``token_type: Bearer`` and ``expires_in`` no longer than the subject token has left. It is a
JWT when ``requested_token_type`` is jwt or the issuer issues JWTs, else opaque and
introspectable; it belongs to the subject token (revoking that revokes it too).

Refusals (§2.2.2, RFC 6749 §5.2): ``invalid_request`` (missing or unsupported parameters, a
missing actor token where the policy requires one), ``invalid_grant`` (the subject or actor
token is unknown, expired or revoked), ``unauthorized_client`` (the client may not exchange),
``invalid_target`` (a target the policy does not allow it), ``invalid_scope`` (more than the
subject token has). :class:`ExchangeFaults` makes outages for tests.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

from aiohttp import web
from authlib.oauth2.rfc6749 import (
    InvalidGrantError,
    InvalidRequestError,
    InvalidScopeError,
    UnauthorizedClientError,
)
from authlib.oauth2.rfc6749.grants import BaseGrant, TokenEndpointMixin

from gateway.config import ACCESS_TOKEN_TYPE, TOKEN_EXCHANGE_GRANT
from gateway.dev.issuer_adapter import CONFIDENTIAL_METHODS, InvalidTargetError
from gateway.dev.issuer_keys import access_token_claims
from gateway.dev.issuer_store import DevClient, TokenRecord

if TYPE_CHECKING:
    from gateway.dev.issuer_server import DevAuthorizationServer

__all__ = [
    "JWT_TOKEN_TYPE",
    "TOKEN_EXCHANGE_GRANT",
    "ExchangeFaults",
    "ExchangePolicy",
    "TokenExchange",
]

JWT_TOKEN_TYPE: Final = "urn:ietf:params:oauth:token-type:jwt"
_SUBJECT_TYPES: Final = (ACCESS_TOKEN_TYPE, JWT_TOKEN_TYPE)


@dataclass
class ExchangePolicy:
    """Which clients may exchange tokens, and for which targets (``audience`` and
    ``resource`` values, compared exactly)."""

    allowed: dict[str, set[str]] = field(default_factory=dict)
    require_actor: bool = False
    """Refuse an exchange without ``actor_token`` (as issuers that need one, e.g. Okta)."""

    def allow(self, client_id: str, *targets: str) -> None:
        self.allowed.setdefault(client_id, set()).update(targets)


@dataclass
class ExchangeFaults:
    """Test knobs for the exchange grant only (the other grants are unaffected)."""

    status: int | None = None
    """Answer with this HTTP status and ``{"error": "temporarily_unavailable"}``."""
    body: bytes | None = None
    """Answer 200 with these bytes (garbage) instead of a token."""
    content_type: str = "application/json"
    """The ``Content-Type`` of :attr:`body`."""
    delay_s: float = 0.0
    """Wait this long before answering (a slow issuer)."""
    error: str | None = None
    """Refuse every exchange with this OAuth error code (HTTP 400)."""
    ttl_s: int | None = None
    """Lifetime of issued tokens (default: the issuer's access-token lifetime)."""
    calls: int = 0
    """Exchange requests received (counted before any knob applies)."""

    async def answer(self) -> web.Response | None:
        """Count one exchange request; the faulty answer the knobs ask for, if any."""
        self.calls += 1
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        headers = {"Cache-Control": "no-store"}
        if self.status is not None:
            body = {"error": "temporarily_unavailable", "error_description": "Try again later."}
            return web.json_response(body, status=self.status, headers=headers)
        if self.body is not None:
            headers["Content-Type"] = self.content_type
            return web.Response(body=self.body, headers=headers)
        if self.error is not None:
            body = {"error": self.error, "error_description": "Refused (test knob)."}
            return web.json_response(body, status=400, headers=headers)
        return None


class TokenExchange(BaseGrant, TokenEndpointMixin):  # type: ignore[misc]
    """The RFC 8693 §2 grant (see the module docstring)."""

    GRANT_TYPE = TOKEN_EXCHANGE_GRANT
    TOKEN_ENDPOINT_AUTH_METHODS = list(CONFIDENTIAL_METHODS)  # noqa: RUF012

    server: DevAuthorizationServer

    def validate_token_request(self) -> None:
        client: DevClient = self.authenticate_token_endpoint_client()
        if not client.check_grant_type(self.GRANT_TYPE):
            raise UnauthorizedClientError("The client may not use token exchange.")
        self.request.client = client
        form = self.request.payload.data
        many = self.request.payload.datalist
        subject = self._token(form.get("subject_token"), form.get("subject_token_type"), "subject")
        requested = form.get("requested_token_type") or ACCESS_TOKEN_TYPE
        if requested not in _SUBJECT_TYPES:
            raise InvalidRequestError("Unsupported requested_token_type.")
        policy = self.server.exchange_policy
        if form.get("actor_token"):
            actor = self._token(form.get("actor_token"), form.get("actor_token_type"), "actor")
            act: dict[str, Any] = {"sub": actor.sub}
        elif policy.require_actor:
            raise InvalidRequestError("An actor_token is required.")
        else:
            act = {"sub": client.client_id}
        if subject.act is not None:
            act["act"] = subject.act  # §4.1: the chain of earlier actors, nested
        resources = many.get("resource", [])
        for value in resources:
            parts = urlsplit(value)
            if not parts.scheme or not parts.netloc or "#" in value:
                raise InvalidTargetError("A resource must be an absolute URI.")
        targets = tuple(dict.fromkeys([*resources, *many.get("audience", [])]))
        allowed = policy.allowed.get(client.client_id)
        if allowed is None:
            raise UnauthorizedClientError("The client may not exchange tokens.")
        if not targets or any(target not in allowed for target in targets):
            raise InvalidTargetError("The client may not exchange for this target.")
        granted = subject.scope.split()
        wanted = (form.get("scope") or "").split()
        if any(scope not in granted for scope in wanted):
            raise InvalidScopeError("More scope than the subject token has.")
        self.request.exchange = (subject, act, targets, " ".join(wanted or granted), requested)

    def _token(self, value: str | None, kind: str | None, role: str) -> TokenRecord:
        if not value or not kind:
            raise InvalidRequestError(f"{role}_token and {role}_token_type are required.")
        if kind not in _SUBJECT_TYPES:
            raise InvalidRequestError(f"Unsupported {role}_token_type.")
        record = self.server.store.tokens.get(value)
        if record is None or record.kind != "access_token" or record.revoked:
            raise InvalidGrantError(f"The {role} token is not valid.")
        if record.is_expired():
            raise InvalidGrantError(f"The {role} token has expired.")
        return record

    def create_token_response(self) -> tuple[int, dict[str, Any], list[tuple[str, str]]]:
        subject, act, targets, scope, requested = self.request.exchange
        client: DevClient = self.request.client
        now = int(time.time())
        ttl = self.server.exchange_faults.ttl_s or self.server.settings.access_token_ttl_s
        expires_at = min(now + ttl, subject.expires_at)
        signer = self.server.jwt_signer
        if signer is not None or requested == JWT_TOKEN_TYPE:
            claims = access_token_claims(
                issuer=self.server.settings.issuer,
                sub=subject.sub,
                client_id=client.client_id,
                scope=scope,
                audience=targets,
                issued_at=now,
                expires_at=expires_at,
            )
            claims["act"] = act
            value = self.server.sign_exchanged(claims)
        else:
            value = secrets.token_urlsafe(32)
        self.server.store.tokens[value] = TokenRecord(
            value=value,
            kind="access_token",
            client_id=client.client_id,
            sub=subject.sub,
            scope=scope,
            audience=targets,
            issued_at=now,
            expires_at=expires_at,
            family=subject.family,
            act=act,
            parent=subject.value,
        )
        body = {
            "access_token": value,
            "issued_token_type": requested,
            "token_type": "Bearer",
            "expires_in": max(0, expires_at - now),
            "scope": scope,
        }
        return 200, body, self.TOKEN_RESPONSE_HEADER
