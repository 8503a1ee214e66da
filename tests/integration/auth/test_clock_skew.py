"""One clock-skew rule everywhere: a token is valid until ``exp + issuer.clock_skew_s``.

The claim check, the expiry re-check right before dispatch (pipeline step 16) and the cache
lifetime all read :attr:`Principal.valid_until`. The development issuer's clock is set behind
(``store.clock_offset_s``), so it reports an ``exp`` in the gateway's past for a token it still
considers active, exactly what a skewed production issuer does.
"""

from __future__ import annotations

import json

import pytest

from tests.support.live_stack import MakeStack


async def test_a_token_ten_seconds_past_exp_is_served_end_to_end_with_a_30s_skew(
    make_stack: MakeStack,
) -> None:
    async with make_stack(
        gateway={"issuer": {"clock_skew_s": 30, "cache": {"max_ttl_s": 60}}},
    ) as stack:
        token = stack.token(ttl_s=30)
        stack.issuer.store.clock_offset_s = -40  # reported exp = now - 10
        before = stack.issuer.introspection_calls
        for rid in (1, 2):
            status, _, text = await stack.call(token, arguments={"text": "hi"}, rid=rid)
            assert status == 200, text
            assert json.loads(text)["result"]["isError"] is False
        # Cached until exp + skew (now + 20), not dropped at exp (already past).
        assert stack.issuer.introspection_calls - before == 1
        assert len(stack.upstream.calls("tools/call")) == 2


@pytest.mark.row("invalid_token")
async def test_a_token_past_exp_plus_the_skew_is_refused(make_stack: MakeStack) -> None:
    async with make_stack(gateway={"issuer": {"clock_skew_s": 30}}) as stack:
        token = stack.token(ttl_s=30)
        stack.issuer.store.clock_offset_s = -61  # reported exp = now - 31
        status, headers, _ = await stack.call(token, arguments={"text": "hi"})
    assert status == 401
    assert headers["WWW-Authenticate"].startswith('Bearer error="invalid_token"')
    assert stack.upstream.calls("tools/call") == []
