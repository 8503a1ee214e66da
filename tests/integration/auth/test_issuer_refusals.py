"""An issuer that refuses a token with HTTP 400 (oidc-provider style) is a 401, not an outage.

Real components: the development issuer with its oidc-provider switch
(``jwt_introspection_error``: JWT-shaped tokens it does not know get HTTP 400
``{"error": "unsupported_token_type"}`` or ``invalid_token``), a real upstream, and the production
wiring. Transport failures and 5xx stay ``503 issuer_unavailable`` (tests/integration/auth).
"""

from __future__ import annotations

import base64
import json

import pytest
import structlog

from tests.support.demo_stack import parse_challenge
from tests.support.live_stack import MakeStack


def forged_jwt(n: int) -> str:
    def part(value: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'RS256', 'typ': 'JWT'})}.{part({'sub': f'mallory-{n}'})}.c2lnbmF0dXJl"


@pytest.mark.row("invalid_token")
@pytest.mark.parametrize("code", ["unsupported_token_type", "invalid_token"])
async def test_a_400_refusal_naming_the_token_is_401_invalid_token_and_logged(
    make_stack: MakeStack, code: str
) -> None:
    async with make_stack() as stack:
        stack.issuer.jwt_introspection_error = code
        with structlog.testing.capture_logs() as events:
            status, headers, text = await stack.modern(forged_jwt(1), "tools/list")
        assert status == 401, text
        assert "Retry-After" not in headers
        challenge = parse_challenge(headers["WWW-Authenticate"])
        assert challenge["error"] == "invalid_token"
        refused = [e for e in events if e["event"] == "token_refused_by_issuer"]
        assert [(e["status"], e["error"]) for e in refused] == [(400, code)]
        assert not [e for e in events if e["event"] == "issuer_unavailable"]
        # A valid opaque token still works: the issuer is healthy.
        status, _, text = await stack.modern(stack.token(), "tools/list")
        assert status == 200, text


async def test_forged_jwts_hit_the_failed_auth_budget_instead_of_the_issuer(
    make_stack: MakeStack,
) -> None:
    # issuer.failed_auth_rate defaults to 30/minute per client IP.
    async with make_stack() as stack:
        stack.issuer.jwt_introspection_error = "unsupported_token_type"
        before = stack.issuer.introspection_calls
        statuses = [(await stack.modern(forged_jwt(n), "tools/list"))[0] for n in range(35)]
        introspected = stack.issuer.introspection_calls - before
    assert statuses[:30] == [401] * 30
    assert statuses[-1] == 429
    assert 503 not in statuses
    # The 31st refusal exhausts the budget; from then on no introspection happens.
    assert introspected <= 31


async def test_a_400_that_does_not_name_the_token_is_still_an_issuer_fault(
    make_stack: MakeStack,
) -> None:
    # invalid_request is about the gateway's own request: an operator problem, not the token's.
    async with make_stack() as stack:
        stack.issuer.jwt_introspection_error = "invalid_request"
        with structlog.testing.capture_logs() as events:
            status, headers, _ = await stack.modern(forged_jwt(2), "tools/list")
        assert status == 503
        assert headers["Retry-After"] == "5"
        (down,) = [e for e in events if e["event"] == "issuer_unavailable"]
        assert (down["reason"], down["status"], down["error"]) == (
            "http_error",
            400,
            "invalid_request",
        )


@pytest.mark.row("issuer_unavailable")
async def test_an_issuer_5xx_is_503_and_the_log_line_names_its_status_and_error_code(
    make_stack: MakeStack,
) -> None:
    async with make_stack() as stack:
        stack.issuer.introspection_status = 503  # body {"error": "temporarily_unavailable"}
        with structlog.testing.capture_logs() as events:
            status, headers, _ = await stack.modern(stack.token(), "tools/list")
        assert status == 503
        assert headers["Retry-After"] == "5"
        (down,) = [e for e in events if e["event"] == "issuer_unavailable"]
        assert (down["status"], down["error"]) == (503, "temporarily_unavailable")
