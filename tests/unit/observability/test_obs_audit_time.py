"""An audit event's ``ts`` (:func:`gateway.observability.audit.rfc3339`) is, to the byte,
``datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds")`` with ``Z`` (issue 48:
the date and time are formatted once per second, the milliseconds with fromtimestamp's own
rounding)."""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.observability.audit import rfc3339


def _reference(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds")[:-6] + "Z"


@settings(max_examples=2000, deadline=None, database=None)
@given(st.floats(min_value=-1e9, max_value=4e9, allow_nan=False))
def test_any_time_reads_as_datetime_writes_it(ts: float) -> None:
    assert rfc3339(ts) == _reference(ts)


def test_the_edges_of_a_second_and_of_a_millisecond() -> None:
    now = math.floor(time.time())
    for second in (0, 59, now, now + 1, 951782399):  # 1970, a leap day's last second
        for frac in (0.0, 0.0004995, 0.0005, 0.000999, 0.9994999, 0.9995, 0.9999994, 0.9999995):
            for ts in (second + frac, math.nextafter(second + frac, math.inf)):
                assert rfc3339(ts) == _reference(ts), ts
    # The cache holds one second: going back and forth gives each its own text.
    assert rfc3339(now + 0.25) == _reference(now + 0.25)
    assert rfc3339(now - 3600.75) == _reference(now - 3600.75)
    assert rfc3339(now + 0.25) == _reference(now + 0.25)
