"""``login:``: the browser login surface's configuration, checked at load."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.config import LoginConfig, load_config
from gateway.config.limits_model import Rate
from gateway.config.login import login_issuer
from gateway.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "config"
ENV = {
    "TEST_INTROSPECTION_SECRET": "introspection-secret",
    "TEST_BACKEND_TOKEN": "backend-token",
    "LOGIN_SECRET": "login-secret-value",
    "SEAL": base64.b64encode(bytes(range(32))).decode(),
}
SEALS = {"seal_keys": [{"id": "k1", "key": {"env": "SEAL"}}]}
RP = {"client_id": "gateway-login", "client_secret": {"env": "LOGIN_SECRET"}}


def _load(tmp_path: Path, login: Any, *, inputs: Any = SEALS, **top: Any) -> Any:
    doc = yaml.safe_load((FIXTURES / "minimal.yaml").read_text())
    doc["login"] = login
    if inputs is not None:
        doc["input_requests"] = inputs
    doc.update(top)
    (tmp_path / "policy.yaml").write_text((FIXTURES / "policy.yaml").read_text())
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return load_config(path, ENV)


def _problems(tmp_path: Path, login: Any, **kwargs: Any) -> list[str]:
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, login, **kwargs)
    return info.value.problems


def test_the_defaults_are_the_first_issuer_openid_and_the_gateway_prefix(tmp_path: Path) -> None:
    config = _load(tmp_path, RP)
    login: LoginConfig = config.login
    assert login.issuer == config.issuer.url
    assert login_issuer(login, config.issuers) is config.issuer
    assert (login.scopes, login.path_prefix) == (("openid",), "/gateway")
    assert (login.session_ttl_s, login.login_ttl_s) == (3600, 600)
    assert login.pre_auth_rate == Rate(300, 60.0)
    assert login.client_secret is not None
    assert login.client_secret.reveal() == "login-secret-value"
    assert "login-secret-value" not in repr(login)


def test_without_the_section_there_is_no_login_surface(tmp_path: Path) -> None:
    doc = yaml.safe_load((FIXTURES / "minimal.yaml").read_text())
    (tmp_path / "policy.yaml").write_text((FIXTURES / "policy.yaml").read_text())
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert load_config(path, ENV).login is None


def test_openid_is_always_requested(tmp_path: Path) -> None:
    assert _load(tmp_path, {**RP, "scopes": ["profile"]}).login.scopes == ("openid", "profile")


def test_the_session_cookie_needs_the_shared_seal_keys(tmp_path: Path) -> None:
    problems = _problems(tmp_path, RP, inputs=None)
    assert any("login" in p and "input_requests.seal_keys" in p for p in problems), problems


@pytest.mark.parametrize(
    ("login", "expected"),
    [
        ({"client_secret": {"env": "LOGIN_SECRET"}}, "client_id is required"),
        ({"client_id": "c"}, "client_secret is required with client_auth: client_secret_basic"),
        ({"client_id": "c", "client_auth": "private_key_jwt"}, "private_key is required"),
        ({**RP, "issuer": "https://elsewhere.example.com"}, "one of the trusted issuers"),
        ({**RP, "path_prefix": "/.well-known/x"}, "must not be under /.well-known"),
        ({**RP, "path_prefix": "/mcp"}, "must not be the MCP path"),
        ({**RP, "path_prefix": "/gateway/"}, "path_prefix"),
        ({**RP, "session_ttl_s": 59}, "session_ttl_s"),
        ({**RP, "login_ttl_s": 3601}, "login_ttl_s"),
        ({**RP, "pre_auth_rate": "300/fortnight"}, "pre_auth_rate"),
    ],
)
def test_a_misconfigured_relying_party_is_a_load_problem(
    tmp_path: Path, login: dict[str, Any], expected: str
) -> None:
    problems = _problems(tmp_path, login)
    assert any(expected in p for p in problems), problems


def test_a_prefix_above_the_mcp_path_is_a_problem(tmp_path: Path) -> None:
    problems = _problems(
        tmp_path, {**RP, "path_prefix": "/tools"}, resource="https://mcp.example.com/tools/mcp"
    )
    assert any("must not be the MCP path (/tools/mcp) or above it" in p for p in problems)


def test_an_external_verifier_needs_no_client_and_warns_about_client_keys(tmp_path: Path) -> None:
    verifier = {
        "url": "https://verify.example.com/start",
        "issuer": "https://verify.example.com",
        "jwks_uri": "https://verify.example.com/jwks",
    }
    assert _load(tmp_path, {"verifier": verifier}).login.verifier.url == verifier["url"]
    config = _load(tmp_path, {"verifier": verifier, "client_id": "unused"})
    assert any("login.client_id: not used with login.verifier" in w for w in config.warnings)


@pytest.mark.parametrize(
    ("verifier", "expected"),
    [
        ({"url": "http://verify.example.com/start"}, "login.verifier.url: must use https"),
        ({"url": "https://verify.example.com/start?x=1"}, "must not contain a query"),
        ({"jwks_uri": "http://verify.example.com/jwks"}, "login.verifier.jwks_uri: must use"),
        ({"algorithms": ["HS256"]}, "login.verifier.algorithms"),
    ],
)
def test_a_misconfigured_verifier_is_a_load_problem(
    tmp_path: Path, verifier: dict[str, Any], expected: str
) -> None:
    base = {
        "url": "https://verify.example.com/start",
        "issuer": "https://verify.example.com",
        "jwks_uri": "https://verify.example.com/jwks",
    }
    problems = _problems(tmp_path, {"verifier": {**base, **verifier}})
    assert any(expected in p for p in problems), problems


def test_the_full_fixture_sets_every_login_key() -> None:
    env = {
        "TEST_INTROSPECTION_SECRET": "s",
        "TEST_BACKEND_TOKEN": "t",
        "TEST_OTLP_KEY": "k",
        "TEST_REDIS_URL": "rediss://redis.example.com:6380/0",
        "TEST_ADMIN_TOKEN": "a" * 32,
    }
    login = load_config(FIXTURES / "full.yaml", env).login
    assert login is not None
    assert (login.issuer, login.client_id, login.client_auth) == (
        "https://id.example.com/realms/acme",
        "gateway-login",
        "private_key_jwt",
    )
    assert (login.private_key_id, login.signing_alg) == ("login-2026", "ES256")
    assert login.token_endpoint == "https://id.example.com/realms/acme/token"
    assert (login.scopes, login.path_prefix) == (("openid", "profile"), "/_gw/pages")
    assert (login.session_ttl_s, login.login_ttl_s) == (1800, 120)
    assert login.pre_auth_rate == Rate(600, 60.0)
