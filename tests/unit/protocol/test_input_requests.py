"""Input rounds on the wire: upstream ``inputRequests`` and client ``inputResponses`` checked
against the official 2026-07-28 schema definitions; capabilities a round needs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import pytest

from gateway.errors import InvalidRequestState
from gateway.protocol.input_required import (
    MAX_DEPTH,
    MAX_KEY_CHARS,
    MAX_REQUESTS,
    InvalidInputRequired,
    check_input_responses,
    parse_input_required,
    required_capabilities,
)
from tests.support.input_upstream import asking
from tests.support.schemas import SPEC_DIR
from tests.support.scripts import load_script

ROOT = Path(__file__).resolve().parents[3]

FORM = {
    "method": "elicitation/create",
    "params": {
        "mode": "form",
        "message": "Delete /tmp/x?",
        "requestedSchema": {
            "type": "object",
            "properties": {"confirm": {"type": "boolean"}},
            "required": ["confirm"],
        },
    },
}
URL = {
    "method": "elicitation/create",
    "params": {"mode": "url", "message": "Sign in", "url": "https://auth.example.test/connect"},
}
SAMPLE = {
    "method": "sampling/createMessage",
    "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": "Summarise"}}],
        "maxTokens": 200,
    },
}
ROOTS = {"method": "roots/list"}


def _round(requests: dict[str, Any] | None = None, state: str | None = "s") -> dict[str, Any]:
    return asking(requests, state)


def _reason(result: dict[str, Any], max_state_bytes: int = 1024) -> str:
    with pytest.raises(InvalidInputRequired) as info:
        parse_input_required(result, max_state_bytes=max_state_bytes)
    return info.value.reason


def test_the_packaged_schema_subset_is_a_fresh_extraction_of_the_official_schema() -> None:
    module = load_script("extract_input_schema")
    official = json.loads((SPEC_DIR / "2026-07-28" / "schema.json").read_text(encoding="utf-8"))
    packaged = ROOT / "gateway" / "schema" / "mcp-input-requests.schema.json"
    assert packaged.read_text(encoding="utf-8") == module.render(official), (
        "run: .venv/bin/python scripts/extract_input_schema.py"
    )


class TestUpstreamRounds:
    def test_the_three_kinds_are_rebuilt_with_method_and_params_only(self) -> None:
        found = parse_input_required(
            _round({"a": {**FORM, "jsonrpc": "2.0", "id": 9}, "b": SAMPLE, "c": ROOTS}),
            max_state_bytes=1024,
        )
        assert found.requests == {"a": FORM, "b": SAMPLE, "c": ROOTS}
        assert found.kinds == {
            "a": "elicitation/create",
            "b": "sampling/createMessage",
            "c": "roots/list",
        }
        assert found.state == "s"

    def test_a_copy_not_the_parsed_objects(self) -> None:
        raw = {"a": json.loads(json.dumps(FORM))}
        found = parse_input_required(_round(raw), max_state_bytes=1024)
        raw["a"]["params"]["message"] = "changed later"
        assert found.requests["a"]["params"]["message"] == "Delete /tmp/x?"

    def test_state_only_and_requests_only_are_both_rounds(self) -> None:
        assert parse_input_required(_round(None, "s"), max_state_bytes=8).requests == {}
        assert parse_input_required(_round({"c": ROOTS}, None), max_state_bytes=8).state is None

    @pytest.mark.parametrize(
        ("result", "reason"),
        [
            (_round(None, None), "neither inputRequests nor requestState"),
            (_round({}, None), "neither inputRequests nor requestState"),
            (_round([ROOTS]), "inputRequests not an object"),  # type: ignore[arg-type]
            (_round({"a": {"method": "tools/call"}}), "inputRequest kind"),
            (_round({"a": {"method": "ping"}}), "inputRequest kind"),
            (_round({"a": {"params": {}}}), "inputRequest kind"),
            (_round({"a": "roots/list"}), "inputRequest not an object"),
            (_round({"a": {"method": "elicitation/create"}}), "inputRequest schema"),
            (_round({"a": {**SAMPLE, "params": {"maxTokens": 5}}}), "inputRequest schema"),
            (
                _round({"a": {**URL, "params": {**URL["params"], "url": "not a url"}}}),
                "inputRequest schema",
            ),
            (
                _round({"a": {**URL, "params": {**URL["params"], "url": "javascript:alert(1)"}}}),
                "elicitation url scheme",
            ),
            ({"inputRequests": {"a": ROOTS}, "requestState": 7}, "requestState not a string"),
            (_round({"": ROOTS}), "inputRequests key"),
            (_round({"a\nb": ROOTS}), "inputRequests key"),
            (_round({"k" * (MAX_KEY_CHARS + 1): ROOTS}), "inputRequests key"),
        ],
    )
    def test_anything_else_is_not_relayed(self, result: dict[str, Any], reason: str) -> None:
        assert _reason(result) == reason

    def test_request_count_key_length_and_state_size_at_and_past_the_limits(self) -> None:
        at = {f"r{i}": ROOTS for i in range(MAX_REQUESTS)}
        assert len(parse_input_required(_round(at), max_state_bytes=8).requests) == MAX_REQUESTS
        assert _reason(_round({**at, "one-more": ROOTS})) == "too many inputRequests"
        parse_input_required(_round({"k" * MAX_KEY_CHARS: ROOTS}), max_state_bytes=8)
        parse_input_required(_round(None, "é" * 4), max_state_bytes=8)  # 8 UTF-8 bytes
        assert _reason(_round(None, "é" * 4 + "x"), 8) == "requestState over max_state_bytes"

    def test_nesting_at_the_depth_cap_passes_one_level_more_does_not(self) -> None:
        def nested(levels: int) -> dict[str, Any]:
            deep: Any = "leaf"
            for _ in range(levels):
                deep = {"x": deep}
            # request (1) > params (2) > metadata (3) ... : levels + 2 in all
            return {"a": {**SAMPLE, "params": {**SAMPLE["params"], "metadata": deep}}}

        parse_input_required(_round(nested(MAX_DEPTH - 2)), max_state_bytes=8)
        assert _reason(_round(nested(MAX_DEPTH - 1))) == "inputRequest too deep"


class TestCapabilities:
    def test_what_the_client_did_not_declare_is_required(self) -> None:
        requests = {"a": FORM, "b": SAMPLE, "c": ROOTS, "d": URL}
        assert required_capabilities(requests, {}) == {
            "elicitation": {"form": {}, "url": {}},
            "roots": {},
            "sampling": {},
        }
        declared = {"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}}
        assert required_capabilities(requests, declared) == {}

    def test_an_empty_elicitation_object_declares_form_only(self) -> None:
        assert required_capabilities({"a": FORM}, {"elicitation": {}}) == {}
        assert required_capabilities({"d": URL}, {"elicitation": {}}) == {
            "elicitation": {"url": {}}
        }
        assert required_capabilities({"a": FORM}, {"elicitation": {"url": {}}}) == {
            "elicitation": {"form": {}}
        }
        # No mode is form mode (client/elicitation.mdx).
        no_mode = {"method": "elicitation/create", "params": {"message": "m"}}
        assert required_capabilities({"a": no_mode}, {"elicitation": {"url": {}}}) == {
            "elicitation": {"form": {}}
        }

    def test_tool_enabled_sampling_needs_sampling_tools(self) -> None:
        with_tools = {**SAMPLE, "params": {**SAMPLE["params"], "tools": []}}
        assert required_capabilities({"b": with_tools}, {"sampling": {}}) == {
            "sampling": {"tools": {}}
        }
        assert required_capabilities({"b": with_tools}, {"sampling": {"tools": {}}}) == {}


class TestClientAnswers:
    ASKED: ClassVar[dict[str, str]] = {
        "a": "elicitation/create",
        "b": "sampling/createMessage",
        "c": "roots/list",
    }
    GOOD: ClassVar[dict[str, Any]] = {
        "a": {"action": "accept", "content": {"confirm": True}},
        "b": {
            "role": "assistant",
            "content": {"type": "text", "text": "A summary."},
            "model": "demo-model",
            "stopReason": "endTurn",
        },
        "c": {"roots": [{"uri": "file:///home/erin/project", "name": "project"}]},
    }

    def test_valid_answers_pass_and_unasked_keys_are_dropped(self) -> None:
        answers = {**self.GOOD, "extra": {"action": "accept"}, "other": 1}
        assert check_input_responses(answers, self.ASKED) == self.GOOD

    def test_partial_answers_pass_the_upstream_may_ask_again(self) -> None:
        assert check_input_responses({"a": {"action": "decline"}}, self.ASKED) == {
            "a": {"action": "decline"}
        }

    @pytest.mark.parametrize(
        ("key", "answer"),
        [
            ("a", 12345),
            ("a", None),
            ("a", {"action": "maybe"}),
            ("a", {"action": "accept", "content": {"nested": {"no": "objects"}}}),
            ("b", {"role": "assistant", "content": {"type": "text", "text": "x"}}),  # no model
            ("b", {"action": "accept"}),  # an elicitation answer to a sampling request
            ("c", {"roots": [{"uri": "not a uri"}]}),
            ("c", {"roots": "file:///"}),
        ],
    )
    def test_an_answer_of_the_wrong_shape_is_refused(self, key: str, answer: Any) -> None:
        with pytest.raises(InvalidRequestState) as info:
            check_input_responses({key: answer}, self.ASKED)
        assert info.value.reason == "responses_invalid"
        assert info.value.body_message() == "Invalid inputResponses"
