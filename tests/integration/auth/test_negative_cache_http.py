"""At the defaults a retried refused token costs the issuer one introspection (issue 18).

Real components: the development issuer over HTTP, a real upstream and the production wiring
with the shipped defaults for ``issuer.cache`` and ``issuer.failed_auth_rate`` (30/minute).
"""

from __future__ import annotations

import json

import pytest

from tests.support.demo_stack import parse_challenge
from tests.support.live_stack import MakeStack

# More than the default failed-auth budget (30/minute): without the negative cache each retry
# would be introspected and charged again, and the 32nd would get 429.
PRESENTATIONS = 40


@pytest.mark.row("invalid_token")
async def test_retries_of_one_refused_token_make_one_introspection_and_all_get_401(
    make_stack: MakeStack,
) -> None:
    async with make_stack() as stack:
        assert stack.config.issuers[0].cache.negative_ttl_s == 5  # the default, not set here
        token = stack.token()
        assert stack.issuer.revoke(token)
        before = stack.issuer.introspection_calls
        answers = [await stack.modern(token, "tools/list") for _ in range(PRESENTATIONS)]
        introspected = stack.issuer.introspection_calls - before
        assert introspected == 1
        assert [status for status, _, _ in answers] == [401] * PRESENTATIONS
        for _, headers, text in answers:
            assert json.loads(text)["error"]["code"] == -31401
            assert "Retry-After" not in headers
            assert parse_challenge(headers["WWW-Authenticate"])["error"] == "invalid_token"
        # The entry is per token: another refused token is introspected on its own.
        other = stack.token(sub="frank")
        assert stack.issuer.revoke(other)
        status, _, _ = await stack.modern(other, "tools/list")
        assert status == 401
        assert stack.issuer.introspection_calls - before == 2
        # A valid token from the same address is unaffected.
        status, _, text = await stack.modern(stack.token(), "tools/list")
        assert status == 200, text
