"""docs/configuration.md's examples load as written: the complete example, and the several-issuers
example (Entra ID + Keycloak under one policy, with Entra's ``scope_map``)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from gateway.auth.jwt_claims import JwtRules, derive
from gateway.config import load_config

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
TAIL = {
    "resource": "https://mcp.example.com/mcp",
    "backend": {
        "url": "https://tools.example.com/mcp",
        "credential": {"type": "bearer", "token": {"env": "DOC_BACKEND_TOKEN"}},
    },
    "policy": "policy.yaml",
}
POLICY = """version: 1
baseline_scopes: [mcp:access]
tools:
  search_notes: {scopes: [notes:read]}
"""
ENV = {"DOC_BACKEND_TOKEN": "t", "GATEWAY_INTROSPECTION_SECRET": "s3cret"}


def block_under(heading: str) -> str:
    section = DOC.split(heading, 1)[1]
    match = re.search(r"```yaml\n(.*?)```", section, re.DOTALL)
    assert match is not None, heading
    return match.group(1)


def write(tmp_path: Path, doc: dict[str, object]) -> Path:
    (tmp_path / "policy.yaml").write_text(POLICY)
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_the_complete_example_loads(tmp_path: Path) -> None:
    doc = yaml.safe_load(block_under("## A complete example"))
    doc["policy"] = "policy.yaml"
    config = load_config(write(tmp_path, doc), ENV, resolve_secrets=False)
    assert config.issuer.url == "https://id.example.com"


def test_the_several_issuers_example_loads_and_maps_entra_onto_the_policy(tmp_path: Path) -> None:
    doc = {**yaml.safe_load(block_under("### Several issuers (`issuers`)")), **TAIL}
    config = load_config(write(tmp_path, doc), ENV)
    assert config.warnings == ()
    entra, keycloak = config.issuers
    assert (entra.tokens, keycloak.tokens) == ("jwt", "introspection")
    assert keycloak.scope_map == ()
    # What Entra's tokens say becomes the policy's names; a delegated scope and an app role
    # alike (the example's point: without the map one population would be locked out).
    rules = JwtRules.for_issuer(config.resource, entra)
    user = derive({"scp": "mcp.access notes.read"}, rules)
    app = derive({"roles": ["mcp.access", "notes.read"]}, rules)
    assert {d.scope for d in user} == {d.scope for d in app} == {"mcp:access", "notes:read"}
