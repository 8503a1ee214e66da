"""Several issuers, one policy (issue 31): docs/issuers.md's "Several providers at once" recipe,
as written, in front of two development issuers shaped like Entra ID v2.0 (JWT, no
introspection) and Keycloak (real RFC 7662 introspection over loopback answering with the
token's own claims), with provider-shaped tokens (:mod:`tests.support.providers`).

One policy, in its own vocabulary, admits both populations; each 403 names the scopes as the
caller's issuer spells them (challenge and JSON-RPC data); the bare 401 and the
protected-resource metadata use the first issuer's spelling; a Keycloak ID token whose ``aud``
names the resource is 401 in introspection mode.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.config import load_config
from gateway.config.issuer import scope_map_warnings
from gateway.dev.dev_issuer import DevIssuer
from gateway.policy.policy_loader import load_policy
from tests.support.jwt_stack import assert_invalid_token, parse_challenge
from tests.support.live_stack import GATEWAY_SECRET, LiveStack, ServerFactory, live_stack
from tests.support.providers import (
    ENTRA_API_CLIENT_ID,
    ENTRA_TENANT_ID,
    entra_app_token,
    entra_user_token,
    keycloak_id_token,
    keycloak_service_token,
)
from tests.support.upstreams import ModernUpstream, echo_tool

ROOT = Path(__file__).resolve().parents[3]
API = f"api://{ENTRA_API_CLIENT_ID}/"
RESOURCE = "https://mcp.example.com/mcp"


def recipe() -> tuple[dict[str, Any], str]:
    """The section's gateway.yaml (placeholders filled) and its policy, as docs/issuers.md has
    them."""
    text = (ROOT / "docs" / "issuers.md").read_text(encoding="utf-8")
    section = text.split("## Several providers at once", 1)[1]
    config, policy = re.findall(r"```yaml\n(.*?)```", section, re.DOTALL)[:2]
    for placeholder, value in {
        "<tenant-id>": ENTRA_TENANT_ID,
        "<api-client-id>": ENTRA_API_CLIENT_ID,
        "<realm>": "acme",
    }.items():
        config = config.replace(placeholder, value)
    assert "<" not in config
    return yaml.safe_load(config), policy


def on_loopback(doc: dict[str, Any], entra: DevIssuer) -> dict[str, Any]:
    """The recipe with the two development issuers standing in for the providers' hosts
    (``{issuer_url}``: the live stack's own issuer, the Keycloak stand-in)."""
    first, second = doc["issuers"]
    assert first["url"] == f"https://login.microsoftonline.com/{ENTRA_TENANT_ID}/v2.0"
    assert second["url"] == "https://keycloak.example.com/realms/acme"
    first.update(url=entra.url, jwks_uri=f"{entra.url}/jwks", allow_insecure_http=True)
    second.update(url="{issuer_url}", allow_insecure_http=True)
    return {"resource": doc["resource"], "issuer": None, "issuers": [first, second]}


@pytest.fixture
async def entra() -> AsyncIterator[DevIssuer]:
    dev = DevIssuer(token_format="jwt", introspection=False)
    await dev.start()
    try:
        yield dev
    finally:
        await dev.stop()


def stack_for(
    tmp_path: Path,
    aiohttp_server: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
    entra: DevIssuer,
    keycloak: DevIssuer,
) -> Any:
    doc, policy = recipe()
    monkeypatch.setenv("GATEWAY_INTROSPECTION_SECRET", GATEWAY_SECRET)
    gateway = on_loopback(doc, entra)
    gateway["audit"] = {"sink": "file", "path": str(tmp_path / "audit.jsonl")}
    upstream = ModernUpstream(tools=[echo_tool("search_notes"), echo_tool("create_note")])
    return live_stack(
        tmp_path,
        aiohttp_server,
        monkeypatch,
        issuer=keycloak,
        upstream=upstream,
        policy=policy,
        gateway=gateway,
    )


def error_data(text: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(text)["error"]["data"]
    return data


async def tool_names(stack: LiveStack, token: str) -> list[str]:
    status, _, text = await stack.modern(token, "tools/list")
    assert status == 200, text
    return sorted(tool["name"] for tool in json.loads(text)["result"]["tools"])


async def test_one_policy_admits_both_populations_and_speaks_each_ones_spelling(
    tmp_path: Path,
    aiohttp_server: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
    entra: DevIssuer,
) -> None:
    keycloak = DevIssuer()
    async with stack_for(tmp_path, aiohttp_server, monkeypatch, entra, keycloak) as stack:
        assert stack.config.warnings == ()
        person = entra_user_token(entra, scp="mcp.access notes.read")
        app = entra_app_token(entra, roles=["mcp.access", "notes.read"])
        service = keycloak_service_token(keycloak, RESOURCE, scope="profile mcp:access notes:read")
        for token in (person, app, service):
            status, _, text = await stack.call(token, "search_notes", {"text": "q"})
            assert status == 200, text
            # Discovery and listing too: the baseline holds in either spelling.
            assert await tool_names(stack, token) == ["search_notes"]
        assert keycloak.introspection_calls >= 1
        # A 2025 client's initialize handshake too, for either population.
        for token in (person, service):
            status, _, text = await stack.legacy_call(token, "search_notes", {"text": "q"})
            assert status == 200 and '"isError":false' in text.replace(" ", ""), text

        # A 403 step-up names every needed scope as the caller's issuer spells it.
        status, headers, text = await stack.call(person, "create_note", {"text": "n"})
        assert status == 403, text
        challenge = parse_challenge(headers["WWW-Authenticate"])
        assert challenge["error"] == "insufficient_scope"
        assert challenge["scope"] == f"{API}mcp.access {API}notes.write"
        assert error_data(text) == {
            "required_scopes": [f"{API}mcp.access", f"{API}notes.write"],
            "missing_scopes": [f"{API}notes.write"],
        }
        message = json.loads(text)["error"]["message"]
        assert message == f"Insufficient scope: requires {API}notes.write"
        status, headers, text = await stack.call(app, "create_note", {"text": "n"})
        assert status == 403 and error_data(text)["missing_scopes"] == [f"{API}notes.write"]
        status, headers, text = await stack.call(service, "create_note", {"text": "n"})
        assert status == 403, text
        assert parse_challenge(headers["WWW-Authenticate"])["scope"] == "mcp:access notes:write"
        assert error_data(text) == {
            "required_scopes": ["mcp:access", "notes:write"],
            "missing_scopes": ["notes:write"],
        }

        # The baseline 403 (before the body is read) too.
        status, headers, text = await stack.call(entra_user_token(entra, scp="notes.read"))
        assert status == 403, text
        assert parse_challenge(headers["WWW-Authenticate"])["scope"] == f"{API}mcp.access"
        assert error_data(text)["missing_scopes"] == [f"{API}mcp.access"]
        kc_narrow = keycloak_service_token(keycloak, RESOURCE, scope="notes:read")
        status, headers, text = await stack.call(kc_narrow)
        assert status == 403, text
        assert parse_challenge(headers["WWW-Authenticate"])["scope"] == "mcp:access"

        # Without a token: the first issuer's spelling, in the challenge, the body and the PRM.
        status, headers, text = await stack.call(None, "search_notes", {"text": "q"})
        assert status == 401, text
        assert parse_challenge(headers["WWW-Authenticate"])["scope"] == f"{API}mcp.access"
        assert error_data(text) == {"required_scopes": [f"{API}mcp.access"]}
        prm = stack.server.mcp_url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")
        async with stack.session.get(prm) as response:
            document = await response.json()
        assert document["scopes_supported"] == [f"{API}mcp.access"]
        assert document["authorization_servers"] == [entra.url, keycloak.url]

    # The audit trail speaks the policy's vocabulary, whoever spelled the scopes how.
    events = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    decided = [
        (e["tool"], e["issuer"], e["decision"], e["granted_scopes"], e["missing_scopes"])
        for e in events
        if e["tool"] in ("search_notes", "create_note")
    ]
    read, step_up = ["mcp:access", "notes:read"], ["mcp:access"]
    assert decided == [
        ("search_notes", entra.url, "allow", read, []),
        ("search_notes", entra.url, "allow", read, []),
        ("search_notes", keycloak.url, "allow", read, []),
        ("search_notes", entra.url, "allow", read, []),
        ("search_notes", keycloak.url, "allow", read, []),
        ("create_note", entra.url, "deny", step_up, ["notes:write"]),
        ("create_note", entra.url, "deny", step_up, ["notes:write"]),
        ("create_note", keycloak.url, "deny", step_up, ["notes:write"]),
    ]
    subjects = [(e["subject"], e["client_id"], e["auth_method"]) for e in events[:3]]
    assert subjects == [
        ("9f3c0b1e-user-object-id", "claude-code-app", "jwt"),
        ("5e1c2d3f-service-principal-oid", "nightly-report-app", "jwt"),
        ("0c5f8a4e-service-account-ci-bot", "ci-bot", "introspection"),
    ]


def test_the_recipe_passes_check_without_scope_map_warnings(tmp_path: Path) -> None:
    doc, policy = recipe()
    (tmp_path / "notes.yaml").write_text(policy)
    doc["backend"] = {
        "url": "https://tools.example.com/mcp",
        "credential": {"type": "bearer", "token": {"env": "RECIPE_BACKEND_TOKEN"}},
    }
    doc["policy"] = "notes.yaml"
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    config = load_config(
        path, {"RECIPE_BACKEND_TOKEN": "t", "GATEWAY_INTROSPECTION_SECRET": "s3cret"}
    )
    known = load_policy(config.policy_paths).known_scopes
    assert scope_map_warnings(config.issuers, known) == []
    # ...and that check would have spoken up had the policy lost a mapped scope.
    assert len(scope_map_warnings(config.issuers, known - {"notes:write"})) == 1


@pytest.mark.row("invalid_token")
async def test_a_keycloak_id_token_is_refused_in_introspection_mode(
    tmp_path: Path,
    aiohttp_server: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
    entra: DevIssuer,
) -> None:
    keycloak = DevIssuer()
    async with stack_for(tmp_path, aiohttp_server, monkeypatch, entra, keycloak) as stack:
        assert stack.config.issuers[1].tokens == "introspection"
        # Keycloak says active: true for it (its aud names the resource) and carries the
        # baseline scope the Audience mapper's client scope put there.
        id_token = keycloak_id_token(keycloak, RESOURCE, scope="openid mcp:access notes:read")
        before = keycloak.introspection_calls
        status, headers, text = await stack.call(id_token, "search_notes", {"text": "q"})
        assert keycloak.introspection_calls == before + 1  # really asked, and refused here
        assert_invalid_token(stack, status, headers, text)
        # Unauthenticated: the 401 names the first issuer's spelling, like any bare 401.
        assert parse_challenge(headers["WWW-Authenticate"])["scope"] == f"{API}mcp.access"
        assert stack.upstream.calls("tools/call") == []
