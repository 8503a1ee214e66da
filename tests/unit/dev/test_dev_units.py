"""Pure pieces of the development tooling: redirect matching, tools, demo config and banner."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.config import load_config
from gateway.dev.demo_setup import DEMO_ROLES, DemoEndpoints, render_banner, render_gateway_yaml
from gateway.dev.demo_tools import MAX_NOTE_CHARS, TOOLS, DemoTools, UnknownToolError
from gateway.dev.issuer_store import DevClient, IssuerStore, is_loopback_redirect
from gateway.dev.loopback import check_bind_host, is_loopback_host
from tests.support.assertion_verifier import write_key

REPO = Path(__file__).resolve().parents[3]


def _client(*redirects: str) -> DevClient:
    return DevClient("c", None, "none", ("authorization_code",), ("mcp:access",), redirects)


class TestRedirectMatching:
    @pytest.mark.parametrize(
        ("registered", "requested", "ok"),
        [
            ("http://127.0.0.1:1234/cb", "http://127.0.0.1:9999/cb", True),
            ("http://localhost/callback", "http://localhost:50123/callback", True),
            ("http://127.0.0.1:1234/cb", "http://127.0.0.1:1234/other", False),
            ("http://127.0.0.1:1234/cb", "http://localhost:1234/cb", False),
            ("https://app.example/cb", "https://app.example:8443/cb", False),
            ("https://app.example/cb", "https://app.example/cb", True),
            ("http://127.0.0.1:1234/cb", "http://127.0.0.1:99999/cb", False),
        ],
        ids=[
            "loopback ip, other port",
            "localhost, any port",
            "loopback, other path",
            "loopback ip vs localhost",
            "https port is significant",
            "https exact",
            "malformed port",
        ],
    )
    def test_loopback_redirects_match_on_any_port_and_others_exactly(
        self, registered: str, requested: str, ok: bool
    ) -> None:
        assert _client(registered).check_redirect_uri(requested) is ok

    def test_only_http_to_a_loopback_host_counts_as_a_loopback_redirect(self) -> None:
        assert is_loopback_redirect("http://[::1]:80/cb")
        assert not is_loopback_redirect("https://127.0.0.1/cb")
        assert not is_loopback_redirect("http://127.0.0.1.example.com/cb")

    def test_an_omitted_scope_gets_the_default_and_unknown_scopes_are_dropped(self) -> None:
        client = DevClient("c", "s", "client_secret_basic", (), ("a", "b"), default_scopes=("a",))
        assert client.get_allowed_scope(None) == "a"
        assert client.get_allowed_scope("b zzz") == "b"
        assert client.check_client_secret("s")
        assert not client.check_client_secret("t")

    def test_a_client_assertion_jti_is_accepted_once(self) -> None:
        store = IssuerStore()
        assert store.remember_jti("c:1", 2e9)
        assert not store.remember_jti("c:1", 2e9)


class TestLoopbackGuard:
    @pytest.mark.parametrize("host", ["127.0.0.1", "::1", "localhost", "127.5.5.5"])
    def test_loopback_hosts_are_allowed(self, host: str) -> None:
        assert is_loopback_host(host)
        check_bind_host(host, allow_non_loopback=False)

    @pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.10", "example.com"])
    def test_other_hosts_need_the_force_flag(self, host: str) -> None:
        with pytest.raises(ValueError, match="loopback"):
            check_bind_host(host, allow_non_loopback=False)
        check_bind_host(host, allow_non_loopback=True)


class TestDemoTools:
    def test_every_tool_closes_its_input_schema(self) -> None:
        assert all(tool["inputSchema"]["additionalProperties"] is False for tool in TOOLS)

    def test_notes_are_added_listed_and_reset(self) -> None:
        tools = DemoTools()
        assert tools.call("notes_add", {"text": "one"})["structuredContent"] == {"id": 1}
        assert tools.call("notes_list", {})["structuredContent"]["notes"][0]["text"] == "one"
        assert tools.call("admin_reset", None)["structuredContent"] == {"deleted": 1}
        assert tools.notes == []

    @pytest.mark.parametrize(
        ("name", "arguments"),
        [
            ("echo", {}),
            ("echo", {"text": 3}),
            ("echo", {"text": "x" * (MAX_NOTE_CHARS + 1)}),
            ("time_now", {"tz": "UTC"}),
            ("notes_add", ["not", "an", "object"]),
        ],
        ids=[
            "missing text",
            "text not a string",
            "text one past the cap",
            "extra argument",
            "array",
        ],
    )
    def test_bad_arguments_become_an_is_error_result(self, name: str, arguments: object) -> None:
        assert DemoTools().call(name, arguments)["isError"] is True

    def test_text_at_the_cap_is_accepted(self) -> None:
        assert DemoTools().call("echo", {"text": "x" * MAX_NOTE_CHARS})["isError"] is False

    def test_an_unknown_tool_raises(self) -> None:
        with pytest.raises(UnknownToolError):
            DemoTools().call("rm", {})


class TestDemoSetup:
    def test_the_generated_gateway_yaml_loads_with_the_demo_policy(self, tmp_path: Path) -> None:
        (tmp_path / "issuer-client-secret").write_text("secret\n")
        (tmp_path / "backend-service-token").write_text("token\n")
        (tmp_path / "exchange-client-secret").write_text("exchange\n")
        (tmp_path / "input-seal-key").write_text("ab" * 32 + "\n")
        (tmp_path / "login-client-secret").write_text("login\n")
        write_key(tmp_path / "assertion-key.pem")
        path = tmp_path / "gateway.yaml"
        path.write_text(
            render_gateway_yaml(
                resource="http://127.0.0.1:8080/mcp",
                listen_host="127.0.0.1",
                listen_port=8080,
                ops_host="127.0.0.1",
                ops_port=0,
                issuer_url="http://127.0.0.1:9000",
                client_id="mcp-gateway",
                backend_url="http://127.0.0.1:9001/mcp",
                vault_url="http://127.0.0.1:9002/mcp",
                exchange_client_id="mcp-gateway-exchange",
                policy_path=str(REPO / "gateway" / "dev" / "demo-policy.yaml"),
                cache_max_ttl_s=5,
                login_client_id="mcp-gateway-login",
            )
        )
        config = load_config(path, environ={})
        assert config.resource == "http://127.0.0.1:8080/mcp"
        assert config.issuer.client_secret is not None
        assert config.issuer.client_secret.reveal() == "secret"
        assert config.issuer.cache.max_ttl_s == 5
        notes, vault = config.backends  # two backends behind the one endpoint
        assert (notes.name, notes.name_prefix, vault.name, vault.name_prefix) == (
            "notes",
            "",
            "vault",
            "vault__",
        )
        assert notes.credential.token is not None
        # The vault gets an issuer-minted token per caller (RFC 8693), for its own URL.
        assert vault.credential.type == "token_exchange"
        assert vault.credential.resource == vault.url == "http://127.0.0.1:9002/mcp"
        assert vault.credential.client_secret is not None
        assert vault.credential.client_secret.reveal() == "exchange"
        assert vault.identity.assertion is None
        assert config.input_requests.enabled is True  # the demo relays input rounds
        assert config.input_requests.seal_keys[0].key == bytes.fromhex("ab" * 32)
        assertion = notes.identity.assertion  # the demo signs caller assertions
        assert assertion is not None and assertion.audience == "http://127.0.0.1:9001/mcp"
        assert config.login is not None  # the login surface, at the issuer
        assert (config.login.client_id, config.login.issuer) == (
            "mcp-gateway-login",
            "http://127.0.0.1:9000",
        )
        assert config.warnings == ()  # no literal secrets

    def test_the_banner_gives_claude_code_codex_and_curl_setup(self) -> None:
        tokens = {role: f"tok-{role}" for role in DEMO_ROLES}
        endpoints = DemoEndpoints(
            "http://127.0.0.1:8080/mcp",
            "http://i",
            "http://o",
            "http://b",
            "http://v/mcp",
            "http://127.0.0.1:8080/gateway/account",
        )
        banner = render_banner(endpoints, tokens, "/tmp/state.json")
        assert "Vault (private)   http://v/mcp" in banner
        assert "Your account      http://127.0.0.1:8080/gateway/account" in banner
        assert "demo-user, demo-reader, demo-writer, demo-admin" in banner
        assert "call vault__whoami" in banner
        assert "Tools that ask the user:        notes_compose (writer)" in banner
        assert "claude mcp add --transport http demo http://127.0.0.1:8080/mcp --header" in banner
        assert '"Authorization": "Bearer ${DEMO_MCP_TOKEN}"' in banner
        assert "[mcp_servers.demo]" in banner
        assert 'bearer_token_env_var = "DEMO_MCP_TOKEN"' in banner
        assert "-H 'Mcp-Method: server/discover'" in banner
        assert all(token in banner for token in tokens.values())
