"""The resource URI normal form the gateway decides on and forwards (``gateway/policy/uri.py``).

What has one meaning is brought to one spelling (RFC 3986 §6.2.2), the wrapped URI of an
``mcp-gw://<backend>/`` form on its own; what has not (an encoded ``/`` or ``\\``, a backslash,
``//``, ``..`` above the root, a control character) is refused as ambiguous, at the front door
and in a policy key. Properties: normalising is idempotent and never yields an ambiguous URI,
and the URI a federation routes to a backend is exactly the wrapped part of the decided one.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.backend.federation import FederatedBackend, gateway_uri, upstream_uri
from gateway.commands.cli import main
from gateway.errors import AmbiguousResourceUri, ConfigError
from gateway.outbound.client import Outbound
from gateway.policy import uri_patterns as uri_module
from gateway.policy.policy_loader import load_policy
from gateway.policy.uri import normalize_uri, resource_uri
from gateway.policy.uri_patterns import compile_pattern, template_pattern
from tests.support.backend_member import backend_member
from tests.support.policy import policy_from, who, write_text

AMBIGUOUS = [
    "file:///docs/private%2Fkeys",
    "file:///docs/private%2fkeys",
    "file:///docs/private%5Ckeys",
    "file:///docs/private\\keys",
    "file:///docs//private/keys",
    "file:////docs",
    "file:///../docs",
    "file:///docs/a/../../..",
    "file:///docs/%2e%2e/%2E%2E/x",
    "urn:a/../..",
    "file:///docs/a%00",
    "file:///docs/a%1f",
    "file:///docs/a?x=%7F",
    "file:///docs/a\x00",
    "file:///docs/a\tb",
    "https://host%2Fevil/x",
    "mcp-gw://alpha/rt://secret/../public/x",
    "mcp-gw://alpha/rt://secret/%2e%2E/x",
    "mcp-gw://alpha/file:///docs//x",
    "MCP-GW://alpha/rt://a/b%2Fc",
]


class TestTheNormalForm:
    @pytest.mark.parametrize(
        ("raw", "normal"),
        [
            ("mcp-gw://Alpha/RT://Secret/a/../b", "mcp-gw://alpha/rt://secret/b"),
            ("MCP-GW://alpha/file:///docs/%7e/./x?q=%41", "mcp-gw://alpha/file:///docs/~/x?q=A"),
            ("mcp-gw://alpha/rt://h/a/..", "mcp-gw://alpha/rt://h/"),
            ("file:///docs/a/", "file:///docs/a/"),
            ("file:///docs/a?path=%2f%2F//..", "file:///docs/a?path=%2F%2F//.."),
            ("file:///docs/a/b/../../c", "file:///docs/c"),
        ],
    )
    def test_one_meaning_one_spelling(self, raw: str, normal: str) -> None:
        assert normalize_uri(raw) == resource_uri(raw) == normal

    @pytest.mark.parametrize("raw", AMBIGUOUS)
    def test_what_has_no_single_meaning_is_refused(self, raw: str) -> None:
        assert normalize_uri(raw) is None
        with pytest.raises(AmbiguousResourceUri):
            resource_uri(raw)

    @pytest.mark.parametrize(
        "raw",
        [
            "",
            "no-scheme",
            "file:///a#f",
            "file:///a%zz",
            "file:///a b",
            "file:///\u00e9",
            "mcp-gw://alpha/",
            "mcp-gw://alpha",
            "mcp-gw://alpha/no-scheme",
        ],
    )
    def test_what_is_no_uri_has_no_rule_and_is_not_ambiguous(self, raw: str) -> None:
        assert resource_uri(raw) is None

    def test_an_ambiguous_key_is_a_load_error_at_its_position(self, tmp_path: Path) -> None:
        path = write_text(
            tmp_path / "p.yaml",
            'version: 1\nbaseline_scopes: [a]\nresources:\n  "file:///docs//x": {scopes: []}\n'
            '  "file:///a%2F*": {scopes: []}\n  "mcp-gw://b/rt://h/../../x": {scopes: []}\n',
        )
        with pytest.raises(ConfigError) as caught:
            load_policy([path])
        assert [p.removeprefix(f"{path}:") for p in caught.value.problems] == [
            "4:3: resources.file:///docs//x: ambiguous: an empty path segment (//)",
            "5:3: resources.file:///a%2F*: ambiguous: an encoded / (%2F) in the authority or path",
            "6:3: resources.mcp-gw://b/rt://h/../../x: "
            "ambiguous: a dot segment (..) above the root of the path",
        ]

    def test_explain_says_what_the_gateway_makes_of_a_uri(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        path = write_text(
            tmp_path / "p.yaml",
            'version: 1\nbaseline_scopes: [a]\nresources:\n  "file:///docs/**": {scopes: []}\n',
        )
        base = ["policy", "explain", "--policy", str(path), "--scopes", "a", "--json"]
        assert main([*base, "--resource", "file:///docs//private/x"]) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["results"][0]["decision"] == "hidden"
        assert report["warnings"] == [
            "ambiguous URI: refused before any rule (-32602, ambiguous_resource_uri)"
        ]
        assert main([*base, "--resource", "file:///docs/a"]) == 0
        assert json.loads(capsys.readouterr().out)["warnings"] == []

    def test_wrapped_patterns_keep_their_wildcards(self) -> None:
        for key in ("mcp-gw://wiki/**", "mcp-gw://wiki/*://h/**", "mcp-gw://wiki/docs://*/x"):
            compiled, reason = compile_pattern(key)
            assert compiled is not None and compiled.pattern == key, reason
        wide = template_pattern("mcp-gw://docs/{+path}")
        assert wide is not None and wide.matches("mcp-gw://docs/rt://h/a/b")

    def test_a_policy_decides_on_the_wrapped_uri_s_own_authority(self, tmp_path: Path) -> None:
        policy = policy_from(
            'version: 1\nbaseline_scopes: [a]\nresources:\n  "mcp-gw://alpha/**": {scopes: []}\n'
            '  "mcp-gw://alpha/rt://secret/**": {scopes: [s]}\n',
            tmp_path,
        )
        caller = who("a")
        assert policy.resource_uri("mcp-gw://Alpha/RT://Secret/x") == "mcp-gw://alpha/rt://secret/x"
        assert not policy.decide_resource(caller, "mcp-gw://alpha/rt://secret/a/../x").allowed
        assert policy.decide_resource(caller, "mcp-gw://alpha/rt://public/x").allowed


PIECES = st.sampled_from(
    [
        "a",
        "B",
        "/",
        "//",
        ".",
        "..",
        "%2e",
        "%2E",
        "%2F",
        "%2f",
        "%5c",
        "\\",
        "%7e",
        "%41",
        "?",
        "%",
        "%zz",
        "*",
        "**",
        ":",
        "rt://",
        "file:///",
        "@",
        "%00",
        " ",
        "~",
        "%25",
    ]
)
HEADS = st.sampled_from(
    [
        "file://",
        "FILE:///",
        "rt://Host",
        "urn:",
        "mcp-gw://alpha/",
        "MCP-GW://Beta/rt://H",
        "mcp-gw://alpha/file:///",
        "x:",
    ]
)


@settings(max_examples=2000, deadline=None)
@given(HEADS, st.lists(PIECES, max_size=10))
def test_normalising_is_idempotent_and_never_ambiguous(head: str, pieces: list[str]) -> None:
    raw = head + "".join(pieces)
    normal = normalize_uri(raw)
    if normal is None:
        return
    assert normalize_uri(normal) == normal
    assert resource_uri(normal) == normal  # never ambiguous once normal
    assert "\\" not in normal and "%2F" not in normal.partition("?")[0]


@settings(max_examples=1000, deadline=None)
@given(
    st.sampled_from(["file:///", "rt://h/", "mcp-gw://alpha/", "mcp-gw://a/rt://h/"]),
    st.lists(PIECES, max_size=10),
)
def test_a_keys_normal_form_is_its_own(head: str, pieces: list[str]) -> None:
    compiled, _ = compile_pattern(head + "".join(pieces))
    if compiled is None:
        return
    again, reason = compile_pattern(compiled.pattern)
    assert again is not None and again.pattern == compiled.pattern, reason


async def test_a_federation_forwards_exactly_the_wrapped_part_of_the_decided_uri() -> None:
    """Property: for any URI a client sends, the one the policy decides on is the wrapper of
    exactly what the backend is sent, and that is its own normal form."""
    outbound = Outbound()
    try:
        fed = FederatedBackend(
            [backend_member("alpha", outbound), backend_member("beta", outbound)]
        )

        @settings(max_examples=1000, deadline=None)
        @given(HEADS, st.lists(PIECES, max_size=10))
        def check(head: str, pieces: list[str]) -> None:
            try:
                decided = resource_uri(head + "".join(pieces))
            except AmbiguousResourceUri:
                return
            route = fed.route_uri(decided) if decided is not None else None
            if decided is None or route is None:
                return
            backend, sent = route
            assert gateway_uri(backend, sent) == decided
            assert upstream_uri(decided) == (backend, sent)
            assert normalize_uri(sent) == sent

        check()
    finally:
        await outbound.close()


_SYMBOLS = st.sampled_from(["a", "b", "/", "?", "%", "2", "F", "*", "**"])


@given(st.lists(_SYMBOLS, max_size=8), st.text(alphabet="ab/?%2F", max_size=12))
@settings(max_examples=600)
def test_the_linear_automaton_matches_exactly_what_the_regex_does(
    symbols: list[str], text: str
) -> None:
    """Patterns with two or more wildcards run on a bit-set automaton instead of a regex that
    can backtrack (issue 43 item 1's finding, in resource patterns); both must agree."""
    tokens = uri_module._tokenize("".join(symbols).replace("***", "**"))
    automaton = uri_module._Automaton(tokens)
    assert automaton.matches(text) == (uri_module._compile(tokens).fullmatch(text) is not None)


def test_many_wildcards_over_a_long_uri_stay_linear() -> None:
    """``**a**a**a**b`` over a 2,000-character URI: the regex took minutes (quartic)."""
    pattern, reason = uri_module.compile_pattern("file:///**a**a**a**b")
    assert pattern is not None, reason
    uri = "file:///" + "a" * 2000
    assert not pattern.matches(uri)
    assert pattern.matches(uri + "b")
