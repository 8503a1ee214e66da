"""A tiny external verifier for the login surface's ``login.verifier`` (docs/user-authorization.md,
"An external verifier"): ``GET /start`` answers the gateway's sign-in request at once for the
person :attr:`TinyVerifier.person` names (a real one would sign them in first), with an
assertion signed by its ES256 key; ``GET /jwks`` publishes the key. :attr:`TinyVerifier.claims`
and :attr:`TinyVerifier.header` change what the next assertions say (the tests' forgeries).
"""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import urlencode

from aiohttp import web
from joserfc import jws
from joserfc.jwk import ECKey

from gateway.jsonkit.write import compact

__all__ = ["TinyVerifier"]

ISSUER_PATH = ""


class TinyVerifier:
    def __init__(self) -> None:
        self.key = ECKey.generate_key("P-256", parameters={"kid": "verifier-1"}, private=True)
        self.url = ""
        self.person: tuple[str, str] = ("", "")
        """(issuer, subject) the next assertion names."""
        self.claims: dict[str, Any] = {}
        """Claims every assertion gets on top of (or instead of) its own; None removes one."""
        self.header: dict[str, Any] = {}
        self.error: str | None = None
        """Answer with this RFC 6749 error instead of an assertion."""
        self.requests: list[dict[str, str]] = []

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/start", self._start)
        app.router.add_get("/jwks", self._jwks)
        return app

    async def _jwks(self, request: web.Request) -> web.Response:
        public = self.key.as_dict(private=False)
        return web.json_response({"keys": [{**public, "use": "sig", "alg": "ES256"}]})

    def assertion(self, params: dict[str, str]) -> str:
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": self.url,
            "aud": params["audience"],
            "iat": now,
            "exp": now + 60,
            "nonce": params["nonce"],
            "sub_id": {"format": "iss_sub", "iss": self.person[0], "sub": self.person[1]},
        }
        for name, value in self.claims.items():
            if value is None:
                claims.pop(name, None)
            else:
                claims[name] = value
        header = {"alg": "ES256", "kid": "verifier-1", "typ": "login-assertion+jwt", **self.header}
        return jws.serialize_compact(header, compact(claims), self.key, algorithms=["ES256"])

    async def _start(self, request: web.Request) -> web.Response:
        params = dict(request.query)
        self.requests.append(params)
        answer = {"state": params["state"]}
        if self.error is not None:
            answer["error"] = self.error
        else:
            answer["assertion"] = self.assertion(params)
        raise web.HTTPFound(f"{params['redirect_uri']}?{urlencode(answer)}")
