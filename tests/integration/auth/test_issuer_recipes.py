"""docs/issuers.md is deployable as written: every recipe loads, and the Entra ID recipe accepts
Entra-shaped tokens through the full gateway.

The recipes are read from the document itself, so a recipe that drifts from the configuration
schema (a renamed key, a wrong value) fails here, not at an operator's first deployment. The
Entra test runs the recipe against the development issuer in its Entra shape (JWT access tokens,
no introspection endpoint), with tokens shaped like Entra's v2.0 access tokens: ``typ: JWT``,
``aud`` = the API's client id, ``scp`` a space-separated string of short names, ``roles``,
``oid``, ``azp``.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.config import load_config
from gateway.dev.dev_issuer import DevIssuer
from tests.support.jwt_stack import assert_invalid_token, jwt_stack
from tests.support.live_stack import MakeStack

ROOT = Path(__file__).resolve().parents[3]
RECIPES = ROOT / "docs" / "issuers.md"
API_CLIENT_ID = "66666666-7777-8888-9999-000000000000"
PLACEHOLDERS = {
    "<tenant-id>": "11111111-2222-3333-4444-555555555555",
    "<api-client-id>": API_CLIENT_ID,
    "<tenant>": "acme",
    "<region>": "eu",
    "<your-okta-domain>": "acme.okta.com",
    "<server-id>": "default",
    "<gateway-app-client-id>": "0oa1gateway",
    "<realm>": "acme",
    "<aud of the tokens, if not the resource>": "api://acme",
    "<the header's alg, e.g. RS256 or ES256>": "RS256",
}
TAIL = """backend:
  url: https://tools.example.com/mcp
  credential: {type: bearer, token: {env: RECIPE_BACKEND_TOKEN}}
policy: policy.yaml
"""


def recipe_blocks() -> list[tuple[str, str]]:
    """(the heading above it, the YAML) for every ``yaml`` block with an ``issuer:`` or
    ``issuers:`` section."""
    text = RECIPES.read_text(encoding="utf-8")
    found = []
    for match in re.finditer(r"```yaml\n(.*?)```", text, re.DOTALL):
        heading = re.findall(r"^## (.+)$", text[: match.start()], re.MULTILINE)[-1]
        block = match.group(1)
        for placeholder, value in PLACEHOLDERS.items():
            block = block.replace(placeholder, value)
        assert "<" not in block, f"unknown placeholder in the {heading} recipe: {block}"
        if re.search(r"^issuers?:", block, re.MULTILINE):
            found.append((heading, block))
    return found


BLOCKS = recipe_blocks()


@pytest.mark.parametrize(("heading", "block"), BLOCKS, ids=[h for h, _ in BLOCKS])
def test_every_recipe_loads_without_problems_or_warnings(
    tmp_path: Path, heading: str, block: str
) -> None:
    (tmp_path / "policy.yaml").write_text("version: 1\nbaseline_scopes: [mcp:access]\ntools: {}\n")
    doc = yaml.safe_load(block)
    doc.setdefault("resource", "https://mcp.example.com/mcp")
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False) + TAIL)
    config = load_config(
        path, {"RECIPE_BACKEND_TOKEN": "t", "GATEWAY_INTROSPECTION_SECRET": "s3cret"}
    )
    assert config.warnings == ()
    assert all(issuer.url.startswith("https://") for issuer in config.issuers)


def test_the_recipes_cover_every_provider_the_docs_promise() -> None:
    assert {heading for heading, _ in BLOCKS} >= {
        "Microsoft Entra ID",
        "Auth0",
        "Okta",
        "Keycloak",
        "Any OpenID Connect provider",
    }
    keycloak = [block for heading, block in BLOCKS if heading == "Keycloak"]
    okta = [block for heading, block in BLOCKS if heading == "Okta"]
    assert len(keycloak) == 2 and len(okta) == 2  # both modes each


def entra_recipe() -> dict[str, Any]:
    (block,) = [block for heading, block in BLOCKS if heading == "Microsoft Entra ID"]
    issuer: dict[str, Any] = yaml.safe_load(block)["issuer"]
    # The development issuer stands in for login.microsoftonline.com, on loopback.
    issuer.update(url="{issuer_url}", jwks_uri="{issuer_url}/jwks", allow_insecure_http=True)
    return issuer


def entra_token(dev: DevIssuer, **claims: Any) -> str:
    now = int(time.time())
    body = {
        "aud": API_CLIENT_ID,
        "iss": dev.url,
        "iat": now,
        "nbf": now,
        "exp": now + 3600,
        "azp": "claude-code-app",
        "azpacr": "0",
        "oid": "9f3c0b1e-user-object-id",
        "sub": "pairwise-per-app-subject",
        "tid": "tenant",
        "ver": "2.0",
        "scp": "mcp.access tools.echo",
        **claims,
    }
    return dev.sign_jwt({k: v for k, v in body.items() if v is not None}, header={"typ": "JWT"})


async def test_the_entra_recipe_accepts_entra_shaped_tokens(
    tmp_path: Path, make_stack: MakeStack
) -> None:
    dev = DevIssuer(token_format="jwt", introspection=False)
    scope = f"api://{API_CLIENT_ID}/"
    policy = (
        f'version: 1\nbaseline_scopes: ["{scope}mcp.access"]\n'
        f'tools:\n  echo: {{scopes: ["{scope}tools.echo"]}}\n'
    )
    audit = tmp_path / "audit.jsonl"
    async with make_stack.of(
        jwt_stack,
        dev=dev,
        issuer=entra_recipe(),
        gateway={"audit": {"sink": "file", "path": str(audit)}},
        policy=policy,
    ) as stack:
        assert stack.config.warnings == ()
        # A user token (delegated scp) and an application token (app roles, no scp).
        status, _, text = await stack.call(entra_token(dev), "echo", {"text": "hi"})
        assert status == 200, text
        app = entra_token(
            dev, scp=None, roles=["mcp.access", "tools.echo"], oid="service-principal-oid"
        )
        assert (await stack.call(app, "echo", {"text": "hi"}))[0] == 200
        # Without the tool's scope: 403 naming the full scope a client can ask Entra for.
        narrow = entra_token(dev, scp="mcp.access")
        status, headers, _ = await stack.call(narrow, "echo", {"text": "hi"})
        assert status == 403
        assert f"{scope}tools.echo" in headers["WWW-Authenticate"]
        # An Entra v1.0 token (another iss) and a token for another API (aud) are refused.
        for wrong in (
            {"iss": "https://sts.windows.net/tenant/"},
            {"aud": "00000003-0000-0000-c000-000000000000"},
        ):
            assert_invalid_token(
                stack, *await stack.call(entra_token(dev, **wrong), "echo", {"text": "hi"})
            )
    events = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [(e["subject"], e["client_id"], e["auth_method"]) for e in events[:2]] == [
        ("9f3c0b1e-user-object-id", "claude-code-app", "jwt"),
        ("service-principal-oid", "claude-code-app", "jwt"),
    ]
