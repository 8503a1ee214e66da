"""The ``prompts:`` and ``resources:`` sections: URI normalisation and patterns, the loader's
errors with their positions, precedence and ties, the shared ladder, templates, the version hash,
``policy explain`` and ``check``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.commands.cli import main
from gateway.errors import ConfigError
from gateway.policy.policy_loader import load_policy
from gateway.policy.uri import normalize_uri
from gateway.policy.uri_patterns import compile_pattern, overlap, template_pattern
from tests.support.policy import HEAD, minimal_config, policy_from, policy_problems, who, write_text

SURFACE = """
version: 1
baseline_scopes: [mcp:access]
tools:
  echo: {scopes: []}
prompts:
  summarize: {scopes: [docs:read]}
  "review_*": {scopes: [code:read]}
  "review_secret": {deny: true}
  "ops_*": {scopes: [], clients: [ops-console]}
resources:
  "file:///docs/**": {scopes: [docs:read]}
  "file:///docs/private/**": {scopes: [docs:admin]}
  "file:///docs/readme.md": {scopes: []}
  "https://Wiki.Example.COM/pages/*": {scopes: [wiki:read]}
  "ui://weather/view.html": {scopes: []}
"""


class TestNormalisation:
    @pytest.mark.parametrize(
        ("raw", "normal"),
        [
            ("file:///docs/%2e%2e/etc/passwd", "file:///etc/passwd"),
            ("file:///docs/%2E%2E/%2e/etc", "file:///etc"),
            ("file:///docs/a/../../b", "file:///b"),
            ("HTTPS://Wiki.Example.COM/pages/x", "https://wiki.example.com/pages/x"),
            ("https://example.com:/a", "https://example.com/a"),
            ("https://User@EXAMPLE.com:8443/a", "https://User@example.com:8443/a"),
            ("file:///a/%7e/b?c=%2f", "file:///a/~/b?c=%2F"),
            ("urn:example:thing", "urn:example:thing"),
            ("ui://weather/./view.html", "ui://weather/view.html"),
            ("weather://Paris/now?units=%6Detric", "weather://paris/now?units=metric"),
        ],
    )
    def test_spellings_of_one_uri_meet_in_one_form(self, raw: str, normal: str) -> None:
        assert normalize_uri(raw) == normal

    @pytest.mark.parametrize(
        "raw",
        [
            "",
            "no-scheme",
            "/relative",
            "file:///a#frag",
            "file:///a%zz",
            "file:///a b",
            "file:///\u00e9",
            "file:///a\x00",
            "x:" + "a" * 2048,
        ],
    )
    def test_what_is_not_a_uri_is_refused(self, raw: str) -> None:
        assert normalize_uri(raw) is None

    def test_a_star_stays_in_its_segment_and_a_double_star_crosses(self) -> None:
        single, _ = compile_pattern("file:///docs/*")
        double, _ = compile_pattern("file:///docs/**")
        assert single is not None and double is not None
        for uri, one, many in [
            ("file:///docs/a", True, True),
            ("file:///docs/", True, True),
            ("file:///docs/a/b", False, True),
            ("file:///docs/a?x=1", False, True),
            ("file:///docsx/a", False, False),
        ]:
            normal = normalize_uri(uri)
            assert normal is not None
            assert (single.matches(normal), double.matches(normal)) == (one, many), uri

    def test_overlap_finds_a_witness_or_proves_there_is_none(self) -> None:
        def pattern(text: str):  # type: ignore[no-untyped-def]
            compiled, reason = compile_pattern(text)
            assert compiled is not None, reason
            return compiled

        assert overlap(pattern("file:///*/x"), pattern("file:///a/*")) == "file:///a/x"
        assert overlap(pattern("file:///a/*"), pattern("file:///a/b/c")) is None
        assert overlap(pattern("file:///a/**"), pattern("file:///a/b/c")) == "file:///a/b/c"
        assert overlap(pattern("file:///a*"), pattern("file:///*b")) == "file:///ab"

    @settings(max_examples=300, deadline=None)
    @given(
        st.lists(st.sampled_from(["a", "/", "*", "**", "?"]), max_size=5),
        st.lists(st.sampled_from(["a", "/", "*", "**", "?"]), max_size=5),
    )
    def test_overlap_agrees_with_a_brute_force_search(
        self, left: list[str], right: list[str]
    ) -> None:
        first, _ = compile_pattern("x:/" + "".join(left))
        second, _ = compile_pattern("x:/" + "".join(right))
        if first is None or second is None:
            return
        witness = overlap(first, second)
        if witness is not None:
            assert first.matches(witness) and second.matches(witness)
        else:
            alphabet = ["a", "/", "?"]
            words = [""]
            for _ in range(6):
                words += [w + c for w in words for c in alphabet if len(w) < 6]
            assert not any(
                first.matches("x:/" + w) and second.matches("x:/" + w) for w in set(words)
            )

    @pytest.mark.parametrize(
        ("template", "pattern"),
        [
            ("file:///docs/{name}", "file:///docs/*"),
            ("file:///{+path}", "file:///**"),
            ("greeting://{name}", "greeting://*"),
            ("weather://{city}/now{?units}", "weather://*/now**"),
            ("repo://{owner}/{repo}{/path*}", "repo://*/***"),
        ],
    )
    def test_a_template_becomes_a_pattern_covering_its_expansions(
        self, template: str, pattern: str
    ) -> None:
        compiled = template_pattern(template)
        assert compiled is not None and compiled.pattern == pattern


class TestLoader:
    @pytest.mark.parametrize(
        ("body", "expected"),
        [
            (
                "resources:\n  docs/**: {scopes: []}\n",
                "4:3: resources.docs/**: not a URI: write scheme:[//authority]path, "
                'e.g. "file:///docs/**"',
            ),
            (
                'resources:\n  "ui://*/view": {scopes: []}\n',
                "4:3: resources.ui://*/view: the scheme and the authority are matched literally: "
                "no * in them",
            ),
            (
                'resources:\n  "file:///a/***": {scopes: []}\n',
                "4:3: resources.file:///a/***: use * (one segment) or ** (any depth), not ***",
            ),
            (
                'resources:\n  "file:///a%zz": {scopes: []}\n',
                "4:3: resources.file:///a%zz: not a valid URI (printable ASCII, percent-encodings "
                "as %XX, no fragment)",
            ),
            (
                'resources:\n  "file:///a": {}\n',
                "4:3: resources.file:///a: a rule needs scopes (use [] for the baseline only), "
                "any_of or deny",
            ),
            (
                'resources:\n  "": {scopes: []}\n',
                "4:3: resources.: a resource URI or pattern must not be empty",
            ),
            (
                'prompts:\n  "p[ab]": {scopes: []}\n',
                "4:3: prompts.p[ab]: character classes ([...]) are not supported; use * and ?",
            ),
            ("prompts:\n  p: {scopes: [], scope: [x]}\n", "4:19: prompts.p.scope: unknown key"),
            (
                "prompts:\n  p: {scopes: [], rate_limit: fast}\n",
                '4:19: prompts.p.rate_limit: "fast" is not a rate: write N/second, N/minute or '
                "N/hour",
            ),
            ("methods:\n  prompts/get: {scopes: [x]}\n", "4:3: methods.prompts/get: unknown key"),
        ],
    )
    def test_each_mistake_is_reported_at_its_position(
        self, tmp_path: Path, body: str, expected: str
    ) -> None:
        assert policy_problems(tmp_path, body) == [expected]

    def test_two_spellings_of_one_uri_are_one_key(self, tmp_path: Path) -> None:
        body = 'resources:\n  "file:///a/b": {scopes: []}\n  "FILE:///a/%62": {scopes: [x]}\n'
        assert policy_problems(tmp_path, body) == [
            f"5:3: resources.FILE:///a/%62: also defined at {tmp_path / 'p.yaml'}:4:3"
        ]

    def test_resource_patterns_that_tie_are_an_error_with_a_witness(self, tmp_path: Path) -> None:
        body = 'resources:\n  "file:///*/x": {scopes: []}\n  "file:///a/*": {scopes: []}\n'
        (problem,) = policy_problems(tmp_path, body)
        assert problem.startswith("5:3: resources.file:///a/*: ties with resources.file:///*/x")
        assert "both match 'file:///a/x' with the same specificity (literal characters: 10, " in (
            problem
        )

    def test_prompt_patterns_that_tie_are_an_error(self, tmp_path: Path) -> None:
        body = 'prompts:\n  "x*": {scopes: []}\n  "*x": {scopes: []}\n'
        (problem,) = policy_problems(tmp_path, body)
        assert problem.startswith("5:3: prompts.*x: ties with prompts.x* at ")

    def test_a_tool_and_a_prompt_may_share_a_pattern(self, tmp_path: Path) -> None:
        policy = policy_from(
            HEAD + 'tools:\n  "x*": {scopes: []}\nprompts:\n  "x*": {scopes: [a]}\n', tmp_path
        )
        assert policy.decide_tool(who("mcp:access"), "xy").allowed
        assert policy.decide_prompt(who("mcp:access"), "xy").missing_scopes == ("a",)

    def test_a_duplicate_across_files_names_the_first(self, tmp_path: Path) -> None:
        first = write_text(tmp_path / "a.yaml", HEAD + "prompts:\n  p: {scopes: []}\n")
        second = write_text(tmp_path / "b.yaml", "version: 1\nprompts:\n  p: {scopes: []}\n")
        with pytest.raises(ConfigError) as caught:
            load_policy([first, second])
        assert caught.value.problems == [f"{second}:3:3: prompts.p: also defined at {first}:4:3"]


class TestDecisions:
    @pytest.fixture
    def policy(self, tmp_path: Path):  # type: ignore[no-untyped-def]
        return policy_from(SURFACE, tmp_path)

    def test_prompts_walk_the_tool_ladder(self, policy) -> None:  # type: ignore[no-untyped-def]
        assert policy.decide_prompt(who("mcp:access docs:read"), "summarize").reason == "allow"
        step_up = policy.decide_prompt(who("mcp:access"), "summarize")
        assert (step_up.visible, step_up.allowed) == (True, False)
        assert step_up.required_scopes == ("mcp:access", "docs:read")
        assert step_up.missing_scopes == ("docs:read",)
        assert policy.decide_prompt(who("mcp:access code:read"), "review_pr").rule == "review_*"
        assert policy.decide_prompt(who("mcp:access code:read"), "review_secret").reason == "deny"
        assert policy.decide_prompt(who("mcp:access"), "ops_restart").reason == "client"
        allowed = policy.decide_prompt(who("mcp:access", client_id="ops-console"), "ops_restart")
        assert allowed.allowed
        unruled = policy.decide_prompt(who("mcp:access docs:read code:read"), "other")
        assert (unruled.visible, unruled.reason) == (False, "no_rule")

    def test_the_most_specific_resource_rule_wins(self, policy) -> None:  # type: ignore[no-untyped-def]
        caller = who("mcp:access docs:read")
        assert policy.decide_resource(caller, "file:///docs/a/b.md").rule == "file:///docs/**"
        private = policy.decide_resource(caller, "file:///docs/private/x")
        assert private.rule == "file:///docs/private/**"
        assert private.missing_scopes == ("docs:admin",)
        readme = policy.decide_resource(who("mcp:access"), "file:///docs/readme.md")
        assert (readme.rule, readme.allowed) == ("file:///docs/readme.md", True)

    @pytest.mark.parametrize(
        "uri",
        [
            "file:///docs/%2e%2e/etc/passwd",
            "file:///docs/../etc/passwd",
            "file:///docs/public/%2E%2E/%2e%2e/etc/passwd",
            "file:///etc/passwd",
            "file:///docs#x",
            "not a uri",
        ],
    )
    def test_dot_segments_and_invalid_uris_cannot_dodge_a_rule(self, policy, uri: str) -> None:  # type: ignore[no-untyped-def]
        decision = policy.decide_resource(who("mcp:access docs:read docs:admin"), uri)
        assert (decision.visible, decision.reason) == (False, "no_rule")

    def test_an_encoded_dot_segment_cannot_escape_a_more_specific_rule(self, policy) -> None:  # type: ignore[no-untyped-def]
        decision = policy.decide_resource(
            who("mcp:access docs:read"), "file:///docs/public/%2e%2e/private/keys"
        )
        assert decision.rule == "file:///docs/private/**" and not decision.allowed

    def test_a_mixed_case_host_meets_its_rule(self, policy) -> None:  # type: ignore[no-untyped-def]
        caller = who("mcp:access wiki:read")
        for uri in ("https://wiki.example.com/pages/a", "HTTPS://WIKI.EXAMPLE.COM/pages/a"):
            assert policy.decide_resource(caller, uri).allowed, uri
        # The path stays case-sensitive.
        assert not policy.decide_resource(caller, "https://wiki.example.com/PAGES/a").visible

    def test_a_template_is_decided_by_the_rules_it_can_reach(self, policy) -> None:  # type: ignore[no-untyped-def]
        assert policy.decide_template(who("mcp:access docs:read"), "file:///docs/{name}").allowed
        step_up = policy.decide_template(who("mcp:access"), "file:///docs/private/{name}")
        assert (step_up.allowed, step_up.visible) == (False, True)
        assert not policy.decide_template(who("mcp:access docs:read"), "file:///etc/{n}").visible
        # Only the readme rule (no extra scope) is reachable by an expansion.
        readme = policy.decide_template(who("mcp:access"), "file:///docs/{+path}")
        assert readme.allowed and readme.rule == "file:///docs/readme.md"
        assert not policy.decide_template(who("mcp:access"), "file:///{a").visible

    def test_prompt_and_resource_limits_come_from_the_matched_rule(self, tmp_path: Path) -> None:
        policy = policy_from(
            HEAD + "prompts:\n  p: {scopes: [], rate_limit: 5/minute, max_concurrency: 2}\n"
            'resources:\n  "file:///**": {scopes: [], rate_limit: 2/second}\n',
            tmp_path,
        )
        assert policy.limits("prompts", "p") == ((5, 60.0), 2)
        assert policy.limits("resources", "file:///**") == ((2, 1.0), None)
        assert policy.limits("resources", None) == (None, None)


class TestVersion:
    def test_a_tools_only_policy_keeps_its_version(self, tmp_path: Path) -> None:
        # The hash of this file before prompts/resources existed (commit 5506c6f).
        body = HEAD + "tools:\n  echo: {scopes: []}\n"
        assert policy_from(body, tmp_path).version == "8524cbb0ea84"

    def test_prompts_and_resources_change_the_version_and_order_does_not(
        self, tmp_path: Path
    ) -> None:
        base = policy_from(HEAD + "tools:\n  echo: {scopes: []}\n", tmp_path, "a.yaml").version
        one = policy_from(SURFACE, tmp_path, "b.yaml").version
        lines = SURFACE.strip().splitlines()
        resources = lines.index("resources:")
        reordered = "\n".join(lines[: resources + 1] + lines[resources + 1 :][::-1])
        assert policy_from(reordered, tmp_path, "c.yaml").version == one != base
        changed = SURFACE.replace("docs:admin", "docs:owner")
        assert policy_from(changed, tmp_path, "d.yaml").version != one


@pytest.fixture(autouse=True)
def _keep_logging_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("gateway.commands.cli.configure", lambda *args, **kwargs: None)


class TestExplainAndCheck:
    def run(self, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
        code = main(["policy", "explain", *argv])
        out, _ = capsys.readouterr()
        return code, out

    def test_one_prompt_and_one_resource(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        path = write_text(tmp_path / "p.yaml", SURFACE)
        code, out = self.run(
            capsys, "--policy", str(path), "--scopes", "mcp:access", "--prompt", "summarize"
        )
        assert code == 0
        assert "PROMPT     DECISION  RULE       REASON  MISSING SCOPES\n" in out
        assert "summarize  step-up   summarize  scope   docs:read" in out
        assert "a hidden prompt is answered like an unknown prompt (-32602)" in out
        code, out = self.run(
            capsys,
            "--policy",
            str(path),
            "--scopes",
            "mcp:access docs:read",
            "--json",
            "--resource",
            "file:///docs/%2e%2e/etc/passwd",
        )
        report = json.loads(out)
        assert report["evaluated"] == "resource"
        assert report["results"][0] | {"required_scopes": None} == {
            "name": "file:///docs/%2e%2e/etc/passwd",
            "decision": "hidden",
            "allowed": False,
            "visible": False,
            "rule": None,
            "reason": "no_rule",
            "required_scopes": None,
            "missing_scopes": [],
            "listed": False,
        }
        assert report["warnings"] == [
            "decided on, and sent to the backend as, its normal form file:///etc/passwd"
        ]

    def test_all_shows_every_section_and_the_list_methods(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        path = write_text(tmp_path / "p.yaml", SURFACE)
        code, out = self.run(capsys, "--policy", str(path), "--scopes", "mcp:access", "--all")
        assert code == 0
        tables = out.split("\n\n")
        assert tables[2].splitlines() == [
            "PROMPT RULE    DECISION  RULE           REASON  MISSING SCOPES",
            "review_secret  hidden    review_secret  deny    -",
            "summarize      step-up   summarize      scope   docs:read",
            "review_*       step-up   review_*       scope   code:read",
            "ops_*          hidden    ops_*          client  -",
        ]
        assert tables[3].splitlines()[0].startswith("RESOURCE RULE")
        assert "file:///docs/private/**           step-up" in tables[3]
        assert [line.split()[0] for line in tables[4].splitlines()[1:]] == [
            "server/discover",
            "tools/list",
            "prompts/list",
            "resources/list",
            "resources/templates/list",
            "who:",
        ]
        # No configuration: the principal stands for the first issuer, whose names plain
        # entries are.
        assert "who: ops_*: clients 'ops-console' of the first issuer" in tables[4]
        code, out = self.run(
            capsys, "--policy", str(path), "--scopes", "mcp:access", "--all", "--json"
        )
        report = json.loads(out)
        assert [row["name"] for row in report["prompts"]][1] == "summarize"
        assert len(report["resources"]) == 5

    def test_check_reports_a_bad_resource_key_with_its_position(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("SURFACE_SECRET", "s3cret")
        policy = write_text(
            tmp_path / "policies" / "main.yaml", SURFACE + '  "ui://*/x": {scopes: []}\n'
        )
        config = minimal_config(tmp_path / "gateway.yaml", "SURFACE_SECRET")
        assert main(["check", "--config", str(config)]) == 1
        out, _ = capsys.readouterr()
        assert f"{policy}:16:3: resources.ui://*/x: the scheme and the authority" in out
        write_text(policy, SURFACE)
        assert main(["check", "--config", str(config)]) == 0
