"""``backends:`` (several upstreams behind one endpoint) and the single ``backend:``: loading,
names, prefixes and the load-time collision checks, each problem at its ``file:line:column``."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

from gateway.commands.cli import main
from gateway.config import DEFAULT_BACKEND, Config, load_config
from gateway.policy.policy_loader import load_policy
from gateway.policy.warnings import unruled_tools
from tests.support.config_files import config_problems, issuer_head, write_config_text

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "config"
ENV = {
    "TEST_INTROSPECTION_SECRET": "introspection-secret",
    "TEST_BACKEND_TOKEN": "backend-token",
}
HEAD = issuer_head()
"""Six lines: a document's ``backends:`` starts on line 7."""


def _write(tmp_path: Path, body: str) -> Path:
    return write_config_text(tmp_path, HEAD + textwrap.dedent(body))


def _problems(tmp_path: Path, body: str) -> list[str]:
    return config_problems(tmp_path, HEAD + textwrap.dedent(body), ENV)


def _backend(url: str = "https://a.example.com/mcp", **extra: str) -> str:
    keys = "".join(f"    {k}: {v}\n" for k, v in extra.items())
    return (
        f"    url: {url}\n    credential: {{type: bearer, token: {{env: TEST_BACKEND_TOKEN}}}}\n"
        + keys
    )


class TestLoading:
    def test_the_multi_fixture_reaches_the_typed_config_in_file_order(self) -> None:
        c = load_config(FIXTURES / "multi.yaml", ENV)
        assert c.backend is None
        assert [(b.name, b.name_prefix) for b in c.backends] == [
            ("docs", "docs__"),  # the default prefix: the name and two underscores
            ("tickets", "tix."),
            ("warehouse", ""),
            ("github", "github__"),
        ]
        docs, tickets, warehouse, github = c.backends
        assert docs.tool_timeouts_s == (("docs__reindex", 120.0),)
        assert docs.tool_timeout("docs__reindex") == 120.0
        assert (docs.timeout_s, docs.max_connections) == (5.0, 100)
        assert tickets.url == "http://10.1.2.4:9000/mcp" and tickets.allow_insecure_http
        cred = tickets.credential
        assert (cred.type, cred.client_id, cred.client_auth) == (
            "client_credentials",
            "gateway-tickets",
            "client_secret_post",
        )
        assert cred.client_secret is not None
        assert cred.client_secret.reveal() == "backend-client-secret"
        assert (cred.scope, cred.resource, cred.audience, cred.refresh_margin_s) == (
            "tickets:invoke",
            "https://tickets.internal/mcp",
            "tickets-api",
            45,
        )
        assert tickets.tls.ca_file is not None and tickets.tls.ca_file.endswith("tls/ca.pem")
        assert (tickets.connect_timeout_s, tickets.catalog_refresh_s) == (1.0, 60.0)
        assert (tickets.identity_headers, tickets.max_connections) == (True, 20)
        exchange = warehouse.credential
        assert (exchange.type, exchange.client_id, exchange.issuer, exchange.actor) == (
            "token_exchange",
            "gateway-warehouse",
            "https://id.example.com",
            "none",
        )
        assert exchange.resource == "https://warehouse.internal/mcp"
        user = github.credential
        assert (user.type, user.client_id, user.client_auth, user.scope) == (
            "user_oauth",
            "gateway-github",
            "client_secret_basic",
            "repo read:user",
        )
        assert (user.authorization_server, user.authorization_endpoint, user.token_endpoint) == (
            "https://github.example.com/login/oauth",
            "https://github.example.com/login/oauth/authorize",
            "https://github.example.com/login/oauth/access_token",
        )
        assert (user.resource, user.omit_resource, user.prompt) == (
            "https://github-mcp.example.com/mcp/",
            True,
            "consent",
        )
        assert user.extra_authorize_params == (("access_type", "offline"),)
        assert user.catalog_token is not None and user.catalog_token.reveal() == "backend-token"
        assert user.refresh_margin_s == 120
        assert c.backend_readiness == "any"
        assert c.user_oauth is not None
        assert [key.id for key in c.user_oauth.seal_keys] == ["u2", "u1"]
        assert c.user_oauth.seal_keys[0].key == bytes(range(100, 132))
        assert (c.user_oauth.seal_key_id, c.user_oauth.consent_ttl_s) == ("u2", 300)
        assert c.user_oauth.max_idle_days == 14

    def test_a_single_backend_section_is_the_one_backend_named_default(self) -> None:
        env = {
            **ENV,
            "TEST_REDIS_URL": "rediss://r:6380/0",
            "TEST_ADMIN_TOKEN": "a" * 32,
            "TEST_OTLP_KEY": "k",
        }
        c = load_config(FIXTURES / "full.yaml", env)
        assert c.backend is not None
        assert c.backends == (c.backend,)
        assert (c.backend.name, c.backend.name_prefix) == (DEFAULT_BACKEND, "acme.")
        assert c.backend_readiness == "all"

    def test_a_config_built_in_code_with_backend_has_it_as_its_backends(self) -> None:
        base = load_config(FIXTURES / "minimal.yaml", ENV)
        assert base.backend is not None
        again = Config(
            source="x",
            resource=base.resource,
            issuer=base.issuer,
            backend=base.backend,
            policy_paths=(),
        )
        assert again.backends == (base.backend,)


class TestSectionRules:
    def test_backend_and_backends_together_are_refused_at_backends(self, tmp_path: Path) -> None:
        single = _backend().replace("    ", "  ")
        problems = _problems(tmp_path, "backend:\n" + single + "backends:\n  a:\n" + _backend())
        assert problems == [
            "gateway.yaml:10:1: backends: backend: and backends: are exclusive (backend: is one "
            "unnamed backend; move it under backends: with a name)"
        ]

    def test_neither_is_refused_at_the_top_level(self, tmp_path: Path) -> None:
        assert _problems(tmp_path, "") == [
            "gateway.yaml:1:1: (top level): one of backend: or backends: is required"
        ]

    def test_an_empty_backends_mapping_is_refused(self, tmp_path: Path) -> None:
        (problem,) = _problems(tmp_path, "backends: {}\n")
        assert problem == "gateway.yaml:7:1: backends: has fewer than 1 keys"

    @pytest.mark.parametrize("name", ["Tickets", "-x", "a" * 33, "tick.ets", "ü"])
    def test_a_bad_backend_name_is_refused_at_its_key(self, tmp_path: Path, name: str) -> None:
        problems = _problems(tmp_path, f"backends:\n  '{name}':\n" + _backend())
        assert problems == [
            f"gateway.yaml:8:3: backends.{name}: a backend name is 1-32 characters of a-z, 0-9, "
            "'_' and '-', starting with a letter or digit"
        ]

    def test_the_longest_name_and_a_digit_first_name_load(self, tmp_path: Path) -> None:
        name = "0" + "a_-" * 10 + "z"  # 32 characters
        c = load_config(_write(tmp_path, f"backends:\n  {name}:\n" + _backend()), ENV)
        assert [b.name for b in c.backends] == [name]

    def test_at_most_32_backends(self, tmp_path: Path) -> None:
        many = "".join(f"  b{i}:\n" + _backend() for i in range(32))
        assert len(load_config(_write(tmp_path, "backends:\n" + many), ENV).backends) == 32
        (problem,) = _problems(tmp_path, "backends:\n" + many + "  b32:\n" + _backend())
        assert problem.startswith("gateway.yaml:7:1: backends: ") and "more than 32" in problem

    def test_name_prefix_is_the_key_of_backend_and_prefix_the_key_of_backends(
        self, tmp_path: Path
    ) -> None:
        assert _problems(tmp_path, "backends:\n  a:\n" + _backend(name_prefix="x.")) == [
            "gateway.yaml:11:5: backends.a.name_prefix: unknown key"
        ]
        assert _problems(tmp_path, "backend:\n" + _backend(prefix="x.").replace("    ", "  ")) == [
            "gateway.yaml:10:3: backend.prefix: unknown key"
        ]

    def test_a_prefix_with_other_characters_is_refused_in_plain_words(self, tmp_path: Path) -> None:
        assert _problems(tmp_path, "backends:\n  a:\n" + _backend(prefix="'a/b'")) == [
            "gateway.yaml:11:5: backends.a.prefix: \"a/b\" may hold only letters, digits, '_', "
            "'.' and '-' (at most 32)"
        ]

    def test_a_problem_inside_one_backend_names_its_path(self, tmp_path: Path) -> None:
        body = "backends:\n  a:\n" + _backend(timeout_s="soon") + "  b:\n" + _backend()
        assert _problems(tmp_path, body) == [
            'gateway.yaml:11:5: backends.a.timeout_s: "soon" is not a number',
        ]
        body = "backends:\n  a:\n" + _backend() + "  b:\n" + _backend("ftp://x")
        assert _problems(tmp_path, body) == [
            "gateway.yaml:12:5: backends.b.url: must be an absolute http(s) URL",
        ]

    def test_tool_timeouts_must_carry_the_backends_prefix(self, tmp_path: Path) -> None:
        body = "backends:\n  docs:\n" + _backend(tool_timeouts_s="{docs__slow: 30, slow: 30}")
        assert _problems(tmp_path, body) == [
            "gateway.yaml:11:39: backends.docs.tool_timeouts_s.slow: never matches: tool names "
            "are as clients see them, with this backend's prefix 'docs__'"
        ]


class TestStaticCollisions:
    """Exposed names p1 + t1 == p2 + t2 are only possible when one prefix starts the other."""

    def test_two_backends_with_one_prefix_are_refused_at_the_later_prefix(
        self, tmp_path: Path
    ) -> None:
        body = "backends:\n  a:\n" + _backend(prefix="x_") + "  b:\n" + _backend(prefix="x_")
        assert _problems(tmp_path, body) == [
            "gateway.yaml:15:5: backends.b.prefix: prefix 'x_' is also the prefix of backend "
            "'a': a tool offered by both would have one exposed name (give each backend its own "
            "prefix; only one may have the empty prefix)"
        ]

    def test_a_chosen_prefix_equal_to_a_default_one_is_refused(self, tmp_path: Path) -> None:
        body = "backends:\n  docs:\n" + _backend() + "  wiki:\n" + _backend(prefix="docs__")
        (problem,) = _problems(tmp_path, body)
        assert problem.startswith("gateway.yaml:14:5: backends.wiki.prefix: prefix 'docs__'")

    def test_two_empty_prefixes_are_refused(self, tmp_path: Path) -> None:
        body = "backends:\n  a:\n" + _backend(prefix='""') + "  b:\n" + _backend(prefix='""')
        (problem,) = _problems(tmp_path, body)
        assert problem.startswith("gateway.yaml:15:5: backends.b.prefix: prefix '' is also")

    def test_a_prefix_starting_with_another_is_refused_with_a_witness(self, tmp_path: Path) -> None:
        # Default prefixes: a__ and a__b__. Tool b__x of a and tool x of a__b: both a__b__x.
        body = "backends:\n  a:\n" + _backend() + "  a__b:\n" + _backend()
        assert _problems(tmp_path, body) == [
            "gateway.yaml:11:3: backends.a__b: prefix 'a__b__' of backend 'a__b' starts with "
            "prefix 'a__' of backend 'a': a tool 'b__x' of 'a' and a tool 'x' of 'a__b' would "
            "have one exposed name (choose prefixes that do not start with one another)"
        ]

    def test_the_shorter_prefix_second_is_refused_too(self, tmp_path: Path) -> None:
        body = (
            "backends:\n  a:\n" + _backend(prefix="tools.x.") + "  b:\n" + _backend(prefix="tools.")
        )
        (problem,) = _problems(tmp_path, body)
        assert problem.startswith(
            "gateway.yaml:15:5: backends.b.prefix: prefix 'tools.x.' of backend 'a' starts "
            "with prefix 'tools.' of backend 'b'"
        )

    def test_one_empty_prefix_beside_others_loads(self, tmp_path: Path) -> None:
        body = (
            "backends:\n  legacy:\n"
            + _backend(prefix='""')
            + "  docs:\n"
            + _backend()
            + "  tickets:\n"
            + _backend(prefix="tickets.")
        )
        c = load_config(_write(tmp_path, body), ENV)
        assert [b.name_prefix for b in c.backends] == ["", "docs__", "tickets."]

    def test_prefixes_that_share_a_start_but_neither_starts_the_other_load(
        self, tmp_path: Path
    ) -> None:
        body = "backends:\n  ab:\n" + _backend(prefix="ab_") + "  ac:\n" + _backend(prefix="ac_")
        assert [b.name for b in load_config(_write(tmp_path, body), ENV).backends] == ["ab", "ac"]

    def test_check_prints_the_collision_with_its_position_and_exits_1(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        for key, value in ENV.items():
            monkeypatch.setenv(key, value)
        # main() would configure structlog globally for the rest of the session.
        monkeypatch.setattr("gateway.commands.cli.configure", lambda *args, **kwargs: None)
        body = "backends:\n  a:\n" + _backend(prefix="x_") + "  b:\n" + _backend(prefix="x_")
        target = _write(tmp_path, body)
        assert main(["check", "--config", str(target)]) == 1
        out = capsys.readouterr().out
        assert f"{target}:15:5: backends.b.prefix: prefix 'x_' is also the prefix of" in out


def _yaml_blocks(markdown: str, heading: str) -> list[str]:
    section = markdown.split(heading, 1)[1]
    return [block.split("```", 1)[0] for block in section.split("```yaml\n")[1:]]


class TestDocumentedExamples:
    def test_the_complete_example_of_backends_md_loads_with_its_policy(
        self, tmp_path: Path
    ) -> None:
        text = (ROOT / "docs" / "backends.md").read_text(encoding="utf-8")
        config_text, policy_text = _yaml_blocks(text, "## Several backends behind one endpoint")[:2]
        (tmp_path / "policies").mkdir()
        (tmp_path / "policies" / "default.yaml").write_text(policy_text, encoding="utf-8")
        (tmp_path / "gateway.yaml").write_text(config_text, encoding="utf-8")
        c = load_config(tmp_path / "gateway.yaml", {}, resolve_secrets=False)
        assert [(b.name, b.name_prefix) for b in c.backends] == [
            ("docs", "docs__"),
            ("tickets", "tickets__"),
            ("warehouse", "dw."),
        ]
        policy = load_policy(list(c.policy_paths))
        names = ["docs__search", "tickets__create", "tickets__admin_x", "dw.query"]
        assert unruled_tools(policy, names) == []

    def test_the_readme_quickstart_backends_block_replaces_backend(self, tmp_path: Path) -> None:
        text = (ROOT / "README.md").read_text(encoding="utf-8")
        single, several = (
            textwrap.dedent(block) for block in _yaml_blocks(text, "## Operator quickstart")[:2]
        )
        head, _, rest = single.partition("backend:\n")
        tail = rest[rest.index("policy:") :]
        (tmp_path / "policies").mkdir()
        shutil.copy(FIXTURES / "policy.yaml", tmp_path / "policies" / "default.yaml")
        (tmp_path / "gateway.yaml").write_text(head + several + tail, encoding="utf-8")
        c = load_config(tmp_path / "gateway.yaml", {}, resolve_secrets=False)
        assert [b.name for b in c.backends] == ["docs", "tickets"] and c.backend is None
