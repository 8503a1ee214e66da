"""``scope_map_only: true`` (issue 43, item 11): a less trusted issuer grants only what its
``scope_map`` names.

Two real development issuers behind one gateway. The second is marked ``scope_map_only`` with
a map from its own spelling (``partner.access``, ``partner.echo``) to the policy's names: its
tokens that carry the policy's names themselves (``mcp:access``, ``tools:echo``) grant nothing,
while the first issuer's tokens with those names keep working. Through HTTP, with the 403s
spelled as the second issuer's clients request the scopes.
"""

from __future__ import annotations

import json

import pytest

from tests.support.jwt_stack import parse_challenge
from tests.support.live_stack import (
    MakeStack,
    issuer_entries,
    other_issuer,
)

PARTNER_MAP = {"partner.access": "mcp:access", "partner.echo": "tools:echo"}


async def test_scope_map_only_issuer_cannot_grant_policy_scopes_by_their_own_names(
    make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with other_issuer(monkeypatch) as partner:
        first, second = issuer_entries(partner)
        second = {**second, "scope_map": PARTNER_MAP, "scope_map_only": True}
        async with make_stack(
            gateway={"issuer": None, "issuers": [first, second]},
        ) as stack:
            resource = stack.config.resource

            def partner_token(scopes: str) -> str:
                return partner.mint_token(sub="mallory", scopes=scopes, audience=resource)

            # The trusted issuer's own names grant as before.
            status, _, text = await stack.call(stack.token("mcp:access tools:echo"), "echo")
            assert status == 200, text
            # The partner minting the policy's names gets nothing: not even the baseline.
            status, headers, text = await stack.call(partner_token("mcp:access tools:echo"))
            assert status == 403, text
            challenge = parse_challenge(headers["WWW-Authenticate"])
            assert challenge["error"] == "insufficient_scope"
            assert challenge["scope"] == "partner.access"  # its own spelling of the baseline
            # Its mapped spellings grant exactly what the map names.
            status, _, text = await stack.call(partner_token("partner.access partner.echo"))
            assert status == 200, text
            # A mapped baseline with the policy's name for the tool scope: the tool scope is
            # dropped, so the call is a step-up naming the partner's spelling.
            status, headers, text = await stack.call(partner_token("partner.access tools:echo"))
            assert status == 403, text
            challenge = parse_challenge(headers["WWW-Authenticate"])
            assert challenge["scope"] == "partner.access partner.echo"
            assert json.loads(text)["error"]["data"]["missing_scopes"] == ["partner.echo"]
