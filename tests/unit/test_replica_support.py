"""The replica test support's ready timeout (tests/support/replicas.py): an env var, a default."""

from __future__ import annotations

import pytest

from tests.support.replicas import DEFAULT_READY_TIMEOUT_S, READY_TIMEOUT_ENV, ready_timeout_s


def test_the_default_leaves_a_loaded_machine_room() -> None:
    assert ready_timeout_s({}) == DEFAULT_READY_TIMEOUT_S >= 60
    assert ready_timeout_s({READY_TIMEOUT_ENV: "  "}) == DEFAULT_READY_TIMEOUT_S


@pytest.mark.parametrize(("text", "value"), [("90", 90.0), ("2.5", 2.5), (" 120 ", 120.0)])
def test_the_environment_sets_it(text: str, value: float) -> None:
    assert ready_timeout_s({READY_TIMEOUT_ENV: text}) == value


@pytest.mark.parametrize("text", ["0", "-5", "soon", "nan", "inf"])
def test_a_value_that_is_not_a_positive_number_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match=READY_TIMEOUT_ENV):
        ready_timeout_s({READY_TIMEOUT_ENV: text})
