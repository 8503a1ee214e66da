"""The gateway's own service credential toward the upstream (never the client's token).

Two kinds, chosen by ``backend.credential.type``:

* ``bearer`` (:class:`StaticBearer`): a token from ``{env: NAME}`` or ``{file: PATH}``. A file is
  re-read when its modification time changes, so rotating the file rotates the credential without
  a restart.
* ``client_credentials`` (:class:`ClientCredentials`): RFC 6749 §4.4 at the issuer's token
  endpoint (``credential.token_endpoint``, else ``issuer.token_endpoint``, else RFC 8414 / OIDC
  discovery from ``issuer.url``), client authentication by :mod:`gateway.outbound.client_auth`
  (``client_secret_basic``, ``client_secret_post``, ``private_key_jwt`` per RFC 7523 §2.2),
  ``scope`` plus RFC 8707 ``resource`` and ``audience`` parameters. The token is cached until
  ``refresh_margin_s`` before it expires; refreshes are single-flight; an upstream 401 discards
  the token once.

Errors raise :class:`CredentialError` with a fixed message (never a secret or a response body).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from typing import Any, Final, Protocol, runtime_checkable
from urllib.parse import urlsplit

from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from joserfc.errors import JoseError
from joserfc.jwk import ECKey, OKPKey, RSAKey

from gateway.config import (
    DEFAULT_BACKEND,
    Config,
    CredentialConfig,
    IssuerConfig,
    Secret,
    is_loopback_url,
)
from gateway.jsonkit.read import JsonError, answer, loads_object
from gateway.observability.logging import get_logger
from gateway.outbound.client import Outbound
from gateway.outbound.client_auth import ClientAuthentication, post_oauth_form
from gateway.outbound.failures import OutboundError
from gateway.outbound.responses import Response

__all__ = [
    "DEFAULT_EXPIRES_IN_S",
    "TOKEN_DESTINATION",
    "ClientCredentials",
    "CredentialError",
    "ScopeAware",
    "ServiceCredential",
    "StaticBearer",
    "TokenClient",
    "build_client_auth",
    "discover_token_endpoint",
    "make_credential",
    "oauth_error_code",
    "parse_token_response",
    "time_left",
]

TOKEN_DESTINATION: Final = "token"  # noqa: S105 - a destination name, not a secret
"""The :class:`gateway.outbound.client.Destination` name used for the issuer's token endpoint."""
DEFAULT_EXPIRES_IN_S: Final = 300
"""Lifetime assumed when the token response has no ``expires_in`` (RFC 6749 §5.1: RECOMMENDED)."""
_MAX_TOKEN_RESPONSE: Final = 65_536
# RFC 6750 §2.1 b64token: what may follow "Bearer " without breaking the header.
_B64TOKEN: Final = re.compile(r"[A-Za-z0-9\-._~+/]+=*")

_log = get_logger("gateway.backend.credentials")


class CredentialError(Exception):
    """The service credential could not be obtained (fixed message, no secrets)."""


class ServiceCredential(Protocol):
    """**Protocol:** hands out the bearer value for ``Authorization: Bearer <value>``."""

    async def token(self, deadline: float) -> str: ...

    def invalidate(self, token: str) -> bool:
        """The upstream answered 401 to ``token``; return True when a retry may help."""
        ...


@runtime_checkable
class ScopeAware(Protocol):
    """**Protocol:** a credential told when the upstream answers 403 ``insufficient_scope``
    (a person's upstream token: the next consent asks for more)."""

    def insufficient_scope(self, token: str, scope: str | None) -> None: ...


class StaticBearer:
    """A configured bearer token; a ``file:`` secret is re-read when the file changes."""

    __slots__ = ("_secret",)

    def __init__(self, secret: Secret) -> None:
        self._secret = secret

    async def token(self, deadline: float) -> str:
        value = self._secret.current()
        if not _B64TOKEN.fullmatch(value):
            raise CredentialError("backend bearer token is not a valid RFC 6750 token")
        return value

    def invalidate(self, token: str) -> bool:
        # Retry only if rotation already replaced the value the upstream refused.
        return self._secret.current(force=True) != token


class ClientCredentials:
    """RFC 6749 §4.4 client-credentials grant with caching and single-flight refresh."""

    def __init__(
        self,
        credential: CredentialConfig,
        config: Config,
        outbound: Outbound,
        *,
        clock: Callable[[], float] = time.monotonic,
        backend: str = DEFAULT_BACKEND,
        issuer: IssuerConfig | None = None,
    ) -> None:
        """``issuer``: whose token endpoint (default the first configured issuer)."""
        if credential.client_id is None:
            raise CredentialError("client_credentials needs a client_id")
        self._backend = backend
        self._cred = credential
        self._issuer = issuer if issuer is not None else config.issuer
        self._outbound = outbound
        self._clock = clock
        self._timeout_s = self._issuer.timeout_s
        self._endpoint: str | None = credential.token_endpoint or self._issuer.token_endpoint
        self._lock = asyncio.Lock()
        self._token: str | None = None
        self._refresh_at = 0.0
        self._tokens = TokenClient(outbound, credential)
        self.fetches = 0
        """Token requests sent so far (for metrics and tests)."""

    async def token(self, deadline: float) -> str:
        if self._token is not None and self._clock() < self._refresh_at:
            return self._token
        async with self._lock:
            # Single flight: whoever waited on the lock finds the fresh token here.
            if self._token is not None and self._clock() < self._refresh_at:
                return self._token
            return await self._fetch(deadline)

    def invalidate(self, token: str) -> bool:
        if self._token == token:
            self._token = None
            self._refresh_at = 0.0
        return True

    async def _fetch(self, deadline: float) -> str:
        endpoint = self._endpoint or await self._discover(deadline)
        form: list[tuple[str, str]] = [("grant_type", "client_credentials")]
        if self._cred.scope:
            form.append(("scope", self._cred.scope))
        if self._cred.resource:
            form.append(("resource", self._cred.resource))  # RFC 8707 §2
        if self._cred.audience:
            form.append(("audience", self._cred.audience))
        self.fetches += 1
        started = self._clock()
        try:
            response = await self._tokens.post(
                endpoint, form, self._timeout_s, deadline, max_body=_MAX_TOKEN_RESPONSE
            )
        except OutboundError as exc:
            _log.warning(
                "backend_token_request_failed", backend=self._backend, error=type(exc).__name__
            )
            raise CredentialError("token endpoint unreachable") from exc
        if response.status != 200:
            _log.warning(
                "backend_token_request_refused",
                backend=self._backend,
                status=response.status,
                error=oauth_error_code(response.body),
            )
            raise CredentialError("token endpoint refused the request")
        try:
            payload = answer(response.content_type, response.body)
        except JsonError as exc:
            raise CredentialError("token endpoint answered malformed JSON") from exc
        token, lifetime = parse_token_response(payload)
        margin = min(float(self._cred.refresh_margin_s), lifetime / 2)
        self._token = token
        self._refresh_at = started + lifetime - margin
        _log.info("backend_token_fetched", backend=self._backend, expires_in=lifetime)
        return token

    async def _discover(self, deadline: float) -> str:
        self._endpoint = await discover_token_endpoint(self._outbound, self._issuer, deadline)
        return self._endpoint


def time_left(timeout_s: float, deadline: float) -> float:
    """A request's timeout: ``timeout_s``, or what is left before ``deadline`` (monotonic) where
    that comes first; never zero."""
    return max(0.001, min(timeout_s, deadline - time.monotonic()))


class TokenClient:
    """The gateway as one credential's OAuth client at issuers' token endpoints: requests go to
    the :data:`TOKEN_DESTINATION` pool with the credential's client authentication, a
    ``private_key_jwt`` assertion's ``aud`` being the endpoint (RFC 7523 §3)."""

    def __init__(self, outbound: Outbound, credential: CredentialConfig) -> None:
        self._outbound = outbound
        self._auth = build_client_auth(credential)

    async def post(
        self,
        endpoint: str,
        form: list[tuple[str, str]],
        timeout_s: float,
        deadline: float,
        *,
        max_body: int,
        span: str | None = None,
    ) -> Response:
        """POST ``form`` within ``timeout_s`` and ``deadline`` (monotonic). Raises
        :class:`~gateway.outbound.failures.OutboundError`."""
        return await post_oauth_form(
            self._outbound,
            TOKEN_DESTINATION,
            endpoint,
            form,
            auth=self._auth,
            audience=endpoint,
            timeout_s=time_left(timeout_s, deadline),
            max_body=max_body,
            span=span,
        )


async def discover_token_endpoint(outbound: Outbound, issuer: IssuerConfig, deadline: float) -> str:
    """The issuer's token endpoint from RFC 8414 §3 metadata, then OpenID Connect Discovery 1.0
    §4, at ``issuer.url``; raise :class:`CredentialError` when neither names a usable one."""
    base = issuer.url.rstrip("/")
    parts = urlsplit(base)
    origin = f"{parts.scheme}://{parts.netloc}"
    candidates = (
        f"{origin}/.well-known/oauth-authorization-server{parts.path}",
        f"{base}/.well-known/openid-configuration",
    )
    for url in candidates:
        try:
            response = await outbound.request(
                TOKEN_DESTINATION,
                "GET",
                url,
                timeout_s=time_left(issuer.timeout_s, deadline),
                headers={"Accept": "application/json"},
                max_body=_MAX_TOKEN_RESPONSE,
            )
            if response.status != 200:
                continue
            metadata = answer(response.content_type, response.body)
        except (OutboundError, JsonError):
            continue
        # RFC 8414 §3.3: the issuer in the document must be the one we asked.
        if str(metadata.get("issuer", "")).rstrip("/") != base:
            continue
        endpoint = metadata.get("token_endpoint")
        if isinstance(endpoint, str) and _endpoint_allowed(issuer, endpoint):
            return endpoint
    raise CredentialError("token endpoint not discoverable from the issuer metadata")


def _endpoint_allowed(issuer: IssuerConfig, url: str) -> bool:
    scheme = urlsplit(url).scheme
    if scheme == "https":
        return True
    return scheme == "http" and issuer.allow_insecure_http and is_loopback_url(url)


def build_client_auth(cred: CredentialConfig) -> ClientAuthentication:
    """The client authentication of ``cred`` (``client_auth``): the one of
    :mod:`gateway.outbound.client_auth` (fresh ``jti``/``exp`` per private_key_jwt request)."""
    client_id = cred.client_id or ""
    if cred.client_auth == "private_key_jwt":
        if cred.private_key is None:
            raise CredentialError("private_key_jwt needs a private_key")
        key, alg = _signing_key(cred.private_key.reveal())
        return ClientAuthentication(
            client_id,
            "private_key_jwt",
            clock=time.time,
            key=key,
            alg=alg,
            key_id=cred.private_key_id,
        )
    if cred.client_secret is None:
        raise CredentialError(f"{cred.client_auth} needs a client_secret")
    return ClientAuthentication(
        client_id, cred.client_auth, clock=time.time, secret=cred.client_secret
    )


def _signing_key(pem: str) -> tuple[RSAKey | ECKey | OKPKey, str]:
    """The private key as a joserfc JWK (what authlib's RFC 7523 signer takes) and its alg."""
    try:
        loaded = load_pem_private_key(pem.encode("utf-8"), password=None)
        if isinstance(loaded, ec.EllipticCurvePrivateKey):
            # RFC 7518 §3.4: the curve fixes the ECDSA algorithm.
            alg = {"secp256r1": "ES256", "secp384r1": "ES384", "secp521r1": "ES512"}.get(
                loaded.curve.name, "ES256"
            )
            return ECKey.import_key(pem), alg
        if isinstance(loaded, ed25519.Ed25519PrivateKey | ed448.Ed448PrivateKey):
            return OKPKey.import_key(pem), "EdDSA"
        return RSAKey.import_key(pem), "RS256"
    except (ValueError, TypeError, JoseError) as exc:
        raise CredentialError("backend private_key cannot be loaded") from exc


_OAUTH_ERROR_CODE: Final = re.compile(r"[a-z_]{1,64}")


def oauth_error_code(body: bytes) -> str | None:
    """The ``error`` member (RFC 6749 §5.2) of a token endpoint's refusal, bounded for logs:
    ``None`` without one, ``"other"`` unless it is 1-64 characters of ``[a-z_]`` (never the
    issuer's text verbatim), so an operator sees ``invalid_client`` or ``invalid_target``."""
    try:
        doc = loads_object(body)
    except JsonError:
        return None
    code = doc.get("error")
    if code is None:
        return None
    return code if isinstance(code, str) and _OAUTH_ERROR_CODE.fullmatch(code) else "other"


def parse_token_response(payload: Any) -> tuple[str, float]:
    """RFC 6749 §5.1: access_token, token_type Bearer, optional positive expires_in."""
    if not isinstance(payload, dict):
        raise CredentialError("token response is not an object")
    token = payload.get("access_token")
    if not isinstance(token, str) or not _B64TOKEN.fullmatch(token):
        raise CredentialError("token response has no usable access_token")
    token_type = payload.get("token_type")
    if not isinstance(token_type, str) or token_type.lower() != "bearer":
        raise CredentialError("token response is not a bearer token")
    expires_in = payload.get("expires_in", DEFAULT_EXPIRES_IN_S)
    if isinstance(expires_in, str) and expires_in.isdigit():
        expires_in = int(expires_in)  # some servers send a string; RFC 6749 says number
    if isinstance(expires_in, bool) or not isinstance(expires_in, int | float) or expires_in <= 0:
        raise CredentialError("token response has an invalid expires_in")
    return token, float(expires_in)


def make_credential(
    cred: CredentialConfig,
    config: Config,
    outbound: Outbound,
    *,
    backend: str = DEFAULT_BACKEND,
    clock: Callable[[], float] = time.monotonic,
) -> StaticBearer | ClientCredentials:
    """The service credential of one backend (``cred``: its ``credential:`` section)."""
    if cred.type == "bearer":
        if cred.token is None:
            raise CredentialError("bearer credential needs a token")
        return StaticBearer(cred.token)
    return ClientCredentials(cred, config, outbound, clock=clock, backend=backend)
