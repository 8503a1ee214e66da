"""The one bounded map (gateway/bounded.py): the bound at the limit and one past, least recently
used out first, expiry on read and by sweep, what ``on_drop`` is told; and a property test
against a plain model of an LRU map with expiries."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.bounded import NEVER, BoundedMap


def dropped_into(log: list[tuple[str, int]]) -> Any:
    return lambda key, value: log.append((key, value))


def test_at_the_bound_nothing_goes_and_one_past_the_least_recently_used_goes() -> None:
    log: list[tuple[str, int]] = []
    m: BoundedMap[str, int] = BoundedMap(3, on_drop=dropped_into(log))
    for index, key in enumerate("abc"):
        m.put(key, index)
    assert (len(m), log) == (3, [])
    assert m.get("a") == 0  # read: now the most recent
    m.put("d", 3)
    assert list(m) == ["c", "a", "d"] and log == [("b", 1)]
    assert m.peek("c") == 2  # peek does not refresh
    m.put("e", 4)
    assert list(m) == ["a", "d", "e"] and log[-1] == ("c", 2)


def test_an_entry_expires_at_its_instant_on_read_and_is_reported() -> None:
    log: list[tuple[str, int]] = []
    m: BoundedMap[str, int] = BoundedMap(10, on_drop=dropped_into(log))
    m.put("a", 1, expires_at=100.0)
    m.put("b", 2)
    assert m.get("a", 99.9) == 1
    assert "a" in m and m.peek("a", 100.0) is None
    assert "a" not in m and log == [("a", 1)]
    assert m.get("b", 1e12) == 2  # NEVER
    assert m.get("a") is None


def test_pop_and_clear_are_not_drops() -> None:
    log: list[tuple[str, int]] = []
    m: BoundedMap[str, int] = BoundedMap(10, on_drop=dropped_into(log))
    m.put("a", 1)
    m.put("b", 2)
    assert m.pop("a") == 1 and m.pop("a") is None
    m.clear()
    assert len(m) == 0 and log == []


def test_expire_sweeps_everything_and_trim_stops_at_the_first_live_entry() -> None:
    log: list[tuple[str, int]] = []
    m: BoundedMap[str, int] = BoundedMap(10, on_drop=dropped_into(log))
    for key, until in (("a", 1.0), ("b", 5.0), ("c", 2.0), ("d", NEVER)):
        m.put(key, int(until) if until != NEVER else 0, expires_at=until)
    m.trim(3.0)
    assert list(m) == ["b", "c", "d"]  # c expired too, but behind the live b
    assert m.expire(3.0) == 1 and list(m) == ["b", "d"]
    assert log == [("a", 1), ("c", 2)]


def test_add_puts_only_what_is_absent_or_expired() -> None:
    log: list[tuple[str, int]] = []
    m: BoundedMap[str, int] = BoundedMap(2, on_drop=dropped_into(log))
    assert m.add("a", 1, 10.0, now=0.0)
    assert not m.add("a", 2, 20.0, now=9.9)  # present and live: nothing changes
    assert m.peek("a", 9.9) == 1
    assert m.add("a", 3, 30.0, now=10.0)  # expired at its instant: dropped, then put
    assert log == [("a", 1)] and m.peek("a", 10.0) == 3
    assert m.add("b", 4, NEVER, now=10.0) and m.add("c", 5, NEVER, now=10.0)
    assert list(m) == ["b", "c"] and log[-1] == ("a", 3)  # the bound holds


def test_the_bound_must_hold_one() -> None:
    with pytest.raises(ValueError, match="max_entries"):
        BoundedMap(0)


_OPS = st.lists(
    st.tuples(
        st.sampled_from(["put", "get", "peek", "pop", "touch", "trim"]),
        st.integers(0, 6),
        st.integers(0, 20),
    ),
    max_size=60,
)


@settings(
    max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(st.integers(1, 4), _OPS)
def test_it_behaves_like_a_plain_lru_model(bound: int, ops: list[tuple[str, int, int]]) -> None:
    model: list[tuple[int, int, float]] = []  # least recent first: (key, value, expires_at)
    dropped_model: list[int] = []
    dropped: list[int] = []
    m: BoundedMap[int, int] = BoundedMap(bound, on_drop=lambda key, value: dropped.append(key))
    now = 0.0

    def find(key: int) -> int | None:
        return next((i for i, entry in enumerate(model) if entry[0] == key), None)

    for op, key, arg in ops:
        now += 1.0
        at = find(key)
        if op == "put":
            if at is not None:
                model.pop(at)
            model.append((key, arg, now + arg))
            while len(model) > bound:
                dropped_model.append(model.pop(0)[0])
            m.put(key, arg, now + arg)
        elif op in ("get", "peek"):
            expected = None
            if at is not None:
                entry = model[at]
                if now >= entry[2]:
                    model.pop(at)
                    dropped_model.append(key)
                else:
                    expected = entry[1]
                    if op == "get":
                        model.append(model.pop(at))
            assert (m.get(key, now) if op == "get" else m.peek(key, now)) == expected
        elif op == "pop":
            expected = model.pop(at)[1] if at is not None else None
            assert m.pop(key) == expected
        elif op == "touch" and at is not None:
            model.append(model.pop(at))
            m.touch(key)
        elif op == "trim":
            while model and now >= model[0][2]:
                dropped_model.append(model.pop(0)[0])
            m.trim(now)
        assert list(m) == [entry[0] for entry in model]
        assert dropped == dropped_model
