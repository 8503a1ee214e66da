"""Per issuer ``groups`` and ``roles`` (issue 25): group and role claims become policy scopes
through the same derivation as scopes (claim -> prefix -> ``scope_map``), in both token
modes, and an Entra group overage is refused rather than read as "no groups".

Real dev issuers on loopback: an Entra-shaped one (JWT, no introspection, provider-shaped
tokens from :mod:`tests.support.providers`) and a Keycloak-shaped one answering RFC 7662
introspection with the token's own claims.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from gateway.dev.dev_issuer import DevIssuer
from tests.support.jwt_stack import parse_challenge
from tests.support.live_stack import LiveStack, MakeStack
from tests.support.providers import (
    ENTRA_API_CLIENT_ID,
    entra_app_token,
    entra_user_token,
    keycloak_service_token,
)
from tests.support.upstreams import ModernUpstream, echo_tool

API = f"api://{ENTRA_API_CLIENT_ID}/"
SRE_GROUP = "0b5e1c7a-4f2d-4e55-9a61-5c0ffee0sre1"  # Entra groups are object ids
OTHER_GROUP = "7d0a9e12-1b3c-4d5e-8f70-0ther0group1"

POLICY = """\
version: 1
baseline_scopes: [mcp:access]
tools:
  search_notes: {scopes: []}
  restart_service: {scopes: [group:sre]}
  create_note: {scopes: [notes:write]}
"""

ENTRA: dict[str, Any] = {
    "tokens": "jwt",
    "client_id": None,
    "client_secret": None,
    "jwks_uri": "{issuer_url}/jwks",
    "audiences": [ENTRA_API_CLIENT_ID],
    "accept_typ": ["JWT"],
    "scope_prefix": API,
    "subject_claim": "oid",
    "roles": {"claim": "roles", "prefix": API},
    "groups": {"claim": "groups", "prefix": "group:"},
    "scope_map": {
        f"{API}mcp.access": "mcp:access",
        f"{API}Notes.Writer": "notes:write",
        f"group:{SRE_GROUP}": "group:sre",
    },
}

KEYCLOAK: dict[str, Any] = {
    "roles": {"claim": ["realm_access", "roles"], "prefix": "role:"},
    "groups": {"claim": "groups", "prefix": "group:"},
    "scope_map": {"group:/sre": "group:sre", "role:notes-writer": "notes:write"},
}


def _upstream() -> ModernUpstream:
    return ModernUpstream(
        tools=[echo_tool(n) for n in ("search_notes", "restart_service", "create_note")]
    )


async def _ok(stack: LiveStack, token: str, tool: str) -> None:
    status, _, text = await stack.call(token, tool, {"text": "x"})
    assert status == 200 and '"isError":false' in text.replace(" ", ""), (tool, text)


async def _forbidden(stack: LiveStack, token: str, tool: str) -> dict[str, Any]:
    status, headers, text = await stack.call(token, tool, {"text": "x"})
    assert status == 403, (tool, text)
    assert parse_challenge(headers["WWW-Authenticate"])["error"] == "insufficient_scope"
    data: dict[str, Any] = json.loads(text)["error"]["data"]
    return data


def _assert_overage(stack: LiveStack, status: int, headers: dict[str, str], text: str) -> None:
    """The ``groups_overage`` row exactly: 401, an ``invalid_token`` challenge that says why,
    JSON-RPC -31401, the baseline in ``data``."""
    assert status == 401, text
    assert headers["Cache-Control"] == "no-store"
    params = parse_challenge(headers["WWW-Authenticate"])
    assert params["error"] == "invalid_token"
    assert params["error_description"] == (
        "The access token does not carry its groups (group overage)"
    )
    assert params["resource_metadata"] == stack.config.prm_url
    body = json.loads(text)
    assert body["error"]["code"] == -31401
    assert body["error"]["message"] == "The access token does not carry its groups (group overage)"


@pytest.mark.row("groups_overage")
async def test_entra_groups_and_app_roles_decide_and_an_overage_is_refused(
    make_stack: MakeStack,
) -> None:
    entra = DevIssuer(token_format="jwt", introspection=False)
    async with make_stack(
        issuer=entra,
        upstream=_upstream(),
        policy=POLICY,
        gateway={"issuer": ENTRA},
    ) as stack:
        sre = entra_user_token(entra, scp="mcp.access", groups=[OTHER_GROUP, SRE_GROUP])
        await _ok(stack, sre, "restart_service")
        await _ok(stack, sre, "search_notes")

        # Another group, or no groups claim at all (a user in no group): refused by scope.
        for token in (
            entra_user_token(entra, scp="mcp.access", groups=[OTHER_GROUP]),
            entra_user_token(entra, scp="mcp.access"),
        ):
            assert (await _forbidden(stack, token, "restart_service"))["missing_scopes"] == [
                f"group:{SRE_GROUP}"  # spelled back for the issuer, like any mapped scope
            ]
            await _ok(stack, token, "search_notes")

        # An app role (client credentials: roles, no scp) maps like a delegated scope.
        app = entra_app_token(entra, roles=["mcp.access", "Notes.Writer"])
        await _ok(stack, app, "create_note")
        assert (await _forbidden(stack, app, "restart_service"))["missing_scopes"] == [
            f"group:{SRE_GROUP}"
        ]

        # Group overage: more than 200 groups, so Entra names a Graph source instead of the
        # groups. Never read as "no groups": the token is refused, for every call.
        overage = {
            "_claim_names": {"groups": "src1"},
            "_claim_sources": {
                "src1": {"endpoint": "https://graph.microsoft.com/v1.0/users/x/getMemberObjects"}
            },
        }
        for claims in (overage, {"hasgroups": True}):
            for tool in ("search_notes", "restart_service"):
                token = entra_user_token(entra, scp="mcp.access", **claims)
                status, headers, text = await stack.call(token, tool, {"text": "x"})
                _assert_overage(stack, status, headers, text)
            token = entra_user_token(entra, scp="mcp.access", **claims)
            status, headers, text = await stack.modern(token, "tools/list")
            _assert_overage(stack, status, headers, text)
            # A repeat within the negative cache's lifetime stays refused (as invalid_token).
            status, headers, text = await stack.modern(token, "tools/list")
            assert status == 401, text
            assert parse_challenge(headers["WWW-Authenticate"])["error"] == "invalid_token"


async def test_keycloak_realm_roles_and_groups_through_introspection(make_stack: MakeStack) -> None:
    async with make_stack(
        upstream=_upstream(),
        policy=POLICY,
        gateway={"issuer": KEYCLOAK},
    ) as stack:
        resource = stack.config.resource
        roles = {"roles": ["offline_access", "notes-writer"]}
        sre = keycloak_service_token(
            stack.issuer, resource, scope="mcp:access", groups=["/sre"], realm_access=roles
        )
        await _ok(stack, sre, "restart_service")
        await _ok(stack, sre, "create_note")
        plain = keycloak_service_token(stack.issuer, resource, scope="mcp:access", groups=["/dev"])
        await _ok(stack, plain, "search_notes")
        assert (await _forbidden(stack, plain, "restart_service"))["missing_scopes"] == [
            "group:/sre"
        ]
        assert (await _forbidden(stack, plain, "create_note"))["missing_scopes"] == [
            "role:notes-writer"
        ]
        assert stack.issuer.introspection_calls >= 2
        # An answer that names its groups elsewhere is refused in this mode too.
        hidden = keycloak_service_token(stack.issuer, resource, scope="mcp:access", hasgroups=True)
        status, headers, text = await stack.call(hidden, "search_notes", {"text": "x"})
        _assert_overage(stack, status, headers, text)
        # A groups claim that is not an array of strings is a malformed token, not "no groups".
        bad = keycloak_service_token(stack.issuer, resource, scope="mcp:access", groups="/sre")
        status, headers, text = await stack.call(bad, "search_notes", {"text": "x"})
        assert status == 401 and parse_challenge(headers["WWW-Authenticate"])["error"] == (
            "invalid_token"
        ), text
