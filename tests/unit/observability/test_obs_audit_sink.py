"""AuditSink: stdout, rotating file and off sinks; argument shapes never carry values."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path

import pytest

from gateway.config import AuditConfig
from gateway.observability.audit import AUDIT_LOGGER, AuditSink
from gateway.observability.audit_records import argument_shape
from tests.support.audit_record import audit_event


class TestFileSink:
    def test_events_go_to_the_file_one_json_object_per_line(self, tmp_path: Path) -> None:
        path = tmp_path / "audit.log"
        sink = AuditSink.from_config(AuditConfig(sink="file", path=str(path)))
        try:
            sink.emit(audit_event(1), 1_796_000_000.0)
            sink.emit(audit_event(2), 1_796_000_001.5)
        finally:
            sink.close()
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        assert [line["request_id"] for line in lines] == ["req-0001", "req-0002"]
        assert lines[1]["ts"] == "2026-11-30T00:53:21.500Z"

    def test_the_file_rotates_at_max_bytes_and_keeps_only_the_configured_backups(
        self, tmp_path: Path
    ) -> None:
        path = tmp_path / "audit.log"
        line_bytes = len(audit_event(1).to_json(0.0)) + 1
        config = AuditConfig(sink="file", path=str(path), max_bytes=line_bytes * 3, backups=2)
        sink = AuditSink.from_config(config)
        try:
            for n in range(20):
                sink.emit(audit_event(n), 1_796_000_000.0)
        finally:
            sink.close()
        files = sorted(p.name for p in tmp_path.iterdir())
        assert files == ["audit.log", "audit.log.1", "audit.log.2"]
        for name in files:
            content = (tmp_path / name).read_text()
            assert len(content.encode()) <= line_bytes * 3
            for line in content.splitlines():
                json.loads(line)
        newest = [json.loads(line) for line in path.read_text().splitlines()]
        assert newest[-1]["request_id"] == "req-0019"

    def test_an_unwritable_path_fails_at_startup(self, tmp_path: Path) -> None:
        with pytest.raises(OSError):
            AuditSink.from_config(
                AuditConfig(sink="file", path=str(tmp_path / "missing-dir" / "audit.log"))
            )

    def test_a_file_sink_without_a_path_is_refused(self) -> None:
        with pytest.raises(ValueError, match=r"audit\.path"):
            AuditSink.from_config(AuditConfig(sink="file"))


class TestStreamSinks:
    def test_the_stdout_sink_writes_only_the_json_line(self) -> None:
        stream = io.StringIO()
        sink = AuditSink.from_config(AuditConfig(sink="stdout"), stream=stream)
        sink.emit(audit_event(7), 1_796_000_000.0)
        sink.close()
        (line,) = stream.getvalue().splitlines()
        assert json.loads(line)["event"] == "tool_call"

    def test_audit_events_do_not_reach_the_root_logger(self) -> None:
        seen: list[logging.LogRecord] = []

        class Collect(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                seen.append(record)

        root = logging.getLogger()
        collector = Collect()
        root.addHandler(collector)
        try:
            sink = AuditSink.from_config(AuditConfig(sink="stdout"), stream=io.StringIO())
            sink.emit(audit_event(1), 0.0)
            sink.close()
        finally:
            root.removeHandler(collector)
        assert seen == []
        assert logging.getLogger(AUDIT_LOGGER).propagate is False

    def test_the_off_sink_is_disabled_and_emit_is_a_no_op(self) -> None:
        sink = AuditSink.from_config(AuditConfig(sink="off"))
        sink.emit(audit_event(1), 0.0)
        assert not sink.enabled
        assert logging.getLogger(AUDIT_LOGGER).handlers == []


class TestArgumentShape:
    def test_only_keys_and_json_type_names_are_kept(self) -> None:
        shape = argument_shape(
            {"q": "secret", "n": 1, "x": 1.5, "b": True, "z": None, "o": {"k": "v"}, "a": [1]}
        )
        assert shape == {
            "q": "string",
            "n": "integer",
            "x": "number",
            "b": "boolean",
            "z": "null",
            "o": "object",
            "a": "array",
        }

    def test_64_keys_are_kept_and_the_65th_marks_truncation(self) -> None:
        assert len(argument_shape({f"k{i}": i for i in range(64)})) == 64
        shape = argument_shape({f"k{i}": i for i in range(65)})
        assert len(shape) == 65 and shape["..."] == "truncated"

    def test_long_keys_are_cut_to_64_characters(self) -> None:
        assert list(argument_shape({"k" * 200: 1})) == ["k" * 64]
