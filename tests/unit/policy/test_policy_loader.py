"""The loader: every error kind with its exact file:line:col, merging, conflicts, ties, hashing."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.dev.demo_accounts import ACCOUNTS_TOOLS
from gateway.dev.demo_backend import LISTED
from gateway.dev.demo_vault import VAULT_WHOAMI
from gateway.errors import ConfigError
from gateway.policy.policy_loader import load_policy
from gateway.policy.warnings import unmatched_rules
from tests.support.policy import who, write_text

ROOT = Path(__file__).resolve().parents[3]


def problems_of(*paths: Path) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_policy(list(paths))
    return caught.value.problems


HEAD = "version: 1\nbaseline_scopes: [mcp:access]\n"


# (id, body after the two header lines, expected "line:col: key.path: message")
FILE_ERRORS = [
    ("unknown top-level key", "tool: {}\n", "3:1: tool: unknown key"),
    (
        "unknown rule key",
        "tools:\n  echo: {scopes: [], scope: [x]}\n",
        "4:22: tools.echo.scope: unknown key",
    ),
    (
        "unknown method",
        "methods:\n  tools/call: {scopes: [x]}\n",
        "4:3: methods.tools/call: unknown key",
    ),
    (
        "method rule without scopes",
        "methods:\n  tools/list: {}\n",
        '4:3: methods.tools/list: required key "scopes" is missing',
    ),
    (
        "bad rate limit",
        "tools:\n  a: {scopes: [], rate_limit: 30/min}\n",
        '4:19: tools.a.rate_limit: "30/min" is not a rate: write N/second, N/minute or N/hour',
    ),
    (
        "zero rate",
        "tools:\n  a: {scopes: [], rate_limit: 0/second}\n",
        '4:19: tools.a.rate_limit: "0/second" is not a rate: write N/second, N/minute or N/hour',
    ),
    (
        "concurrency below one",
        "tools:\n  a: {scopes: [], max_concurrency: 0}\n",
        "4:19: tools.a.max_concurrency: 0 is less than the minimum of 1",
    ),
    (
        "scope with a space",
        'tools:\n  a: {scopes: ["docs read"]}\n',
        '4:16: tools.a.scopes[0]: "docs read" is not a valid scope token (printable ASCII '
        "without spaces, quotes or backslashes; RFC 6749 §3.3)",
    ),
    (
        "duplicate scope",
        "tools:\n  a: {scopes: [x, x]}\n",
        "4:7: tools.a.scopes: lists the same value more than once",
    ),
    (
        "empty any_of alternative",
        "tools:\n  a: {any_of: [[]]}\n",
        "4:16: tools.a.any_of[0]: is an empty list",
    ),
    (
        "deny that is not a boolean",
        "tools:\n  a: {deny: 'yes'}\n",
        '4:7: tools.a.deny: "yes" is not true or false',
    ),
    (
        "empty clients",
        "tools:\n  a: {scopes: [], clients: []}\n",
        "4:19: tools.a.clients: is an empty list",
    ),
    (
        "empty rule",
        "tools:\n  a: {}\n",
        "4:3: tools.a: a rule needs scopes (use [] for the baseline only), any_of or deny",
    ),
    (
        "deny: false alone",
        "tools:\n  a: {deny: false}\n",
        "4:3: tools.a: a rule needs scopes (use [] for the baseline only), any_of or deny",
    ),
    (
        "character class in a key",
        'tools:\n  "admin_[ab]": {scopes: []}\n',
        "4:3: tools.admin_[ab]: character classes ([...]) are not supported; use * and ?",
    ),
    (
        "character class in a subject",
        'tools:\n  a: {scopes: [], subjects: [ok, "u[1]"]}\n',
        "4:34: tools.a.subjects[1]: character classes ([...]) are not supported; use * and ?",
    ),
    (
        "empty key",
        'tools:\n  "": {scopes: []}\n',
        "4:3: tools.: a tool name or pattern must not be empty",
    ),
    (
        "duplicate key",
        "tools:\n  a: {scopes: []}\n  a: {deny: true}\n",
        "5:3: tools.a: duplicate key",
    ),
    (
        "tasks that is not a boolean",
        "tools:\n  a: {scopes: [], tasks: 'yes'}\n",
        '4:19: tools.a.tasks: "yes" is not true or false',
    ),
    (
        "tasks on a prompts rule",
        "prompts:\n  p: {scopes: [], tasks: true}\n",
        "4:19: prompts.p.tasks: tasks are a tools rule's setting (a tool call is a task)",
    ),
    (
        "YAML syntax error",
        "tools: [\n",
        "4:1: YAML syntax error: expected the node content, but found '<stream end>'",
    ),
]


class TestFileErrors:
    @pytest.mark.parametrize(
        ("body", "expected"), [pytest.param(*c[1:], id=c[0]) for c in FILE_ERRORS]
    )
    def test_each_mistake_is_reported_at_its_position(
        self, tmp_path: Path, body: str, expected: str
    ) -> None:
        path = write_text(tmp_path / "p.yaml", HEAD + body)
        assert problems_of(path) == [f"{path}:{expected}"]

    def test_a_wrong_version_and_an_empty_baseline_are_reported(self, tmp_path: Path) -> None:
        path = write_text(tmp_path / "p.yaml", "version: 2\nbaseline_scopes: []\n")
        assert problems_of(path) == [
            f"{path}:1:1: version: 2 is not 1 (the only allowed value)",
            f"{path}:2:1: baseline_scopes: is an empty list",
        ]

    def test_a_file_that_is_not_a_mapping_is_rejected(self, tmp_path: Path) -> None:
        path = write_text(tmp_path / "p.yaml", "- echo\n")
        assert problems_of(path) == [
            f"{path}:1:1: (top level): a policy file must be a mapping with version: 1 "
            "(docs/policy.md)"
        ]

    def test_an_empty_file_is_rejected(self, tmp_path: Path) -> None:
        path = write_text(tmp_path / "p.yaml", "")
        assert problems_of(path)[0].startswith(f"{path}:1:1: (top level): a policy file must")

    def test_a_missing_version_is_reported(self, tmp_path: Path) -> None:
        path = write_text(tmp_path / "p.yaml", "baseline_scopes: [a]\n")
        assert problems_of(path) == [f'{path}:1:1: (top level): required key "version" is missing']

    def test_a_missing_baseline_is_reported(self, tmp_path: Path) -> None:
        path = write_text(tmp_path / "p.yaml", "version: 1\ntools:\n  a: {scopes: []}\n")
        assert problems_of(path) == [
            f"{path}:1:1: baseline_scopes: required (in at least one policy file)"
        ]

    def test_every_problem_of_a_file_is_reported_at_once_in_line_order(
        self, tmp_path: Path
    ) -> None:
        path = write_text(
            tmp_path / "p.yaml",
            """
            version: 1
            baseline_scopes: [mcp:access]
            tools:
              a: {}
              b: {scopes: [x], rate_limit: fast}
              "c[1]": {scopes: []}
            extra: 1
            """,
        )
        assert [p.split(": ", 2)[0:2] for p in problems_of(path)] == [
            [f"{path}:4:3", "tools.a"],
            [f"{path}:5:20", "tools.b.rate_limit"],
            [f"{path}:6:3", "tools.c[1]"],
            [f"{path}:7:1", "extra"],
        ]


class TestPaths:
    def test_a_missing_path_is_reported(self, tmp_path: Path) -> None:
        assert problems_of(tmp_path / "nope.yaml") == [
            f"{tmp_path / 'nope.yaml'}: policy path not found"
        ]

    def test_an_empty_directory_is_reported(self, tmp_path: Path) -> None:
        (tmp_path / "notes.txt").write_text("not a policy")
        assert problems_of(tmp_path) == [
            f"{tmp_path}: no *.yaml or *.yml policy files in this directory"
        ]

    def test_no_paths_at_all_is_reported(self) -> None:
        assert problems_of() == ["policy: at least one policy file or directory is required"]

    def test_problems_of_several_files_are_all_reported(self, tmp_path: Path) -> None:
        first = write_text(tmp_path / "a.yaml", HEAD + "tools:\n  a: {}\n")
        second = write_text(tmp_path / "b.yaml", "version: 1\nbogus: 1\n")
        assert problems_of(first, second) == [
            f"{first}:4:3: tools.a: a rule needs scopes (use [] for the baseline only), any_of "
            "or deny",
            f"{second}:2:1: bogus: unknown key",
        ]


class TestMerge:
    def test_a_directory_merges_its_yaml_files_in_name_order(self, tmp_path: Path) -> None:
        folder = tmp_path / "policies"
        write_text(folder / "10-base.yaml", HEAD)
        write_text(folder / "20-docs.yml", "version: 1\ntools:\n  search: {scopes: [docs:read]}\n")
        write_text(folder / "30-admin.yaml", "version: 1\ntools:\n  'admin_*': {scopes: [admin]}\n")
        write_text(folder / ".hidden.yaml", "not: [valid")
        write_text(folder / "README.md", "ignored")
        policy = load_policy([folder])
        assert [Path(s).name for s in policy.sources] == [
            "10-base.yaml",
            "20-docs.yml",
            "30-admin.yaml",
        ]
        assert policy.decide_tool(who("mcp:access docs:read"), "search").allowed
        assert policy.decide_tool(who("mcp:access admin"), "admin_reset").rule == "admin_*"

    def test_files_and_directories_combine_and_a_file_named_twice_is_read_once(
        self, tmp_path: Path
    ) -> None:
        base = write_text(tmp_path / "base.yaml", HEAD + "tools:\n  echo: {scopes: []}\n")
        write_text(tmp_path / "more" / "x.yaml", "version: 1\ntools:\n  other: {scopes: []}\n")
        policy = load_policy([base, tmp_path / "more", base])
        assert sorted(policy.exact) == ["echo", "other"]
        assert len(policy.sources) == 2

    def test_files_that_state_the_same_baseline_in_another_order_agree(
        self, tmp_path: Path
    ) -> None:
        a = write_text(tmp_path / "a.yaml", "version: 1\nbaseline_scopes: [x, y]\n")
        b = write_text(tmp_path / "b.yaml", "version: 1\nbaseline_scopes: [y, x]\n")
        assert load_policy([a, b]).baseline_scopes == ("x", "y")

    def test_conflicts_between_files_are_all_reported_at_the_later_definition(
        self, tmp_path: Path
    ) -> None:
        a = write_text(
            tmp_path / "a.yaml",
            HEAD + "methods:\n  tools/list: {scopes: [x]}\ntools:\n  echo: {scopes: []}\n",
        )
        b = write_text(
            tmp_path / "b.yaml",
            """
            version: 1
            baseline_scopes: [other]
            methods:
              tools/list: {scopes: [y]}
            tools:
              echo: {scopes: [z]}
              fine: {scopes: []}
            """,
        )
        assert problems_of(a, b) == [
            f"{b}:2:1: baseline_scopes: differs from baseline_scopes at {a}:2:1; every file "
            "that states them must agree",
            f"{b}:4:3: methods.tools/list: also defined at {a}:4:3",
            f"{b}:6:3: tools.echo: also defined at {a}:6:3",
        ]


class TestListing:
    def test_the_default_is_allowed_and_step_up_changes_the_version(self, tmp_path: Path) -> None:
        plain = load_policy([write_text(tmp_path / "a.yaml", HEAD + "tools: {}\n")])
        stepped = load_policy(
            [write_text(tmp_path / "b.yaml", HEAD + "listing: step_up\ntools: {}\n")]
        )
        explicit = load_policy(
            [write_text(tmp_path / "c.yaml", HEAD + "listing: allowed\ntools: {}\n")]
        )
        assert (plain.listing, stepped.listing) == ("allowed", "step_up")
        assert plain.version == explicit.version != stepped.version

    def test_files_that_state_it_must_agree_and_the_value_is_checked(self, tmp_path: Path) -> None:
        a = write_text(tmp_path / "a.yaml", HEAD + "listing: step_up\n")
        b = write_text(tmp_path / "b.yaml", "version: 1\nlisting: allowed\n")
        assert problems_of(a, b) == [
            f"{b}:2:1: listing: differs from listing at {a}:3:1; every file that states it "
            "must agree"
        ]
        bad = write_text(tmp_path / "bad.yaml", HEAD + "listing: everything\n")
        assert problems_of(bad) == [
            f'{bad}:3:1: listing: "everything" is not one of: allowed, step_up'
        ]


class TestTies:
    def test_equally_specific_overlapping_patterns_are_an_error_with_an_example(
        self, tmp_path: Path
    ) -> None:
        path = write_text(
            tmp_path / "p.yaml",
            HEAD + "tools:\n  'admin_*': {scopes: [a]}\n  '*_reset': {scopes: [b]}\n",
        )
        assert problems_of(path) == [
            f"{path}:5:3: tools.*_reset: ties with tools.admin_* at {path}:4:3: both match "
            "'admin_reset' with the same specificity (literal characters: 6, '?': 0); add an "
            "exact rule or make one pattern more specific"
        ]

    def test_a_tie_across_files_is_an_error(self, tmp_path: Path) -> None:
        a = write_text(tmp_path / "a.yaml", HEAD + "tools:\n  'a?': {scopes: []}\n")
        b = write_text(tmp_path / "b.yaml", "version: 1\ntools:\n  '?b': {scopes: []}\n")
        (problem,) = problems_of(a, b)
        assert problem.startswith(
            f"{b}:3:3: tools.?b: ties with tools.a? at {a}:4:3: both match 'ab'"
        )

    @pytest.mark.parametrize(
        ("first", "second"),
        [
            ("a*b", "b*a"),  # same specificity, but no name starts and ends both ways
            ("a*", "b*"),  # same specificity, disjoint prefixes
            ("a*", "ab*"),  # different specificity: the longer one wins
            ("???", "*"),  # '?' count breaks the tie
            ("a?", "a*"),
        ],
        ids=["no common name", "disjoint", "more literals", "more '?'", "'?' vs '*'"],
    )
    def test_patterns_that_cannot_tie_are_accepted(
        self, tmp_path: Path, first: str, second: str
    ) -> None:
        path = write_text(
            tmp_path / "p.yaml",
            HEAD + f"tools:\n  '{first}': {{scopes: []}}\n  '{second}': {{scopes: []}}\n",
        )
        assert len(load_policy([path]).globs) == 2


class TestVersionHash:
    BODY = HEAD + "tools:\n  echo: {scopes: []}\n  notes: {scopes: [n], rate_limit: 3/minute}\n"

    def test_the_version_ignores_formatting_comments_key_order_and_the_file_split(
        self, tmp_path: Path
    ) -> None:
        one = load_policy([write_text(tmp_path / "one.yaml", self.BODY)])
        reformatted = write_text(
            tmp_path / "two" / "a.yaml",
            """
            # comment
            version: 1
            tools:
              notes:
                rate_limit: 3/minute
                scopes: [n]
            """,
        )
        write_text(tmp_path / "two" / "b.yaml", HEAD + "tools:\n  echo:\n    scopes: []\n")
        two = load_policy([reformatted.parent])
        assert one.version == two.version
        assert len(one.version) == 12 and int(one.version, 16) >= 0

    def test_tasks_are_off_by_default_and_part_of_the_version(self, tmp_path: Path) -> None:
        one = load_policy([write_text(tmp_path / "one.yaml", self.BODY)])
        assert not one.allows_tasks("notes")
        tasks = self.BODY.replace("rate_limit: 3/minute", "rate_limit: 3/minute, tasks: true")
        two = load_policy([write_text(tmp_path / "two.yaml", tasks)])
        assert two.allows_tasks("notes") and not two.allows_tasks("echo")
        assert one.version != two.version
        off = tasks.replace("tasks: true", "tasks: false")
        assert load_policy([write_text(tmp_path / "off.yaml", off)]).version == one.version

    def test_any_change_of_meaning_changes_the_version(self, tmp_path: Path) -> None:
        one = load_policy([write_text(tmp_path / "one.yaml", self.BODY)])
        changed = load_policy(
            [write_text(tmp_path / "two.yaml", self.BODY.replace("3/minute", "4/minute"))]
        )
        assert one.version != changed.version


class TestShippedFiles:
    def test_the_schema_copies_are_identical(self) -> None:
        shipped = (ROOT / "policies" / "schema.json").read_bytes()
        packaged = (ROOT / "gateway" / "schema" / "policy.schema.json").read_bytes()
        assert shipped == packaged

    def test_the_demo_policy_loads_and_decides_as_documented(self) -> None:
        policy = load_policy([ROOT / "gateway" / "dev" / "demo-policy.yaml"])
        assert policy.baseline_scopes == ("mcp:access",)
        reader = who("mcp:access notes:read")
        assert policy.decide_tool(reader, "notes_list").allowed
        assert policy.decide_tool(reader, "notes_add").missing_scopes == ("notes:write",)
        assert policy.decide_tool(who("mcp:access notes:write"), "notes_list").allowed
        assert policy.rate_limit("notes_add") == (30, 60.0)
        # What the demo's three backends list, as exposed (the vault's under vault__, the
        # accounts service's under accounts__).
        demo_tools = [tool["name"] for tool in LISTED] + ["vault__" + VAULT_WHOAMI["name"]]
        demo_tools += ["accounts__" + tool["name"] for tool in ACCOUNTS_TOOLS]
        assert unmatched_rules(policy, demo_tools) == []
        assert policy.decide_tool(reader, "notes_summarize").allowed
        assert policy.decide_tool(reader, "notes_compose").missing_scopes == ("notes:write",)
        assert policy.decide_tool(reader, "whoami").allowed
        assert policy.decide_tool(reader, "vault__whoami").allowed
        assert policy.decide_tool(reader, "accounts__whoami").allowed


class TestBounds:
    @pytest.mark.parametrize(
        ("rule", "ok"),
        [
            ("{scopes: [], max_concurrency: 100000}", True),
            ("{scopes: [], max_concurrency: 100001}", False),
            ("{scopes: [], rate_limit: 999999999/hour}", True),
            ("{scopes: [], rate_limit: 1000000000/hour}", False),
            ("{scopes: [], rate_limit: 1/second}", True),
        ],
        ids=["concurrency at limit", "concurrency past", "rate at limit", "rate past", "rate 1"],
    )
    def test_numbers_are_accepted_at_the_bound_and_rejected_one_past(
        self, tmp_path: Path, rule: str, ok: bool
    ) -> None:
        path = write_text(tmp_path / "p.yaml", HEAD + f"tools:\n  a: {rule}\n")
        if ok:
            load_policy([path])
        else:
            assert len(problems_of(path)) == 1

    def test_a_key_of_256_characters_is_accepted_and_257_rejected(self, tmp_path: Path) -> None:
        ok = write_text(tmp_path / "ok.yaml", HEAD + f"tools:\n  {'a' * 255}*: {{scopes: []}}\n")
        assert len(load_policy([ok]).globs) == 1
        long_key = "a" * 257
        bad = write_text(tmp_path / "bad.yaml", HEAD + f"tools:\n  {long_key}: {{scopes: []}}\n")
        assert problems_of(bad) == [f"{bad}:4:3: tools.{long_key}: longer than 256 characters"]
