"""W3C Trace Context parsing, span minting and tracestate limits (gateway.observability.tracing)."""

from __future__ import annotations

import pytest

from gateway.observability.tracing import (
    TRACESTATE_MAX_CHARS,
    TraceParent,
    child_traceparent,
    new_span_id,
    new_trace,
    parse_traceparent,
    sanitize_tracestate,
    trace_context,
)

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN = "00f067aa0ba902b7"
VALID = f"00-{TRACE}-{SPAN}-01"


class TestParseTraceparent:
    def test_a_valid_version_00_header_is_parsed_into_its_fields(self) -> None:
        assert parse_traceparent(VALID) == TraceParent(TRACE, SPAN, 1)

    def test_an_unsampled_header_keeps_flags_zero(self) -> None:
        assert parse_traceparent(f"00-{TRACE}-{SPAN}-00") == (TRACE, SPAN, 0)

    @pytest.mark.parametrize(
        "value",
        [
            pytest.param(None, id="absent"),
            pytest.param("", id="empty"),
            pytest.param(f"ff-{TRACE}-{SPAN}-01", id="version ff"),
            pytest.param(f"0g-{TRACE}-{SPAN}-01", id="version not hex"),
            pytest.param(f"0-{TRACE}-{SPAN}-01", id="version one digit"),
            pytest.param(VALID.upper(), id="uppercase everything"),
            pytest.param(f"00-{TRACE.upper()}-{SPAN}-01", id="uppercase trace-id"),
            pytest.param(f"00-{TRACE}-{SPAN.upper()}-01", id="uppercase parent-id"),
            pytest.param(f"00-{'0' * 32}-{SPAN}-01", id="all-zero trace-id"),
            pytest.param(f"00-{TRACE}-{'0' * 16}-01", id="all-zero parent-id"),
            pytest.param(f"00-{TRACE[:-1]}-{SPAN}-01", id="trace-id 31 chars"),
            pytest.param(f"00-{TRACE}0-{SPAN}-01", id="trace-id 33 chars"),
            pytest.param(f"00-{TRACE}-{SPAN[:-1]}-01", id="parent-id 15 chars"),
            pytest.param(f"00-{TRACE}-{SPAN}0-01", id="parent-id 17 chars"),
            pytest.param(f"00-{TRACE}-{SPAN}-1", id="flags one digit"),
            pytest.param(f"00-{TRACE}-{SPAN}-001", id="flags three digits"),
            pytest.param(f"00-{TRACE}-{SPAN}-01-extra", id="version 00 with a trailing field"),
            pytest.param(f" {VALID}", id="leading space"),
            pytest.param(f"00_{TRACE}_{SPAN}_01", id="wrong separator"),
            pytest.param(f"00-{TRACE}-{SPAN}-0x", id="flags not hex"),
            pytest.param(f"01-{TRACE}-{SPAN}-01x", id="future version without dash after 55"),
        ],
    )
    def test_an_invalid_header_is_refused_so_a_new_trace_starts(self, value: str | None) -> None:
        assert parse_traceparent(value) is None

    def test_a_future_version_is_parsed_by_its_first_four_fields(self) -> None:
        assert parse_traceparent(f"cc-{TRACE}-{SPAN}-01-what-the-future-holds") == (TRACE, SPAN, 1)
        assert parse_traceparent(f"01-{TRACE}-{SPAN}-03") == (TRACE, SPAN, 3)


class TestNewIds:
    def test_new_trace_gives_lowercase_hex_ids_of_the_right_length(self) -> None:
        trace_id, span_id = new_trace()
        assert len(trace_id) == 32 and len(span_id) == 16
        assert trace_id == trace_id.lower() and int(trace_id, 16) and int(span_id, 16)

    def test_two_new_traces_differ(self) -> None:
        assert new_trace() != new_trace()
        assert new_span_id() != new_span_id()

    def test_the_child_header_names_the_gateway_span_and_round_trips(self) -> None:
        header = child_traceparent(TRACE, "1111111111111111", 1)
        assert header == f"00-{TRACE}-1111111111111111-01"
        assert parse_traceparent(header) == (TRACE, "1111111111111111", 1)

    def test_unknown_flag_bits_are_cleared_when_forwarding(self) -> None:
        assert child_traceparent(TRACE, SPAN, 0xFF).endswith("-03")


class TestTraceContext:
    def test_a_valid_parent_is_joined_with_a_fresh_gateway_span(self) -> None:
        ctx = trace_context(VALID, "congo=t61rcWkgMzE")
        assert ctx.trace_id == TRACE and ctx.parent_id == SPAN and ctx.flags == 1
        assert ctx.span_id != SPAN
        assert ctx.traceparent == f"00-{TRACE}-{ctx.span_id}-01"
        assert ctx.tracestate == "congo=t61rcWkgMzE"

    def test_without_a_parent_a_sampled_trace_starts_and_tracestate_is_dropped(self) -> None:
        ctx = trace_context("garbage", "congo=t61rcWkgMzE")
        assert ctx.parent_id is None and ctx.tracestate is None
        assert parse_traceparent(ctx.traceparent) == (ctx.trace_id, ctx.span_id, 1)


class TestTracestate:
    def test_members_are_kept_in_order_with_optional_whitespace_trimmed(self) -> None:
        value = " rojo=00f067aa0ba902b7 ,\tcongo=t61rcWkgMzE,, tenant@vendor=x"
        assert (
            sanitize_tracestate(value) == "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE,tenant@vendor=x"
        )

    @pytest.mark.parametrize(
        "value",
        [
            pytest.param(None, id="absent"),
            pytest.param("", id="empty"),
            pytest.param(" , ", id="only empty members"),
            pytest.param("Rojo=1", id="uppercase key"),
            pytest.param("rojo", id="member without ="),
            pytest.param("rojo=a=b", id="= inside the value"),
            pytest.param("rojo=1,rojo=2", id="duplicate key"),
            pytest.param("rojo=", id="empty value"),
            pytest.param("rojo=a\x7fb", id="DEL in the value"),
            pytest.param("rojo=caf\u00e9", id="non-ASCII value"),
            pytest.param("rojo=" + "x" * 257, id="value of 257 chars"),
        ],
    )
    def test_a_malformed_or_empty_tracestate_is_not_forwarded(self, value: str | None) -> None:
        assert sanitize_tracestate(value) is None

    def test_32_members_are_forwarded_and_33_discard_the_header(self) -> None:
        members = [f"k{i}=v" for i in range(33)]
        assert sanitize_tracestate(",".join(members[:32])) == ",".join(members[:32])
        assert sanitize_tracestate(",".join(members)) is None

    def test_exactly_512_characters_pass_unchanged(self) -> None:
        value = "a=" + "x" * 200 + ",b=" + "y" * 200 + ",c=" + "z" * 104
        assert len(value) == TRACESTATE_MAX_CHARS
        assert sanitize_tracestate(value) == value

    def test_over_512_characters_drops_members_over_128_first(self) -> None:
        small = [f"k{i}=" + "v" * 20 for i in range(10)]
        big = "big=" + "b" * 250
        value = ",".join([small[0], big, *small[1:], "big2=" + "c" * 250])
        assert len(value) > TRACESTATE_MAX_CHARS
        assert sanitize_tracestate(value) == ",".join(small)

    def test_over_512_characters_of_small_members_drops_from_the_end(self) -> None:
        members = [f"k{i:02d}=" + "v" * 100 for i in range(6)]  # 104 chars each
        out = sanitize_tracestate(",".join(members))
        assert out == ",".join(members[:4])
        assert len(",".join(members[:4])) <= TRACESTATE_MAX_CHARS
