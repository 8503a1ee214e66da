"""The ports chosen in advance: below the ephemeral range, never twice, and per-process slices."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gateway.demo import ports


@pytest.fixture
def restore_slice() -> Iterator[None]:
    saved = ports._slice
    yield
    ports._slice = saved


def test_ports_are_below_the_ephemeral_range_and_never_handed_out_twice() -> None:
    floor = ports._ephemeral_floor()
    chosen = [ports.free_port() for _ in range(50)]
    assert len(set(chosen)) == len(chosen)
    assert all(max(1024, floor - ports._BELOW) <= port < floor for port in chosen)


@pytest.mark.usefixtures("restore_slice")
def test_processes_sharing_the_range_choose_from_disjoint_slices() -> None:
    floor = ports._ephemeral_floor()
    bottom = max(1024, floor - ports._BELOW)
    width = (floor - bottom) // 3
    for index in range(3):
        ports.share(index, 3)
        low = bottom + index * width
        assert all(low <= ports.free_port() < low + width for _ in range(20)), index


@pytest.mark.parametrize(("index", "count"), [(3, 3), (-1, 2), (0, 0)])
def test_a_slice_outside_the_count_is_refused(index: int, count: int) -> None:
    with pytest.raises(ValueError, match="slice"):
        ports.share(index, count)
