"""``credential.type: user_oauth`` and the ``user_oauth:`` section, checked at load (each problem at
its ``file:line:column``)."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.config import load_config
from gateway.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "config"
ENV = {
    "TEST_INTROSPECTION_SECRET": "introspection-secret",
    "TEST_BACKEND_TOKEN": "backend-token",
    "SEAL": base64.b64encode(bytes(range(32))).decode(),
    "UPSTREAM_SEAL": bytes(range(32, 64)).hex(),
}
CIMD = {"type": "user_oauth", "scope": "repo"}
"""No client id and no server: the server from the upstream's metadata, the gateway's client
metadata document as its client."""


def _doc(credential: Any, **top: Any) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((FIXTURES / "minimal.yaml").read_text())
    doc["backend"]["credential"] = credential
    doc["input_requests"] = {"seal_keys": [{"id": "k1", "key": {"env": "SEAL"}}]}
    doc["login"] = {"client_id": "login", "client_secret": {"env": "TEST_BACKEND_TOKEN"}}
    doc["user_oauth"] = {"seal_keys": [{"id": "u1", "key": {"env": "UPSTREAM_SEAL"}}]}
    for key, value in top.items():
        if value is None:
            doc.pop(key)
        else:
            doc[key] = value
    return doc


def _write(tmp_path: Path, doc: dict[str, Any]) -> Path:
    (tmp_path / "policy.yaml").write_text((FIXTURES / "policy.yaml").read_text())
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _problems(tmp_path: Path, credential: Any, **top: Any) -> list[str]:
    path = _write(tmp_path, _doc(credential, **top))
    with pytest.raises(ConfigError) as info:
        load_config(path, ENV)
    return [problem.replace(str(path), "gateway.yaml") for problem in info.value.problems]


def test_the_fixture_with_one_user_oauth_backend_loads_every_key(tmp_path: Path) -> None:
    config = load_config(FIXTURES / "user_oauth.yaml", ENV)
    cred = config.backends[0].credential
    assert (cred.type, cred.client_id, cred.client_auth, cred.private_key_id) == (
        "user_oauth",
        "gateway-linear",
        "private_key_jwt",
        "linear-1",
    )
    assert cred.private_key is not None
    assert (cred.scope, cred.prompt, cred.omit_resource) == ("read write", "select_account", False)
    assert cred.extra_authorize_params == (("audience_hint", "linear"),)
    assert cred.catalog_token is not None
    assert cred.refresh_margin_s == 300
    assert config.user_oauth is not None
    assert (config.user_oauth.consent_ttl_s, config.user_oauth.max_idle_days) == (600, 30)
    assert config.user_oauth.seal_key_id == "u1"


def test_without_a_client_id_or_a_server_the_credential_is_complete(tmp_path: Path) -> None:
    config = load_config(_write(tmp_path, _doc(CIMD)), ENV)
    cred = config.backends[0].credential
    assert (cred.client_id, cred.authorization_server, cred.resource) == (None, None, None)
    assert config.user_oauth is not None
    assert config.user_oauth.seal_keys[0].key == bytes(range(32, 64))


def test_a_pre_registered_client_names_its_server_and_has_a_secret(tmp_path: Path) -> None:
    problems = _problems(tmp_path, {**CIMD, "client_id": "gw"})
    assert problems == [
        "gateway.yaml:9:3: backend.credential: client_secret is required with client_auth: "
        "client_secret_basic",
        "gateway.yaml:9:3: backend.credential: a pre-registered client_id needs "
        "authorization_server: the server it is registered at (its credentials are used there "
        "only)",
    ]


def test_explicit_endpoints_come_in_pairs_and_name_their_server(tmp_path: Path) -> None:
    problems = _problems(
        tmp_path, {**CIMD, "authorization_endpoint": "https://as.example.com/authorize"}
    )
    assert problems == [
        "gateway.yaml:9:3: backend.credential: authorization_endpoint and token_endpoint go "
        "together",
        "gateway.yaml:9:3: backend.credential: explicit endpoints need authorization_server "
        "(their issuer)",
    ]


def test_the_urls_are_https(tmp_path: Path) -> None:
    problems = _problems(tmp_path, {**CIMD, "authorization_server": "http://as.example.com"})
    assert len(problems) == 1
    assert problems[0].startswith("gateway.yaml:12:5: backend.credential.authorization_server:")


def test_parameters_the_gateway_sets_itself_cannot_be_configured(tmp_path: Path) -> None:
    extra = {"access_type": "offline", "redirect_uri": "https://evil.example", "State": "x"}
    problems = _problems(tmp_path, {**CIMD, "extra_authorize_params": extra})
    assert problems == [
        f"gateway.yaml:{line}: backend.credential.extra_authorize_params.{name}: is set by the "
        "gateway itself and cannot be configured here"
        for line, name in (("14:7", "redirect_uri"), ("15:7", "State"))
    ]


def test_a_key_of_another_form_is_refused(tmp_path: Path) -> None:
    problems = _problems(tmp_path, {**CIMD, "audience": "tools"})
    assert len(problems) == 1 and "audience" in problems[0]


def test_a_user_oauth_backend_needs_the_section_and_the_login_surface(tmp_path: Path) -> None:
    problems = _problems(tmp_path, CIMD, user_oauth=None, login=None)
    assert problems == [
        "gateway.yaml:10:5: backend.credential.type: user_oauth needs the user_oauth: section "
        "(its token store keys)",
        "gateway.yaml:10:5: backend.credential.type: user_oauth needs login: (people confirm "
        "who they are at its pages)",
    ]


def test_the_key_ring_is_checked_like_every_seal_key_ring(tmp_path: Path) -> None:
    ring = {"seal_keys": [{"id": "u1", "key": {"env": "TEST_BACKEND_TOKEN"}}], "seal_key_id": "x"}
    problems = _problems(tmp_path, CIMD, user_oauth=ring)
    assert [p.split(": ", 2)[1] for p in problems] == [
        "user_oauth.seal_keys[0].key",
        "user_oauth.seal_key_id",
    ]


def test_the_section_without_a_user_oauth_backend_is_a_warning(tmp_path: Path) -> None:
    bearer = {"type": "bearer", "token": {"env": "TEST_BACKEND_TOKEN"}}
    config = load_config(_write(tmp_path, _doc(bearer)), ENV)
    assert any("user_oauth: no backend" in warning for warning in config.warnings)
