"""gateway.yaml loading: every key reaches the typed Config, problems carry positions, secrets."""

from __future__ import annotations

import base64
import ipaddress
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from gateway.config import (
    AdminConfig,
    DpopConfig,
    InputRequestsConfig,
    Rate,
    RolesConfig,
    ScopeMapEntry,
    Secret,
    StateConfig,
    StoreErrorPolicies,
    TasksConfig,
    load_config,
)
from gateway.errors import ConfigError
from gateway.yaml_source import load_yaml

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "config"
SCHEMA = ROOT / "gateway" / "schema" / "gateway.schema.json"
ENV = {
    "TEST_INTROSPECTION_SECRET": "introspection-secret",
    "TEST_BACKEND_TOKEN": "backend-token",
    "TEST_REDIS_URL": "rediss://:redis-password@redis.internal:6380/0",
    "TEST_ADMIN_TOKEN": "admin-token-0123456789abcdef0123456789",
    "TEST_OTLP_KEY": "otlp-key",
}


def schema_keys(schema: dict[str, Any]) -> set[str]:
    """Every key path in the schema (``issuer.cache.max_ttl_s``); free-form maps end in ``*``."""
    defs = schema.get("$defs", {})
    found: set[str] = set()

    def walk(node: dict[str, Any], prefix: str) -> None:
        if "$ref" in node:  # a reference, plus any sibling keywords (backend: name_prefix)
            walk(defs[node["$ref"].rsplit("/", 1)[1]], prefix)
        for alternative in node.get("oneOf", []):
            walk(alternative, prefix)
        for key, child in node.get("properties", {}).items():
            path = f"{prefix}.{key}" if prefix else key
            found.add(path)
            walk(child, path)
        if isinstance(node.get("items"), dict):
            walk(node["items"], f"{prefix}[]")  # a list of mappings: issuers[].url
        extra = node.get("additionalProperties")
        if isinstance(extra, dict):
            found.add(f"{prefix}.*")
            walk(extra, f"{prefix}.*")  # backends.*.url ...

    walk(schema, "")
    return found


def yaml_keys(path: Path) -> set[str]:
    doc = load_yaml(path)
    found: set[str] = set()

    free_form = {
        "backend.tool_timeouts_s",
        "backends",
        "backends.*.tool_timeouts_s",
        "issuer.scope_map",
        "tracing.otlp.headers",
        "policy_external.subject_properties",
        "guardrails",
        "backends.*.credential.extra_authorize_params",
        "backend.credential.extra_authorize_params",
    }

    def walk(value: Any, prefix: str, free: bool) -> None:
        if isinstance(value, dict):
            for key, child in value.items():
                name = "*" if free else key
                path = f"{prefix}.{name}" if prefix else name
                found.add(path)
                walk(child, path, path in free_form)
        elif isinstance(value, list) and prefix in {
            "issuers",
            "input_requests.seal_keys",
            "user_oauth.seal_keys",
        }:
            for item in value:
                walk(item, f"{prefix}[]", False)

    walk(doc.value, "", False)
    return found


def _copy_fixture(tmp_path: Path, name: str) -> Path:
    shutil.copy(FIXTURES / "policy.yaml", tmp_path / "policy.yaml")
    target = tmp_path / "gateway.yaml"
    shutil.copy(FIXTURES / name, target)
    return target


class TestEveryKeyRoundTrips:
    def test_the_fixtures_together_set_every_key_of_the_schema(self) -> None:
        schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
        secret_forms = {".env", ".file"}
        wanted = {k for k in schema_keys(schema) if not any(k.endswith(s) for s in secret_forms)}
        present = (
            yaml_keys(FIXTURES / "full.yaml")
            | yaml_keys(FIXTURES / "minimal.yaml")
            | yaml_keys(FIXTURES / "multi.yaml")
        )
        # issuers[] entries take exactly the keys of issuer: (one $defs/issuer), which full.yaml
        # sets; issuers.yaml shows the list itself.
        present |= {
            k.replace("issuer.", "issuers[].", 1) for k in present if k.startswith("issuer.")
        }
        present |= yaml_keys(FIXTURES / "issuers.yaml") | yaml_keys(FIXTURES / "user_oauth.yaml")
        # A guardrail's and the approval webhook's credential is a backend's (one
        # $defs/credential), which they set.
        present |= {
            place + k.split(".credential.", 1)[1]
            for k in present
            if k.startswith(("backend.credential.", "backends.*.credential."))
            for place in ("guardrails.*.credential.", "approvals.webhook.credential.")
        }
        assert wanted - present == set()

    def test_every_key_of_the_full_fixture_arrives_in_the_typed_config(self) -> None:
        c = load_config(FIXTURES / "full.yaml", ENV)
        # RFC 8707: scheme and host lowercased, default port dropped.
        assert c.resource == "https://mcp.example.com/tools/mcp"
        assert c.mcp_path == "/tools/mcp"
        assert c.prm_url == "https://mcp.example.com/.well-known/oauth-protected-resource/tools/mcp"
        assert (c.server.name, c.server.title, c.server.resource_name) == (
            "acme-gateway",
            "ACME tools",
            "ACME MCP",
        )
        assert c.server.instructions == "Use search_docs before create_ticket."
        assert c.server.resource_documentation == "https://docs.example.com/mcp"
        assert (c.listen.host, c.listen.port) == ("127.0.0.1", 18080)
        assert (c.ops_listen.host, c.ops_listen.port) == ("127.0.0.2", 19090)

        i = c.issuer
        assert i.url == "https://id.example.com/realms/acme"
        assert i.introspection_endpoint == "https://id.example.com/realms/acme/introspect"
        assert i.token_endpoint == "https://id.example.com/realms/acme/token"
        assert (i.client_id, i.client_auth) == ("gateway-client", "private_key_jwt")
        assert i.client_secret is not None and i.client_secret.reveal() == "introspection-secret"
        assert i.private_key is not None and i.private_key.reveal() == "issuer-key-pem"
        assert (i.private_key_id, i.signing_alg) == ("key-2026", "ES256")
        assert i.assertion_audience == "token_endpoint"
        assert (i.timeout_s, i.metadata_refresh_s) == (2.5, 600.0)
        assert (i.allow_insecure_http, i.require_iss, i.clock_skew_s) == (False, True, 5)
        assert i.subject_fallback == "client_id"
        assert i.audiences == ("https://api.example.com/mcp",)
        assert (i.cache.max_ttl_s, i.cache.negative_ttl_s, i.cache.max_entries) == (30, 5, 5000)
        assert (i.cache.negative_max_entries, i.cache.stale_if_error_s) == (500, 20)
        assert i.failed_auth_rate == Rate(10, 60.0)
        assert i.failed_auth_probe_interval_s == 2.0
        assert (i.tokens, i.jwks_uri) == (
            "jwt+introspection",
            "https://id.example.com/realms/acme/certs",
        )
        assert i.algorithms == ("RS256", "ES384")
        assert i.accept_typ == ("application/at+jwt", "application/jwt", None)
        assert (i.scope_claims, i.subject_claim, i.client_id_claims) == (("scp",), "oid", ("azp",))
        assert i.scope_prefix == "api://acme/"
        assert i.roles == RolesConfig(claim=("realm_access", "roles"), prefix="role:")
        assert i.groups == RolesConfig(claim=("groups",), prefix="group:")
        assert i.scope_map == (
            ScopeMapEntry("api://acme/mcp.access", "mcp:access"),
            ScopeMapEntry("role:mcp-user", "mcp:access"),
        )
        assert i.scope_map[1].where.endswith("full.yaml:43:5")
        assert i.scope_map_only is True
        assert (i.max_token_bytes, i.max_token_lifetime_s) == (4096, 7200)
        assert (i.jwks_min_refresh_s, i.jwks_max_refresh_s) == (30.0, 900.0)
        assert i.jwks_unknown_kid_interval_s == 10.0
        assert i.dpop == DpopConfig(
            mode="required",
            algorithms=("ES256", "EdDSA"),
            iat_window_s=120,
            nonce=True,
            nonce_rotation_s=60,
        )
        assert c.issuers == (i,)

        b = c.backend
        assert (b.url, b.allow_insecure_http) == ("http://10.1.2.3:9000/mcp", True)
        cred = b.credential
        assert (cred.type, cred.client_id, cred.client_auth) == (
            "client_credentials",
            "gateway-backend",
            "client_secret_post",
        )
        assert cred.client_secret is not None
        assert cred.client_secret.reveal() == "backend-client-secret"
        assert cred.private_key is not None and cred.private_key.reveal() == "backend-key-pem"
        assert (cred.private_key_id, cred.scope, cred.audience) == (
            "backend-key",
            "tools:invoke",
            "tools-api",
        )
        assert cred.token_endpoint == "https://id.example.com/realms/acme/token"
        assert (cred.resource, cred.refresh_margin_s) == ("https://tools.internal/mcp", 60)
        assert b.tls.ca_file == str(FIXTURES / "tls" / "ca.pem")
        assert b.tls.client_cert == str(FIXTURES / "tls" / "client.pem")
        assert b.tls.client_key == str(FIXTURES / "tls" / "client.key")
        assert (b.timeout_s, b.connect_timeout_s, b.catalog_refresh_s) == (20.0, 1.5, 120.0)
        assert (b.name_prefix, b.identity_headers, b.max_connections) == ("acme.", True, 50)
        assert b.tool_timeout("slow_report") == 60.0
        assert b.tool_timeout("anything_else") == 20.0

        assert c.policy_paths == (FIXTURES / "policy.yaml",)
        assert c.policy_poll_s == 0.0
        assert c.event_loop == "asyncio"
        lim = c.limits
        assert (lim.max_body_bytes, lim.max_response_bytes, lim.max_in_flight) == (
            131072,
            2097152,
            64,
        )
        assert (lim.request_deadline_s, lim.drain_timeout_s) == (30, 4)
        assert lim.shutdown_delay_s == 2.5
        assert lim.pre_auth_rate == Rate(100, 1.0)
        assert lim.principal_rate is None  # null disables the limit
        assert (lim.principal_in_flight, lim.ip_in_flight) == (8, 32)
        assert (lim.header_timeout_s, lim.keepalive_timeout_s) == (5.0, 30.0)
        assert (lim.max_header_bytes, lim.max_connections, lim.ip_connections) == (65536, 500, 20)
        assert lim.max_description_chars == 1024
        assert (lim.json.max_depth, lim.json.max_members, lim.json.max_array_length) == (
            16,
            128,
            512,
        )
        assert (lim.json.max_string_bytes, lim.json.max_number_chars) == (16384, 20)
        assert (c.protocol.discover_ttl_ms, c.protocol.tools_list_ttl_ms) == (0, 1000)
        assert c.protocol.page_size == 50
        assert c.trusted_proxies == (
            ipaddress.ip_network("10.0.0.0/8"),
            ipaddress.ip_network("::1/128"),
        )
        assert c.allowed_origins == frozenset({"https://app.example.com"})
        assert (c.cors.enabled, c.cors.max_age_s) == (True, 1200)
        assert c.trusted_origins == {"https://app.example.com", "https://mcp.example.com"}
        assert c.catalog is not None
        assert (c.catalog.lock, c.catalog.on_change, c.catalog.poll_s) == (
            FIXTURES / "catalog.lock.yaml",
            "warn",
            5.0,
        )
        t = c.tracing
        assert t is not None
        assert (t.otlp.endpoint, t.otlp.protocol, t.otlp.timeout_s) == (
            "http://127.0.0.1:4318",
            "grpc",
            4.0,
        )
        assert [(name, s.reveal()) for name, s in t.otlp.headers] == [
            ("x-honeycomb-team", "otlp-key")
        ]
        assert (t.sample_ratio, t.service_name, t.max_queue_spans) == (0.25, "acme-gateway", 512)
        pe = c.policy_external
        assert pe is not None and pe.credential is not None
        assert (pe.url, pe.timeout_s, pe.on_error, pe.retry_after_s, pe.subject_type) == (
            "https://pdp.internal.example.com/access/v1/evaluation",
            0.25,
            "deny",
            3,
            "identity",
        )
        assert pe.subject_properties == (("cerbos.roles", "roles"), ("tenant", "tid"))
        assert (pe.send_arguments, pe.cache_ttl_s, pe.cache_max_entries) == (True, 10.0, 500)
        assert pe.max_connections == 8
        assert pe.methods == {"tools/call", "resources/read"}
        assert pe.tools == ("admin_*", "create_ticket")
        assert pe.credential.type == "bearer" and pe.credential.token is not None
        assert pe.credential.token.reveal() == "backend-token"
        pii, sidecar = c.guardrails
        assert (pii.name, pii.url, pii.timeout_s, pii.max_body_bytes, pii.on_error) == (
            "pii",
            "https://guard.internal.example.com/check",
            0.5,
            65536,
            "deny",
        )
        assert pii.checks == {"tool_arguments", "tool_result"}
        assert (pii.claims, pii.max_connections) == (("tid", "realm_access.roles"), 4)
        assert pii.credential is not None and pii.credential.token is not None
        assert pii.credential.token.reveal() == "backend-token"
        assert (sidecar.name, sidecar.allow_insecure_http, sidecar.on_error) == (
            "sidecar",
            True,
            "deny",
        )
        assert sidecar.credential is None and len(sidecar.checks) == 5
        assert (c.logging.format, c.logging.level) == ("console", "debug")
        assert (c.logging.subject, c.logging.log_arguments) == ("fingerprint", True)
        assert (c.audit.sink, c.audit.max_bytes, c.audit.backups) == ("file", 8192, 2)
        assert c.audit.path == str(FIXTURES / "audit" / "audit.jsonl")
        assert c.audit.checkpoint is not None and c.audit.checkpoint.every == 500
        assert "PRIVATE KEY" in c.audit.checkpoint.key.reveal()
        st = c.state
        assert (st.backend, st.share_token_cache) == ("redis", True)
        assert st.redis is not None
        assert st.redis.url.reveal() == "rediss://:redis-password@redis.internal:6380/0"
        assert "redis-password" not in repr(st)
        assert (st.redis.key_prefix, st.redis.timeout_ms) == ("acme-gw:", 50)
        assert st.redis.tls.ca_file == str(FIXTURES / "tls" / "ca.pem")
        assert st.redis.tls.client_key == str(FIXTURES / "tls" / "client.key")
        assert st.on_store_error == StoreErrorPolicies(
            ip="deny",
            principal="local",
            tool="deny",
            tool_concurrency="deny",
            failed_auth="deny",
            revocation="deny",
            dpop_replay="local",
        )
        assert c.admin.token is not None
        assert c.admin.token.reveal() == "admin-token-0123456789abcdef0123456789"
        assert c.admin.revocation_ttl_s == 7200
        ir = c.input_requests
        assert ir.enabled is True
        assert [key.id for key in ir.seal_keys] == ["k2026b", "k2026a"]
        new_key = (FIXTURES / "secrets" / "seal-key-new").read_text().strip()
        assert ir.seal_keys[0].key == base64.b64decode(new_key)
        old_key = (FIXTURES / "secrets" / "seal-key-old").read_text().strip()
        assert ir.seal_keys[1].key == bytes.fromhex(old_key)
        assert "key=" not in repr(ir.seal_keys[0])  # the key bytes never show in a repr
        assert (ir.seal_key_id, ir.ttl_s, ir.max_rounds) == ("k2026b", 300, 4)
        assert (ir.max_state_bytes, ir.max_input_response_bytes) == (2048, 4096)
        assert c.tasks == TasksConfig(enabled=True, max_ttl_s=7200, min_poll_interval_ms=2000)
        assert c.warnings == ()

    def test_the_minimal_fixture_gets_the_documented_defaults(self) -> None:
        c = load_config(FIXTURES / "minimal.yaml", ENV)
        assert (c.listen.host, c.listen.port) == ("0.0.0.0", 8080)
        assert (c.ops_listen.host, c.ops_listen.port) == ("127.0.0.1", 9090)
        assert c.backend.credential.type == "bearer"
        assert c.backend.credential.token is not None
        assert c.backend.credential.token.reveal() == "backend-token"
        assert c.limits.shutdown_delay_s == 0.0
        assert c.limits.drain_timeout_s == 10.0
        assert c.limits.max_body_bytes == 65_536
        # Per-caller shares default to a quarter of the replica-wide caps.
        assert (c.limits.principal_in_flight, c.limits.ip_in_flight) == (64, 64)
        assert (c.limits.max_connections, c.limits.ip_connections) == (1024, 256)
        assert (c.limits.header_timeout_s, c.limits.keepalive_timeout_s) == (10.0, 75.0)
        assert c.limits.max_description_chars == 2048
        assert c.limits.max_header_bytes == 32_768
        assert c.issuer.failed_auth_probe_interval_s == 5.0
        assert c.issuer.client_auth == "client_secret_basic"
        assert c.issuer.cache.max_ttl_s == 60
        assert c.trusted_proxies == ()
        assert (c.logging.format, c.logging.level) == ("json", "info")
        assert c.state == StateConfig()  # memory: one replica's own state, nothing to set up
        assert c.admin == AdminConfig()  # no admin endpoint
        assert c.admin.revocation_ttl_s == 3600
        assert c.input_requests == InputRequestsConfig()  # relaying off unless configured
        assert c.input_requests.enabled is False
        assert c.tasks == TasksConfig()  # tasks off unless configured
        assert c.tasks.enabled is False

    def test_the_config_is_immutable(self) -> None:
        c = load_config(FIXTURES / "minimal.yaml", ENV)
        with pytest.raises(AttributeError):
            c.resource = "https://evil.example.com/mcp"  # type: ignore[misc]


class TestProblemsAreReportedTogether:
    def test_an_unknown_key_a_wrong_type_and_a_missing_key_are_all_reported_with_positions(
        self,
    ) -> None:
        with pytest.raises(ConfigError) as info:
            load_config(FIXTURES / "bad.yaml", ENV)
        bad = str(FIXTURES / "bad.yaml")
        assert sorted(info.value.problems) == sorted(
            [
                f"{bad}:3:25: listen.prot: unknown key",
                f'{bad}:4:1: issuer: required key "client_id" is missing',
                f'{bad}:10:3: backend.timeout_s: "ten seconds" is not a number',
            ]
        )

    def test_a_missing_environment_variable_is_a_problem_at_the_secret_reference(
        self,
    ) -> None:
        with pytest.raises(ConfigError) as info:
            load_config(FIXTURES / "minimal.yaml", {"TEST_BACKEND_TOKEN": "x"})
        (problem,) = info.value.problems
        assert problem.endswith(
            "issuer.client_secret: environment variable TEST_INTROSPECTION_SECRET is not set"
        )
        assert ":6:" in problem

    def test_a_missing_policy_file_is_reported(self, tmp_path: Path) -> None:
        target = tmp_path / "gateway.yaml"
        shutil.copy(FIXTURES / "minimal.yaml", target)
        with pytest.raises(ConfigError) as info:
            load_config(target, ENV)
        assert any("policy: policy path not found" in p for p in info.value.problems)


class TestStateSection:
    def _load(self, tmp_path: Path, state: str, env: dict[str, str] | None = None) -> Any:
        target = _copy_fixture(tmp_path, "minimal.yaml")
        target.write_text(target.read_text(encoding="utf-8") + state, encoding="utf-8")
        return load_config(target, {**ENV, **(env or {})})

    def _problems(self, tmp_path: Path, state: str, env: dict[str, str] | None = None) -> str:
        """Every problem loading ``state`` reports, one a line."""
        with pytest.raises(ConfigError) as info:
            self._load(tmp_path, state, env)
        return "\n".join(info.value.problems)

    def test_redis_backend_with_a_url_loads(self, tmp_path: Path) -> None:
        c = self._load(
            tmp_path,
            "state: {backend: redis, redis: {url: {env: R}}}\n",
            {"R": "redis://127.0.0.1:6379/2"},
        )
        assert c.state.redis.url.reveal() == "redis://127.0.0.1:6379/2"
        assert (c.state.redis.key_prefix, c.state.redis.timeout_ms) == ("mcp-gateway:", 250)
        assert c.state.on_store_error.principal == "local"

    def test_redis_backend_without_a_url_is_a_problem(self, tmp_path: Path) -> None:
        problems = self._problems(tmp_path, "state: {backend: redis}\n")
        assert "state: backend: redis needs a redis:" in problems

    def test_a_shared_token_cache_needs_redis(self, tmp_path: Path) -> None:
        problems = self._problems(tmp_path, "state: {share_token_cache: true}\n")
        assert "state.share_token_cache: needs backend: redis" in problems

    def test_a_short_admin_token_is_a_problem_that_does_not_show_it(self, tmp_path: Path) -> None:
        problems = self._problems(tmp_path, "admin: {token: {env: A}}\n", {"A": "hunter2hunter2"})
        assert "admin.token: must be at least 32 characters" in problems
        assert "hunter2" not in problems

    def test_a_revocation_shorter_than_the_cache_hold_is_a_problem(self, tmp_path: Path) -> None:
        problems = self._problems(tmp_path, "admin: {revocation_ttl_s: 59}\n")
        wanted = (
            "admin.revocation_ttl_s: must be at least issuer.cache.max_ttl_s + stale_if_error_s"
        )
        assert wanted + " (60)" in problems

    def test_a_url_of_another_scheme_is_a_problem_that_does_not_show_the_url(
        self, tmp_path: Path
    ) -> None:
        problems = self._problems(
            tmp_path,
            "state: {backend: redis, redis: {url: {env: R}}}\n",
            {"R": "http://:hunter2@cache.internal:6379"},
        )
        assert "state.redis.url: must be a redis://" in problems
        assert "hunter2" not in problems

    def test_tls_settings_need_a_rediss_url(self, tmp_path: Path) -> None:
        shutil.copytree(FIXTURES / "tls", tmp_path / "tls")
        problems = self._problems(
            tmp_path,
            "state: {backend: redis, redis: {url: {env: R}, tls: {ca_file: tls/ca.pem}}}\n",
            {"R": "redis://cache.internal:6379"},
        )
        assert "state.redis.tls: needs a rediss:// url" in problems

    def test_a_redis_section_with_the_memory_backend_is_a_warning(self, tmp_path: Path) -> None:
        c = self._load(
            tmp_path,
            "state: {backend: memory, redis: {url: {env: R}}}\n",
            {"R": "redis://cache.internal:6379"},
        )
        assert c.state.redis is None
        assert c.warnings == ("state.redis is ignored: state.backend is memory",)

    def test_an_unknown_store_error_policy_is_a_schema_problem(self, tmp_path: Path) -> None:
        problems = self._problems(tmp_path, "state: {on_store_error: {ip: allow}}\n")
        assert "state.on_store_error.ip" in problems


class TestSecrets:
    def test_an_env_reference_is_resolved_and_never_shown_by_repr(self) -> None:
        c = load_config(FIXTURES / "minimal.yaml", ENV)
        secret = c.issuer.client_secret
        assert secret is not None
        assert secret.reveal() == "introspection-secret"
        assert secret.source == "env:TEST_INTROSPECTION_SECRET"
        assert "introspection-secret" not in repr(c)
        assert "introspection-secret" not in str(secret)

    def test_a_file_reference_is_resolved_relative_to_the_config_file(self, tmp_path: Path) -> None:
        target = _copy_fixture(tmp_path, "minimal.yaml")
        (tmp_path / "token").write_text("file-token\n", encoding="utf-8")
        text = target.read_text(encoding="utf-8")
        target.write_text(text.replace("{env: TEST_BACKEND_TOKEN}", "{file: token}"), "utf-8")
        c = load_config(target, ENV)
        token = c.backend.credential.token
        assert token is not None
        assert token.reveal() == "file-token"  # trailing newline stripped
        assert token.source == f"file:{tmp_path / 'token'}"

    def test_an_empty_or_unreadable_secret_file_is_a_problem(self, tmp_path: Path) -> None:
        target = _copy_fixture(tmp_path, "minimal.yaml")
        (tmp_path / "empty").write_text("\n", encoding="utf-8")
        text = target.read_text(encoding="utf-8")
        text = text.replace("{env: TEST_BACKEND_TOKEN}", "{file: empty}")
        text = text.replace("{env: TEST_INTROSPECTION_SECRET}", "{file: nowhere}")
        target.write_text(text, encoding="utf-8")
        with pytest.raises(ConfigError) as info:
            load_config(target, ENV)
        messages = "\n".join(info.value.problems)
        assert "backend.credential.token: secret file" in messages
        assert "is empty" in messages
        assert "issuer.client_secret: cannot read secret file" in messages

    def test_a_literal_secret_loads_with_a_warning_that_does_not_contain_it(
        self, tmp_path: Path
    ) -> None:
        target = _copy_fixture(tmp_path, "minimal.yaml")
        text = target.read_text(encoding="utf-8")
        target.write_text(
            text.replace("{env: TEST_INTROSPECTION_SECRET}", "hunter2-literal"), "utf-8"
        )
        c = load_config(target, ENV)
        assert c.issuer.client_secret is not None
        assert c.issuer.client_secret.source == "literal"
        (warning,) = c.warnings
        assert f"{target}:6:" in warning
        assert "issuer.client_secret: literal secret" in warning
        assert "hunter2-literal" not in warning

    def test_a_rotated_secret_file_is_picked_up_by_current(self, tmp_path: Path) -> None:
        path = tmp_path / "token"
        path.write_text("first\n", encoding="utf-8")
        os.utime(path, (1_000_000_000, 1_000_000_000))
        secret = Secret("first", f"file:{path}", path.stat().st_mtime)
        assert secret.current() == "first"
        path.write_text("second\n", encoding="utf-8")
        os.utime(path, (1_000_000_100, 1_000_000_100))
        # The file is stat()ed at most once per RECHECK_S on the hot path ...
        assert secret.current() == "first"
        # ... or at once when forced (the upstream refused the old value).
        assert secret.current(force=True) == "second"
        assert secret.reveal() == "second"

    def test_a_rotated_secret_file_is_picked_up_once_the_recheck_interval_passed(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        path = tmp_path / "token"
        path.write_text("first\n", encoding="utf-8")
        secret = Secret("first", f"file:{path}", path.stat().st_mtime)
        path.write_text("second\n", encoding="utf-8")
        os.utime(path, (2_000_000_000, 2_000_000_000))
        monkeypatch.setattr(Secret, "RECHECK_S", 0.0)
        assert secret.current() == "second"

    def test_a_secret_file_removed_mid_rotation_keeps_the_last_good_value(
        self, tmp_path: Path
    ) -> None:
        path = tmp_path / "token"
        path.write_text("good\n", encoding="utf-8")
        secret = Secret("good", f"file:{path}", path.stat().st_mtime)
        path.unlink()
        assert secret.current() == "good"


class TestDpop:
    def test_the_string_form_is_the_mode_and_the_default_is_off(self, tmp_path: Path) -> None:
        c = load_config(FIXTURES / "issuers.yaml", ENV)
        assert [i.dpop.mode for i in c.issuers] == ["allowed", "off"]
        assert c.issuers[0].dpop.algorithms == (
            "ES256",
            "ES384",
            "EdDSA",
            "Ed25519",
            "PS256",
            "RS256",
        )
        assert c.state.on_store_error.dpop_replay == "deny"

    def test_a_mapping_without_mode_turns_dpop_on(self, tmp_path: Path) -> None:
        target = _copy_fixture(tmp_path, "minimal.yaml")
        text = target.read_text().replace(
            "  client_id: mcp-gateway\n", "  client_id: mcp-gateway\n  dpop: {iat_window_s: 60}\n"
        )
        target.write_text(text)
        assert load_config(target, ENV).issuer.dpop == DpopConfig(mode="allowed", iat_window_s=60)

    @pytest.mark.parametrize("alg", ["none", "HS256", "XS1"])
    def test_symmetric_unsigned_and_unknown_proof_algorithms_are_refused(
        self, tmp_path: Path, alg: str
    ) -> None:
        target = _copy_fixture(tmp_path, "minimal.yaml")
        text = target.read_text().replace(
            "  client_id: mcp-gateway\n",
            f"  client_id: mcp-gateway\n  dpop: {{mode: required, algorithms: [ES256, {alg}]}}\n",
        )
        target.write_text(text)
        with pytest.raises(ConfigError) as info:
            load_config(target, ENV)
        assert any("issuer.dpop.algorithms[1]" in p for p in info.value.problems), info.value

    def test_tasks_need_input_requests_with_seal_keys(self, tmp_path: Path) -> None:
        target = _copy_fixture(tmp_path, "minimal.yaml")
        target.write_text(target.read_text() + "tasks: {enabled: true}\n")
        with pytest.raises(ConfigError) as info:
            load_config(target, ENV)
        assert any(
            ": tasks: needs input_requests with seal_keys" in p for p in info.value.problems
        ), info.value.problems

    def test_nonces_need_the_shared_seal_keys(self, tmp_path: Path) -> None:
        target = _copy_fixture(tmp_path, "minimal.yaml")
        text = target.read_text().replace(
            "  client_id: mcp-gateway\n", "  client_id: mcp-gateway\n  dpop: {nonce: true}\n"
        )
        target.write_text(text)
        with pytest.raises(ConfigError) as info:
            load_config(target, ENV)
        assert any(
            "issuer.dpop.nonce" in p and "input_requests.seal_keys" in p
            for p in info.value.problems
        ), info.value.problems


def test_docs_configuration_md_documents_every_key_of_the_schema() -> None:
    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))

    def documented_as(key: str) -> str:
        # Per-backend keys are documented as backends.<name>.<key>; an issuers[] entry once,
        # as issuer.<key> (the same $defs/issuer).
        # A guardrail's credential is a backend's ($defs/credential), documented there.
        if key.startswith("guardrails.*.credential."):
            return key.replace("guardrails.*.", "backend.", 1)
        if key.startswith("approvals.webhook.credential."):
            return key.replace("approvals.webhook.", "backend.", 1)
        return (
            key.replace("backends.*.", "backends.<name>.")
            .replace("guardrails.*.", "guardrails.<name>.")
            .replace("issuers[].", "issuer.", 1)
        )

    undocumented = sorted(
        key
        for key in schema_keys(schema)
        if not key.endswith((".env", ".file", ".*")) and f"`{documented_as(key)}`" not in text
    )
    assert undocumented == []
    issuer = schema["properties"]["issuer"]["$ref"]
    assert schema["properties"]["issuers"]["items"]["$ref"] == issuer == "#/$defs/issuer"


class TestAssertionAudience:
    def test_token_endpoint_with_an_explicit_introspection_endpoint_needs_token_endpoint(
        self, tmp_path: Path
    ) -> None:
        target = _copy_fixture(tmp_path, "minimal.yaml")
        text = target.read_text().replace(
            "  client_id: mcp-gateway\n",
            "  client_id: mcp-gateway\n"
            "  introspection_endpoint: https://id.example.com/introspect\n"
            "  client_auth: private_key_jwt\n"
            "  private_key: {env: TEST_INTROSPECTION_SECRET}\n"
            "  assertion_audience: token_endpoint\n",
        )
        target.write_text(text)
        with pytest.raises(ConfigError) as info:
            load_config(target, ENV)
        assert any(
            ":9:3:" in p
            and "issuer.assertion_audience: token_endpoint needs issuer.token_endpoint" in p
            for p in info.value.problems
        ), info.value.problems

    def test_it_is_ignored_with_a_warning_for_client_secret_methods(self, tmp_path: Path) -> None:
        target = _copy_fixture(tmp_path, "minimal.yaml")
        target.write_text(
            target.read_text().replace(
                "  client_id: mcp-gateway\n",
                "  client_id: mcp-gateway\n  assertion_audience: introspection_endpoint\n",
            )
        )
        c = load_config(target, ENV)
        (warning,) = c.warnings
        assert warning.endswith(
            "issuer.assertion_audience: applies only to client_auth: private_key_jwt and is ignored"
        )
        assert ":6:" in warning


@pytest.mark.parametrize(
    ("key", "url"),
    [
        ("introspection_endpoint", "https://user:s3cr3tcred@id.example.com/introspect"),
        ("token_endpoint", "https://s3cr3tcred@id.example.com/token"),
    ],
)
def test_a_configured_url_with_userinfo_is_a_problem(tmp_path: Path, key: str, url: str) -> None:
    target = _copy_fixture(tmp_path, "minimal.yaml")
    text = target.read_text(encoding="utf-8").replace(
        "  client_id: mcp-gateway\n", f"  client_id: mcp-gateway\n  {key}: {url}\n"
    )
    target.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(target, ENV)
    assert any(f"issuer.{key}" in p and "userinfo" in p for p in info.value.problems)
    assert all("s3cr3tcred" not in p for p in info.value.problems)  # not echoed


class TestAuditCheckpointKey:
    @pytest.mark.parametrize(
        ("kind", "problem"),
        [
            ("ec", "must be an Ed25519 private key"),
            ("text", "is not an unencrypted PEM private key"),
        ],
    )
    def test_a_key_that_is_not_an_ed25519_private_key_is_a_problem_at_its_line(
        self, tmp_path: Path, kind: str, problem: str
    ) -> None:
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.hazmat.primitives.serialization import (
            Encoding,
            NoEncryption,
            PrivateFormat,
        )

        key = tmp_path / "key.pem"
        if kind == "ec":
            ec_key = ec.generate_private_key(ec.SECP256R1())
            key.write_bytes(ec_key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()))
        else:
            key.write_text("not a key\n")
        target = _copy_fixture(tmp_path, "full.yaml")
        text = target.read_text().replace("secrets/audit-checkpoint.pem", str(key))
        target.write_text(text)
        with pytest.raises(ConfigError) as info:
            load_config(target, ENV)
        (found,) = [p for p in info.value.problems if "audit.checkpoint.key" in p]
        assert problem in found and found.startswith(f"{target}:"), found
