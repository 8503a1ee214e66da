"""SECURITY: with token exchange the caller's token leaves the gateway only towards its issuer.

The token-exchange credential is the one consumer of the caller's token beyond authentication
(``CallerToken``). Every outbound request the gateway makes is captured (``Outbound.stream``,
the one place they go through), with every log line (structlog, stdlib, stdout/stderr where the
audit trail goes), the metrics, everything the upstream received and every answer. Driven
through HTTP: an exchange, a cached call, an upstream 401 and re-exchange, a refusal, an
outage, a legacy client, a revocation, with a caller assertion on the same backend. The caller's
token (and its encoded forms) may appear only in requests to the issuer; the exchanged token
only in requests to the backend (and its answer from the issuer's token endpoint, not logged).
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus

import pytest

from gateway.dev.dev_issuer import DevIssuer
from gateway.outbound.client import Outbound
from tests.support.assertion_verifier import write_key
from tests.support.exchange_stack import exchange_stack
from tests.support.live_stack import MakeStack
from tests.support.printed import Printed

ADMIN = "leak-exchange-admin-token-0123456789"


def _forms(token: str) -> list[str]:
    return [token, quote_plus(token), base64.b64encode(token.encode()).decode()]


async def test_the_callers_token_goes_only_to_its_issuer(
    tmp_path: Path, make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch, leaks: Printed
) -> None:
    monkeypatch.setenv("LEAK_ADMIN", ADMIN)
    outbound: list[tuple[str, str]] = []  # (url, everything sent)
    original = Outbound.stream

    def recording(self: Outbound, destination: str, method: str, url: str, **kw: Any) -> Any:
        sent = f"{method} {url} {kw.get('headers')!r} {kw.get('body')!r} {kw.get('data')!r}"
        outbound.append((url, sent))
        return original(self, destination, method, url, **kw)

    monkeypatch.setattr(Outbound, "stream", recording)
    dev = DevIssuer()
    key = write_key(tmp_path / "assertion.pem")
    seen: list[str] = []
    callers: list[str] = []
    async with make_stack.of(
        exchange_stack,
        dev=dev,
        gateway={
            "audit": {"sink": "stdout"},
            "admin": {"token": {"env": "LEAK_ADMIN"}},
            "backend": {"identity": {"assertion": {"key": {"file": str(key)}}}},
        },
    ) as (stack, upstream):

        async def call(token: str, legacy: bool = False) -> None:
            callers.append(token)
            if legacy:
                status, headers, text = await stack.legacy_call(token)
            else:
                status, headers, text = await stack.call(token, "echo", {"text": "hi"})
            seen.append(f"{status} {headers!r} {text}")

        erin = stack.token(sub="erin")
        await call(erin)  # exchanged
        await call(erin)  # cached
        await call(erin, legacy=True)
        # The backend refuses the exchanged token once: dropped, exchanged again.
        upstream.accepted.clear()
        upstream.fault = "401_once"
        await call(erin)
        upstream.fault = None
        dev.exchange_faults.error = "access_denied"
        await call(stack.token(sub="refused"))
        dev.exchange_faults.error = None
        dev.exchange_faults.status = 503
        await call(stack.token(sub="outage"))
        dev.exchange_faults.status = None
        seen.append((await stack.revoke(erin, ADMIN))[1])
        await call(erin)  # revoked: 401
        async with stack.session.get(stack.server.ops_url + "/metrics") as response:
            metrics = await response.text()
        received = "\n".join(
            f"{r.method} {r.path} {dict(r.headers)!r} {r.body!r}" for r in upstream.requests
        )
        exchanged = {s.token for s in upstream.calls_seen()}
        issuer = dev.url
    statuses = {line[:3] for line in seen}
    assert {"200", "401", "403", "503"} <= statuses, seen
    assert len(exchanged) >= 2  # the re-exchange after the upstream's 401 happened
    output = leaks.written()
    assert '"event":"tool_call"' in output and '"exchange":' in output
    # Positive control: the capture sees the caller's token where it must go.
    to_issuer = [sent for url, sent in outbound if url.startswith(issuer)]
    assert any(erin in sent for sent in to_issuer)
    elsewhere = "\n".join(sent for url, sent in outbound if not url.startswith(issuer))
    assert any(token in elsewhere for token in exchanged)  # the backend got its tokens
    haystacks = {
        "outbound requests not to the issuer": elsewhere,
        "structlog leaks.events": repr(leaks.events),
        "stdout/stderr (audit trail)": output,
        "stdlib logs": leaks.logged(),
        "responses": "\n".join(seen),
        "metrics": metrics,
        "what the upstream received": received,
    }
    for where, text in haystacks.items():
        for token in callers:
            for form in _forms(token):
                assert form not in text, f"the caller's token leaked into {where}"
    for where in (
        "structlog leaks.events",
        "stdout/stderr (audit trail)",
        "stdlib logs",
        "metrics",
        "responses",
    ):
        for token in exchanged:
            assert token not in haystacks[where], f"an exchanged token leaked into {where}"
