"""Who the gateway is toward one backend, by ``credential.type``: the credential of the backend's
own traffic (era detection, catalog, change streams) and the credential of each call.

* ``bearer``, ``client_credentials``: the service credential, for everything.
* ``token_exchange``: each call carries the caller's exchanged token
  (:mod:`~gateway.backend.credentials.token_exchange`); the backend's own traffic, the exchange
  client's client-credentials token.
* ``user_oauth``: each call carries the caller's own upstream token
  (:mod:`~gateway.backend.credentials.user_credential`), or raises ``ConsentNeeded``; the
  backend's own traffic, ``catalog_token`` or nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from gateway.backend.credentials.service_credential import ServiceCredential, make_credential
from gateway.backend.credentials.token_exchange import TokenExchange
from gateway.backend.credentials.user_call import UserCall
from gateway.backend.credentials.user_credential import UserCredential
from gateway.config import BackendConfig, Config
from gateway.observability.metrics import Metrics
from gateway.outbound.client import Outbound
from gateway.seams import CallerToken, Principal, RequestContext

__all__ = ["CallCredentials"]


class CallCredentials:
    """One backend's credentials (module docstring)."""

    def __init__(
        self,
        settings: BackendConfig,
        config: Config,
        outbound: Outbound,
        *,
        metrics: Metrics | None,
        clock: Callable[[], float] = time.monotonic,
        user: UserCredential | None = None,
    ) -> None:
        """``user``: a ``user_oauth`` backend's credential (built by the composition root: it
        needs the token store and the login surface's redirect URI)."""
        name, kind = settings.name, settings.credential.type
        self.exchange: TokenExchange | None = None
        self.user: UserCredential | None = None
        self.service: ServiceCredential
        if kind == "token_exchange":
            self.service = self.exchange = TokenExchange(
                settings.credential, config, outbound, backend=name, metrics=metrics, clock=clock
            )
            if metrics is not None:
                metrics.register_identity(name, exchange=self.exchange.__len__)
        elif kind == "user_oauth":
            if user is None:
                raise ValueError(f"backend {name}: a user_oauth credential needs its token store")
            self.service = self.user = user
            if metrics is not None:
                metrics.register_user_oauth(name)
        else:
            self.service = make_credential(
                settings.credential, config, outbound, backend=name, clock=clock
            )

    @property
    def per_caller(self) -> bool:
        """Whether each call carries a credential of its own (exchanged or the person's)."""
        return self.exchange is not None or self.user is not None

    async def for_call(
        self,
        token: CallerToken | None,
        principal: Principal,
        ctx: RequestContext,
        deadline: float,
    ) -> ServiceCredential | None:
        """The call's own credential, or None (the service credential); raises
        exchange_refused / exchange_unavailable, ``ConsentNeeded`` or
        upstream_token_unavailable before anything is sent."""
        if self.exchange is not None:
            return await self.exchange.for_call(token, principal, ctx, deadline)
        if self.user is not None:
            return await self.user.for_call(token, principal, deadline)
        return None

    @staticmethod
    async def settle(credential: ServiceCredential | None) -> None:
        """After a call: raise what its credential found (a person's token refused by the
        upstream: ``ConsentNeeded``)."""
        if isinstance(credential, UserCall):
            await credential.settle()

    def forget(self, digest: bytes) -> None:
        """A caller token was revoked or left the authenticator's cache."""
        if self.exchange is not None:
            self.exchange.forget(digest)
        if self.user is not None:
            self.user.forget(digest)
