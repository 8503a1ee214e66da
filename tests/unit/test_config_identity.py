"""``identity.assertion`` and ``identity_jwks``: loading and the load-time key checks (each
problem at its ``file:line:column``, never a failing request)."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.serialization import (
    BestAvailableEncryption,
    Encoding,
    NoEncryption,
    PrivateFormat,
)

from gateway.config import load_config
from gateway.config.identity import RESERVED_HEADERS
from gateway.errors import ConfigError
from tests.support.assertion_verifier import public_pem, write_key
from tests.support.config_files import config_problems, issuer_head, write_config_text
from tests.unit.test_config import ENV as FULL_ENV

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "config"
ENV = {"TEST_INTROSPECTION_SECRET": "introspection-secret", "TEST_BACKEND_TOKEN": "token"}
HEAD = (
    issuer_head()
    + "backend:\n"
    + "  url: https://tools.example.com/mcp\n"
    + "  credential: {type: bearer, token: {env: TEST_BACKEND_TOKEN}}\n"
)
"""Nine lines: ``identity:`` of the backend starts on line 10."""


def _write(tmp_path: Path, body: str) -> Path:
    return write_config_text(tmp_path, HEAD + body)


def _problems(tmp_path: Path, body: str) -> list[str]:
    return config_problems(tmp_path, HEAD + body, ENV)


def _assertion(key: str = "key.pem", **extra: object) -> str:
    keys = "".join(f", {k}: {v}" for k, v in extra.items())
    return f"  identity:\n    assertion: {{key: {{file: {key}}}{keys}}}\n"


class TestLoading:
    def test_the_full_fixture_reaches_the_typed_config(self) -> None:
        c = load_config(FIXTURES / "full.yaml", FULL_ENV)
        assert c.backend is not None
        assertion = c.backend.identity.assertion
        assert assertion is not None
        assert (assertion.header, assertion.key_id, assertion.alg) == (
            "X-Acme-Caller",
            "acme-gw-2026",
            "EdDSA",
        )
        assert (assertion.ttl_s, assertion.audience, assertion.reuse) == (
            120,
            "https://tools.internal/mcp",
            False,
        )
        assert "PRIVATE KEY" in assertion.key.reveal()
        assert "PRIVATE" not in repr(assertion)
        assert c.identity_jwks.public is True
        assert c.identity_jwks.publish_keys == (FIXTURES / "assertion-next.pub.pem",)

    def test_defaults_audience_is_the_backend_url(self, tmp_path: Path) -> None:
        write_key(tmp_path / "key.pem")
        c = load_config(_write(tmp_path, _assertion()), ENV)
        assert c.backend is not None
        assertion = c.backend.identity.assertion
        assert assertion is not None
        assert assertion.header == "X-MCP-Gateway-Assertion"
        assert (assertion.alg, assertion.ttl_s, assertion.reuse) == ("EdDSA", 60, True)
        assert assertion.audience == "https://tools.example.com/mcp"
        assert assertion.key_id is None
        assert c.identity_jwks.public is False and c.identity_jwks.publish_keys == ()

    @pytest.mark.parametrize(("kind", "alg"), [("p256", "ES256"), ("rsa", "RS256")])
    def test_each_algorithm_takes_its_key_type(self, tmp_path: Path, kind: str, alg: str) -> None:
        write_key(tmp_path / "key.pem", kind)
        c = load_config(_write(tmp_path, _assertion(alg=alg)), ENV)
        assert c.backend is not None and c.backend.identity.assertion is not None

    def test_check_skip_secrets_does_not_read_the_key(self, tmp_path: Path) -> None:
        c = load_config(_write(tmp_path, _assertion("absent.pem")), ENV, resolve_secrets=False)
        assert c.backend is not None and c.backend.identity.assertion is not None


class TestKeyProblems:
    @pytest.mark.parametrize(
        ("kind", "alg", "message"),
        [
            ("p256", "EdDSA", "the key is a key for ES256, not for alg EdDSA"),
            ("ed25519", "ES256", "the key is a key for EdDSA, not for alg ES256"),
            ("ed25519", "RS256", "the key is a key for EdDSA, not for alg RS256"),
        ],
    )
    def test_the_key_type_must_match_alg(
        self, tmp_path: Path, kind: str, alg: str, message: str
    ) -> None:
        write_key(tmp_path / "key.pem", kind)
        (problem,) = _problems(tmp_path, _assertion(alg=alg))
        assert problem.startswith("gateway.yaml:11:")
        assert problem.endswith(f"backend.identity.assertion.key: {message}")

    def test_a_public_key_an_encrypted_key_and_garbage_are_refused(self, tmp_path: Path) -> None:
        signing = write_key(tmp_path / "signing.pem")
        (tmp_path / "key.pem").write_bytes(public_pem(signing))
        (problem,) = _problems(tmp_path, _assertion())
        assert "is a public key: the gateway signs with the private key" in problem
        key = ec.generate_private_key(ec.SECP256R1())
        (tmp_path / "key.pem").write_bytes(
            key.private_bytes(
                Encoding.PEM, PrivateFormat.PKCS8, BestAvailableEncryption(b"passphrase")
            )
        )
        (problem,) = _problems(tmp_path, _assertion(alg="ES256"))
        assert "is an encrypted private key" in problem
        (tmp_path / "key.pem").write_text("not a key\n")
        (problem,) = _problems(tmp_path, _assertion())
        assert "is not a PEM private key" in problem
        assert "not a key" not in problem.split(": ", 2)[2].replace("is not a PEM", "")

    def test_weak_keys_are_refused(self, tmp_path: Path) -> None:
        small = rsa.generate_private_key(public_exponent=65537, key_size=1024)
        pem = small.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
        (tmp_path / "key.pem").write_bytes(pem)
        (problem,) = _problems(tmp_path, _assertion(alg="RS256"))
        assert "an RSA key must have at least 2048 bits (RS256)" in problem
        p384 = ec.generate_private_key(ec.SECP384R1())
        (tmp_path / "key.pem").write_bytes(
            p384.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
        )
        (problem,) = _problems(tmp_path, _assertion(alg="ES256"))
        assert "an EC key must be on curve P-256 (ES256)" in problem

    def test_a_missing_key_file_is_a_problem(self, tmp_path: Path) -> None:
        (problem,) = _problems(tmp_path, _assertion("absent.pem"))
        assert "backend.identity.assertion.key: cannot read secret file" in problem


class TestSchemaBounds:
    def test_ttl_is_at_most_300_seconds(self, tmp_path: Path) -> None:
        write_key(tmp_path / "key.pem")
        assert load_config(_write(tmp_path, _assertion(ttl_s=300)), ENV).backend is not None
        (problem,) = _problems(tmp_path, _assertion(ttl_s=301))
        assert "backend.identity.assertion.ttl_s" in problem
        (problem,) = _problems(tmp_path, _assertion(ttl_s=0))
        assert "backend.identity.assertion.ttl_s" in problem

    def test_the_header_must_be_a_token(self, tmp_path: Path) -> None:
        write_key(tmp_path / "key.pem")
        (problem,) = _problems(tmp_path, _assertion(header='"X Caller"'))
        assert "must be an HTTP header name" in problem

    @pytest.mark.parametrize(
        "header",
        [
            "Authorization",
            "proxy-authorization",
            "Cookie",
            "Connection",
            "Transfer-Encoding",
            "Mcp-Session-Id",
            "MCP-Protocol-Version",
            "Mcp-Param-Region",
            "X-Request-Id",
            "traceparent",
            "X-MCP-Gateway-Subject",
            "Host",
            "Content-Length",
        ],
    )
    def test_reserved_headers_are_refused(self, tmp_path: Path, header: str) -> None:
        write_key(tmp_path / "key.pem")
        (problem,) = _problems(tmp_path, _assertion(header=header))
        assert problem.startswith("gateway.yaml:11:")
        assert "backend.identity.assertion.header:" in problem
        assert "a hop-by-hop or a credential header" in problem

    def test_every_reserved_header_is_lowercase(self) -> None:
        assert all(name == name.lower() for name in RESERVED_HEADERS)


class TestKeyIdsAndPublishedKeys:
    def test_one_key_id_for_two_different_keys_is_refused(self, tmp_path: Path) -> None:
        write_key(tmp_path / "a.pem")
        write_key(tmp_path / "b.pem")
        body = """\
        backends:
          one:
            url: https://one.example.com/mcp
            credential: {type: bearer, token: {env: TEST_BACKEND_TOKEN}}
            identity: {assertion: {key: {file: a.pem}, key_id: gw-1}}
          two:
            url: https://two.example.com/mcp
            credential: {type: bearer, token: {env: TEST_BACKEND_TOKEN}}
            identity: {assertion: {key: {file: b.pem}, key_id: gw-1}}
        """
        head = HEAD.split("backend:", maxsplit=1)[0]
        shutil.copy(FIXTURES / "policy.yaml", tmp_path / "policy.yaml")
        target = tmp_path / "gateway.yaml"
        target.write_text(head + textwrap.dedent(body))
        with pytest.raises(ConfigError) as info:
            load_config(target, ENV)
        (problem,) = info.value.problems
        assert "backends.two.identity.assertion.key_id: key_id 'gw-1' also names" in problem
        # The same key under one key_id is fine (one key, several backends).
        target.write_text(head + textwrap.dedent(body).replace("b.pem", "a.pem"))
        assert len(load_config(target, ENV).backends) == 2

    def test_publish_keys_files_may_be_empty_and_must_hold_keys(self, tmp_path: Path) -> None:
        signing = write_key(tmp_path / "key.pem")
        (tmp_path / "empty.pem").write_text("")
        (tmp_path / "next.pem").write_bytes(public_pem(write_key(tmp_path / "n.pem", "p256")))
        (tmp_path / "bundle.pem").write_bytes(public_pem(signing) + public_pem(tmp_path / "n.pem"))
        body = _assertion() + (
            "identity_jwks:\n  publish_keys: [{file: empty.pem}, {file: next.pem}, "
            "{file: bundle.pem}, {file: n.pem}]\n"
        )
        c = load_config(_write(tmp_path, body), ENV)
        assert len(c.identity_jwks.publish_keys) == 4
        (tmp_path / "next.pem").write_text("garbage\n")
        body = _assertion() + (
            "identity_jwks:\n  publish_keys: [{file: next.pem}, {file: absent.pem}]\n"
        )
        problems = _problems(tmp_path, body)
        assert any(
            "identity_jwks.publish_keys[0].file: the file holds no PEM key" in p for p in problems
        ), problems
        assert any(
            "identity_jwks.publish_keys[1].file: cannot read key file" in p for p in problems
        ), problems


EXCHANGE_HEAD = """\
resource: https://mcp.example.com/mcp
issuers:
  - url: https://id.example.com
    client_id: mcp-gateway
    client_secret: {env: TEST_INTROSPECTION_SECRET}
    audiences: [urn:gateway]
  - {url: https://login.example.org, tokens: jwt}
policy: policy.yaml
backend:
  url: https://tools.example.com/mcp
"""


def _exchange(tmp_path: Path, credential: str) -> Path:
    shutil.copy(FIXTURES / "policy.yaml", tmp_path / "policy.yaml")
    target = tmp_path / "gateway.yaml"
    target.write_text(EXCHANGE_HEAD + f"  credential: {credential}\n", encoding="utf-8")
    return target


class TestTokenExchange:
    BASE = "{type: token_exchange, client_id: gw, client_secret: {env: TEST_BACKEND_TOKEN}"

    def test_every_key_reaches_the_typed_config(self, tmp_path: Path) -> None:
        c = load_config(
            _exchange(
                tmp_path,
                self.BASE + ", audience: tools-api, resource: https://tools.internal/mcp, "
                "scope: tools:invoke, actor: service, issuer: https://id.example.com, "
                "token_endpoint: https://id.example.com/token, refresh_margin_s: 10, "
                "requested_token_type: 'urn:ietf:params:oauth:token-type:jwt'}",
            ),
            ENV,
        )
        cred = c.backends[0].credential
        assert cred.type == "token_exchange" and cred.client_id == "gw"
        assert (cred.audience, cred.resource, cred.scope) == (
            "tools-api",
            "https://tools.internal/mcp",
            "tools:invoke",
        )
        assert (cred.actor, cred.issuer, cred.refresh_margin_s) == (
            "service",
            "https://id.example.com",
            10,
        )
        assert cred.requested_token_type == "urn:ietf:params:oauth:token-type:jwt"

    def test_defaults(self, tmp_path: Path) -> None:
        c = load_config(_exchange(tmp_path, self.BASE + ", audience: tools-api}"), ENV)
        cred = c.backends[0].credential
        assert cred.requested_token_type == "urn:ietf:params:oauth:token-type:access_token"
        assert (cred.actor, cred.issuer, cred.token_endpoint) == ("none", None, None)

    @pytest.mark.parametrize(
        ("extra", "where", "message"),
        [
            ("", "backend.credential", "token_exchange needs audience or resource"),
            (
                ", audience: https://mcp.example.com/mcp",
                "backend.credential.audience",
                "names this gateway itself",
            ),
            (", resource: urn:gateway", "backend.credential.resource", "names this gateway"),
            (
                ", audience: a, issuer: https://nowhere.example",
                "backend.credential.issuer",
                "is not the url of a configured issuer",
            ),
            (
                ", audience: a, token_endpoint: https://id.example.com/token",
                "backend.credential.token_endpoint",
                "needs credential.issuer",
            ),
            (
                ", audience: a, client_auth: private_key_jwt",
                "backend.credential",
                "private_key is required",
            ),
        ],
    )
    def test_load_time_problems(self, tmp_path: Path, extra: str, where: str, message: str) -> None:
        base = self.BASE
        if "private_key_jwt" in extra:
            base = "{type: token_exchange, client_id: gw"
        with pytest.raises(ConfigError) as info:
            load_config(_exchange(tmp_path, base + extra + "}"), ENV)
        assert any(f"{where}: " in p and message in p for p in info.value.problems), (
            info.value.problems
        )

    def test_the_requested_token_type_must_be_a_token_type_uri(self, tmp_path: Path) -> None:
        with pytest.raises(ConfigError) as info:
            load_config(
                _exchange(tmp_path, self.BASE + ", audience: a, requested_token_type: jwt}"), ENV
            )
        assert any("must be an RFC 8693 token type URI" in p for p in info.value.problems)


def test_a_jwk_set_with_nothing_to_publish_is_a_warning(tmp_path: Path) -> None:
    c = load_config(_write(tmp_path, "identity_jwks: {public: true}\n"), ENV)
    (warning,) = c.warnings
    assert "identity_jwks: no backend has identity.assertion" in warning
    write_key(tmp_path / "key.pem")
    c = load_config(_write(tmp_path, _assertion() + "identity_jwks: {public: true}\n"), ENV)
    assert c.warnings == ()
