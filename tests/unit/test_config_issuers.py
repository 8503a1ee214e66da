"""``issuer:`` / ``issuers:`` and the token modes: what loads, what is refused and where."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gateway.config import DEFAULT_JWT_ALGORITHMS, load_config
from gateway.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "config"
ENV = {"TEST_INTROSPECTION_SECRET": "introspection-secret", "TEST_BACKEND_TOKEN": "backend-token"}

TAIL = """backend:
  url: https://tools.example.com/mcp
  credential: {type: bearer, token: {env: TEST_BACKEND_TOKEN}}
policy: policy.yaml
"""


def write(tmp_path: Path, body: str) -> Path:
    shutil.copy(FIXTURES / "policy.yaml", tmp_path / "policy.yaml")
    target = tmp_path / "gateway.yaml"
    target.write_text("resource: https://mcp.example.com/mcp\n" + body + TAIL, encoding="utf-8")
    return target


def problems(path: Path) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_config(path, ENV)
    return info.value.problems


def test_the_issuers_fixture_loads_in_order() -> None:
    c = load_config(FIXTURES / "issuers.yaml", ENV)
    entra, keycloak = c.issuers
    assert c.issuer is entra
    assert (entra.tokens, entra.client_id, entra.introspects, entra.validates_jwt) == (
        "jwt",
        None,
        False,
        True,
    )
    assert entra.accept_typ == ("application/jwt",)
    assert entra.audiences == ("00000000-1111-2222-3333-444444444444",)
    assert (keycloak.tokens, keycloak.client_id) == ("introspection", "mcp-gateway")
    assert keycloak.introspects and not keycloak.validates_jwt
    assert keycloak.algorithms == DEFAULT_JWT_ALGORITHMS == ("RS256", "PS256", "ES256", "EdDSA")
    assert keycloak.accept_typ == ("application/at+jwt",)
    assert c.warnings == ()
    cred = c.backends[0].credential
    assert (cred.type, cred.issuer, cred.actor) == (
        "token_exchange",
        "https://id.example.com",
        "service",
    )


def test_a_single_issuer_is_a_list_of_one() -> None:
    c = load_config(FIXTURES / "minimal.yaml", ENV)
    assert c.issuers == (c.issuer,)
    assert c.issuer.tokens == "introspection"


def test_issuer_and_issuers_together_are_an_error(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "issuer: {url: https://a.example.com, tokens: jwt}\n"
        "issuers:\n  - {url: https://b.example.com, tokens: jwt}\n",
    )
    assert any(
        ":3:1: issuers: issuer and issuers are mutually exclusive" in p for p in problems(path)
    )


def test_neither_issuer_nor_issuers_is_an_error(tmp_path: Path) -> None:
    (problem,) = problems(write(tmp_path, ""))
    assert problem.endswith("(top level): one of issuer or issuers is required")


def test_two_entries_with_one_url_are_an_error(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "issuers:\n"
        "  - {url: https://a.example.com, tokens: jwt}\n"
        "  - {url: https://a.example.com, tokens: jwt}\n",
    )
    (problem,) = problems(path)
    assert ":4:6:" in problem
    assert "issuers[1].url: https://a.example.com is already configured at issuers[0]" in problem


def test_client_id_is_required_only_where_the_issuer_introspects(tmp_path: Path) -> None:
    c = load_config(write(tmp_path, "issuer: {url: https://a.example.com, tokens: jwt}\n"), ENV)
    assert c.issuer.client_id is None and c.issuer.client_secret is None
    for mode in ("introspection", "jwt+introspection"):
        path = write(tmp_path, f"issuer: {{url: https://a.example.com, tokens: {mode}}}\n")
        found = problems(path)
        assert any('issuer: required key "client_id" is missing' in p for p in found), found
    path = write(tmp_path, "issuers:\n  - {url: https://a.example.com, client_id: gw}\n")
    assert any(
        "issuers[0]: client_secret is required with client_auth: client_secret_basic" in p
        for p in problems(path)
    )


@pytest.mark.parametrize("alg", ["none", "HS256", "HS512", "hs384", "NONE"])
def test_hmac_and_none_are_refused_at_load(tmp_path: Path, alg: str) -> None:
    path = write(
        tmp_path,
        f"issuer: {{url: https://a.example.com, tokens: jwt, algorithms: [RS256, {alg}]}}\n",
    )
    (problem,) = problems(path)
    assert problem.endswith(
        f"issuer.algorithms[1]: {alg} is refused: only asymmetric signatures are accepted"
    )


def test_an_unknown_algorithm_is_named(tmp_path: Path) -> None:
    path = write(
        tmp_path, "issuer: {url: https://a.example.com, tokens: jwt, algorithms: [RS257]}\n"
    )
    (problem,) = problems(path)
    assert "issuer.algorithms[0]: unknown algorithm RS257 (one of RS256, RS384" in problem


def test_jwks_refresh_bounds_must_be_ordered(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "issuer: {url: https://a.example.com, tokens: jwt, jwks_min_refresh_s: 600,"
        " jwks_max_refresh_s: 60}\n",
    )
    (problem,) = problems(path)
    assert "issuer.jwks_min_refresh_s: must not be larger than issuer.jwks_max_refresh_s (60)" in (
        problem
    )


def test_jwks_uri_must_be_https_unless_loopback_with_allow_insecure_http(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "issuer: {url: https://a.example.com, tokens: jwt, jwks_uri: http://a.example.com/k}\n",
    )
    (problem,) = problems(path)
    assert "issuer.jwks_uri: must use https" in problem
    path = write(
        tmp_path,
        "issuer: {url: 'http://127.0.0.1:9/', tokens: jwt, jwks_uri: 'http://127.0.0.1:9/k',"
        " allow_insecure_http: true}\n",
    )
    assert load_config(path, ENV).issuer.jwks_uri == "http://127.0.0.1:9/k"


def test_keys_a_mode_does_not_use_are_warnings(tmp_path: Path) -> None:
    c = load_config(
        write(
            tmp_path,
            "issuers:\n"
            "  - {url: https://a.example.com, tokens: jwt, client_id: gw}\n"
            "  - url: https://b.example.com\n"
            "    client_id: gw\n"
            "    client_secret: {env: TEST_INTROSPECTION_SECRET}\n"
            "    accept_typ: [JWT]\n",
        ),
        ENV,
    )
    first, second = c.warnings
    assert first.endswith("issuers[0].client_id: not used with tokens: jwt and is ignored")
    assert ":3:47:" in first
    assert second.endswith(
        "issuers[1].accept_typ: not used with tokens: introspection and is ignored"
    )


def test_any_issuer_allowing_insecure_http_allows_a_loopback_resource(tmp_path: Path) -> None:
    shutil.copy(FIXTURES / "policy.yaml", tmp_path / "policy.yaml")
    path = tmp_path / "gateway.yaml"
    path.write_text(
        "resource: http://127.0.0.1:8080/mcp\n"
        "issuers:\n"
        "  - {url: https://a.example.com, tokens: jwt}\n"
        "  - {url: 'http://127.0.0.1:9', tokens: jwt, allow_insecure_http: true}\n" + TAIL,
        encoding="utf-8",
    )
    assert load_config(path, ENV).resource == "http://127.0.0.1:8080/mcp"
    # ...but each issuer's own URLs follow only its own switch.
    path.write_text(
        "resource: http://127.0.0.1:8080/mcp\n"
        "issuers:\n"
        "  - {url: 'http://127.0.0.1:7', tokens: jwt}\n"
        "  - {url: 'http://127.0.0.1:9', tokens: jwt, allow_insecure_http: true}\n" + TAIL,
        encoding="utf-8",
    )
    (problem,) = problems(path)
    assert "issuers[0].url: must use https" in problem


def test_the_revocation_marker_outlives_the_longest_issuer_cache(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "issuers:\n"
        "  - {url: https://a.example.com, tokens: jwt, cache: {max_ttl_s: 60}}\n"
        "  - {url: https://b.example.com, tokens: jwt, cache: {max_ttl_s: 600,"
        " stale_if_error_s: 100}}\n"
        "admin: {revocation_ttl_s: 650}\n",
    )
    (problem,) = problems(path)
    assert "admin.revocation_ttl_s: must be at least" in problem and "(700)" in problem


def test_typ_values_are_normalised_and_null_accepts_a_missing_typ(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "issuer: {url: https://a.example.com, tokens: jwt,"
        " accept_typ: [AT+JWT, application/JWT, null]}\n",
    )
    assert load_config(path, ENV).issuer.accept_typ == (
        "application/at+jwt",
        "application/jwt",
        None,
    )


def test_scope_map_keys_and_values_must_be_scope_tokens_each_named_at_its_line(
    tmp_path: Path,
) -> None:
    path = write(
        tmp_path,
        "issuer:\n"
        "  url: https://a.example.com\n"
        "  tokens: jwt\n"
        "  scope_map:\n"
        '    "has space": mcp:access\n'
        '    ok: "bad\\"quote"\n'
        '    "": x\n',
    )
    message = (
        "is not a valid scope token (printable ASCII without spaces, quotes or backslashes; "
        "RFC 6749 §3.3, at most 256)"
    )
    assert sorted(problems(path)) == sorted(
        [
            f'{path}:6:5: issuer.scope_map.has space: "has space" {message}',
            f'{path}:7:5: issuer.scope_map.ok: "bad\\"quote" {message}',
            f'{path}:8:5: issuer.scope_map.: "" {message}',
        ]
    )


def test_scope_map_applies_in_every_mode_without_a_warning(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "issuers:\n"
        "  - url: https://a.example.com\n"
        "    client_id: gw\n"
        "    client_secret: {env: TEST_INTROSPECTION_SECRET}\n"
        '    scope_map: {"mcp": "mcp:access"}\n',
    )
    c = load_config(path, ENV)
    assert c.warnings == ()
    assert [(e.spelled, e.scope) for e in c.issuer.scope_map] == [("mcp", "mcp:access")]


def test_scope_map_only_needs_a_scope_map(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "issuer:\n  url: https://a.example.com\n  tokens: jwt\n  scope_map_only: true\n",
    )
    assert problems(path) == [
        f"{path}:5:3: issuer.scope_map_only: needs a scope_map: without one this issuer's "
        "tokens would grant no scope at all"
    ]
