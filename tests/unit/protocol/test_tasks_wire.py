"""The tasks extension on the wire: the ladder's task requests, a backend's task checked and
rebuilt, the client's task (SEP-2663; ext-tasks ``specification/draft/tasks.md``)."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.config import ServerInfo
from gateway.errors import GatewayError, HeaderMismatch, InvalidParams, MethodNotFound
from gateway.protocol.classify import classify
from gateway.protocol.input_required import known_kind_responses
from gateway.protocol.tasks_extension import (
    TASKS_EXTENSION,
    InvalidTask,
    client_task,
    declares_tasks,
    parse_task,
    without_tasks,
)
from tests.support.protocol import lookup, modern_body, modern_headers

TASK: dict[str, Any] = {
    "taskId": "786512e2",
    "status": "working",
    "createdAt": "2025-11-25T10:30:00Z",
    "lastUpdatedAt": "2025-11-25T10:40:00Z",
    "ttlMs": 60000,
    "pollIntervalMs": 5000,
}
FORM = {
    "method": "elicitation/create",
    "params": {
        "mode": "form",
        "message": "Name?",
        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
    },
}


class TestTheLadder:
    @pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
    def test_a_task_request_carries_its_task_id(self, method: str) -> None:
        body = modern_body(method, taskId="t1.abc", inputResponses={"k": {"action": "decline"}})
        message = classify(modern_headers(method, "t1.abc"), body, lookup(()))
        assert not isinstance(message, tuple)
        assert message.task_id == "t1.abc"
        if method == "tasks/update":
            assert message.input_responses == {"k": {"action": "decline"}}

    @pytest.mark.parametrize("name", [None, "t1.abd", "T1.ABC", " t1.abcx"])
    def test_mcp_name_must_equal_the_task_id(self, name: str | None) -> None:
        body = modern_body("tasks/get", taskId="t1.abc")
        with pytest.raises(HeaderMismatch):
            classify(modern_headers("tasks/get", name), body, lookup(()))

    def test_surrounding_white_space_of_mcp_name_is_not_part_of_it(self) -> None:
        body = modern_body("tasks/get", taskId="t1.abc")
        message = classify(modern_headers("tasks/get", " t1.abc "), body, lookup(()))
        assert not isinstance(message, tuple) and message.task_id == "t1.abc"

    def test_an_update_without_input_responses_is_invalid_params(self) -> None:
        body = modern_body("tasks/update", taskId="t1.abc")
        with pytest.raises(InvalidParams):
            classify(modern_headers("tasks/update", "t1.abc"), body, lookup(()))

    @pytest.mark.parametrize("method", ["tasks/result", "tasks/list"])
    def test_the_removed_methods_do_not_exist(self, method: str) -> None:
        body = modern_body(method, taskId="x")
        with pytest.raises(GatewayError) as caught:
            classify(modern_headers(method), body, lookup(()))
        assert isinstance(caught.value, MethodNotFound)


class TestCapabilities:
    def test_declared_only_as_an_object_under_extensions(self) -> None:
        assert declares_tasks({"extensions": {TASKS_EXTENSION: {}}})
        assert not declares_tasks({"extensions": {TASKS_EXTENSION: True}})
        assert not declares_tasks({"tasks": {}})  # the 2025-11-25 experimental slot is not it
        assert not declares_tasks({})

    def test_withheld_from_a_declaration_keeping_everything_else(self) -> None:
        caps = {"elicitation": {}, "extensions": {TASKS_EXTENSION: {}, "x/y": {"a": 1}}}
        assert without_tasks(caps) == {"elicitation": {}, "extensions": {"x/y": {"a": 1}}}
        assert without_tasks({"extensions": {TASKS_EXTENSION: {}}}) == {}
        assert caps["extensions"][TASKS_EXTENSION] == {}  # the original is untouched


class TestParseTask:
    def test_a_created_task_keeps_the_task_members_only(self) -> None:
        task = parse_task({**TASK, "resultType": "task", "result": {}, "x": 1}, detailed=False)
        assert (task.task_id, task.status, task.ttl_ms, task.poll_interval_ms) == (
            "786512e2",
            "working",
            60000,
            5000,
        )
        assert task.result is None

    @pytest.mark.parametrize(
        "change",
        [
            {"taskId": ""},
            {"taskId": "x" * 257},
            {"taskId": 7},
            {"status": "done"},
            {"createdAt": 5},
            {"lastUpdatedAt": "x" * 65},
            {"ttlMs": -1},
            {"ttlMs": 1.5},
            {"ttlMs": True},
            {"pollIntervalMs": 0},
            {"pollIntervalMs": "5"},
        ],
    )
    def test_a_task_breaking_the_shape_is_refused(self, change: dict[str, Any]) -> None:
        with pytest.raises(InvalidTask):
            parse_task({**TASK, **change}, detailed=False)

    def test_ttl_is_required_but_may_be_null(self) -> None:
        assert parse_task({**TASK, "ttlMs": None}, detailed=False).ttl_ms is None
        without = {k: v for k, v in TASK.items() if k != "ttlMs"}
        with pytest.raises(InvalidTask):
            parse_task(without, detailed=False)

    def test_a_failed_task_keeps_the_code_and_loses_the_words(self) -> None:
        error = {"code": -32000, "message": "password hunter2", "data": {"x": 1}}
        raw = {**TASK, "status": "failed", "statusMessage": "db-7 down", "error": error}
        task = parse_task(raw, detailed=True)
        assert task.error == {"code": -32000, "message": "Upstream task failed"}
        odd = parse_task({**raw, "error": {"code": "x"}}, detailed=True)
        assert odd.error == {"code": -32603, "message": "Upstream task failed"}

    def test_input_requests_are_checked_like_an_input_rounds(self) -> None:
        raw = {**TASK, "status": "input_required", "inputRequests": {"k": FORM}}
        assert parse_task(raw, detailed=True).input_requests == {"k": FORM}
        for bad in ({"k": {"method": "tools/call"}}, {"k": {**FORM, "params": {}}}, []):
            with pytest.raises(InvalidTask):
                parse_task({**raw, "inputRequests": bad}, detailed=True)

    def test_a_completed_task_needs_its_result(self) -> None:
        with pytest.raises(InvalidTask):
            parse_task({**TASK, "status": "completed"}, detailed=True)


class TestClientTask:
    def test_the_handle_replaces_the_id_and_the_bounds_apply(self) -> None:
        task = parse_task({**TASK, "ttlMs": None, "pollIntervalMs": 50}, detailed=False)
        out = client_task(
            task,
            "t1.h",
            result_type="task",
            lifetime_ms=3_600_000,
            min_poll_ms=1000,
            server=ServerInfo(),
        )
        assert out["taskId"] == "t1.h" and out["resultType"] == "task"
        assert out["ttlMs"] == 3_600_000 and out["pollIntervalMs"] == 1000
        assert "786512e2" not in str(out)
        longer = parse_task({**TASK, "ttlMs": 10**9}, detailed=False)
        out = client_task(
            longer,
            "t1.h",
            result_type="complete",
            lifetime_ms=60_000,
            min_poll_ms=1000,
            server=ServerInfo(),
        )
        assert out["ttlMs"] == 60_000 and out["pollIntervalMs"] == 5000


def test_an_update_keeps_only_answers_some_kind_could_have_asked_for() -> None:
    answers = {
        "elicit": {"action": "accept", "content": {"name": "A"}},
        "roots": {"roots": [{"uri": "file:///x"}]},
        "junk": {"ignored": True},
        "": {"action": "decline"},
        "x" * 65: {"action": "decline"},
    }
    assert known_kind_responses(answers) == {
        "elicit": {"action": "accept", "content": {"name": "A"}},
        "roots": {"roots": [{"uri": "file:///x"}]},
    }
