"""SECURITY: a JWT access token never appears in logs, the audit trail, metrics or answers.

The leak test of ``test_token_leak.py`` for the local-validation path: every JWT outcome
(valid, cached, each refusal, an unknown kid that refreshes the key set, an unknown issuer, an
oversized token, a revoked one, a key set that cannot be fetched) is driven through the full
gateway over HTTP while structlog events, stdout/stderr (where the audit trail goes) and stdlib
log records are captured. Neither the token, nor its signature, nor its encoded forms may show
up anywhere a client or an operator can see.
"""

from __future__ import annotations

import base64
import time
from urllib.parse import quote_plus

import pytest

from gateway.dev.dev_issuer import DevIssuer
from tests.support.jwt_forge import access_claims, tamper
from tests.support.jwt_stack import jwt_stack, started_gateway
from tests.support.live_stack import MakeStack
from tests.support.printed import Printed

ADMIN = "leak-test-admin-token-0123456789abcdef"


def forms(token: str) -> list[str]:
    signature = token.rsplit(".", 1)[1]
    return [
        token,
        quote_plus(token),
        base64.b64encode(token.encode()).decode(),
        signature[: max(16, len(signature) // 2)],
    ]


async def test_no_jwt_outcome_leaks_the_token(
    make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch, leaks: Printed
) -> None:
    monkeypatch.setenv("LEAK_ADMIN_TOKEN", ADMIN)
    seen: list[str] = []
    used: list[str] = []
    dev = DevIssuer(token_format="jwt", introspection=False)
    async with make_stack.of(
        jwt_stack,
        dev=dev,
        issuer={"max_token_bytes": 2048, "jwks_unknown_kid_interval_s": 1},
        gateway={
            "audit": {"sink": "stdout"},
            "admin": {"token": {"env": "LEAK_ADMIN_TOKEN"}},
        },
    ) as stack:

        async def call(token: str) -> None:
            used.append(token)
            status, headers, text = await stack.call(token, "echo", {"text": "hi"})
            seen.append(f"{status} {headers!r} {text}")

        resource, now = stack.config.resource, int(time.time())
        valid = stack.token()
        await call(valid)  # valid
        await call(valid)  # cached
        await call(tamper(stack.token(sub="tampered")))
        await call(dev.sign_jwt(access_claims(dev.url, resource), header={"kid": "x"}))
        await call(dev.sign_jwt(access_claims("https://elsewhere.example", resource)))
        await call(dev.sign_jwt(access_claims(dev.url, resource, exp=now - 3600)))
        await call(dev.sign_jwt(access_claims(dev.url, resource), header={"typ": "JWT"}))
        await call(dev.sign_jwt(access_claims(dev.url, resource, pad="p" * 2048)))
        seen.append((await stack.revoke(valid, ADMIN))[1])
        await call(valid)  # revoked
        # A replica that starts while the key set is down answers 503.
        dev.jwks.status = 503
        async with started_gateway(stack.config_path) as (server, session):
            fresh = stack.token(sub="no-keys-yet")
            used.append(fresh)
            headers = {
                "Authorization": f"Bearer {fresh}",
                "Content-Type": "application/json",
                "Accept": "application/json",
            }
            async with session.post(server.mcp_url, data=b"{}", headers=headers) as response:
                seen.append(f"{response.status} {dict(response.headers)!r} {await response.text()}")
        async with stack.session.get(stack.server.ops_url + "/metrics") as response:
            metrics = await response.text()

    statuses = {line.split(" ", 1)[0] for line in seen if line[:3].isdigit()}
    assert {"200", "401", "503"} <= statuses, seen
    assert leaks.events, "structlog capture saw no leaks.events; the test would prove nothing"
    output = leaks.written()
    assert '"event":"tool_call"' in output and '"auth_method":"jwt"' in output
    haystacks = {
        "structlog leaks.events": repr(leaks.events),
        "stdout/stderr (audit trail)": output,
        "stdlib logs": leaks.logged(),
        "responses": "\n".join(seen),
        "metrics": metrics,
    }
    for where, text in haystacks.items():
        for token in used:
            for form in forms(token):
                assert form not in text, f"token leaked into {where}"
