"""A rule's conditions are planned once per tuple (``conditions._plan``, issue 48): found by
the tuple's identity, never by another tuple that is merely equal or that took a freed tuple's
``id``, and bounded."""

from __future__ import annotations

from gateway.policy import conditions as module
from gateway.policy.condition_checks import compile_condition
from gateway.policy.conditions import Condition


def _condition(source: str) -> Condition:
    condition, error = compile_condition(source, "policy.yaml:1:1", "tools")
    assert condition is not None, error
    return condition


def test_a_plan_is_found_by_the_tuple_itself_and_says_what_the_conditions_read() -> None:
    when = (_condition('subject == "bench"'), _condition("arguments.text.size() <= 64"))
    plan = module._plan(when)
    assert module._plan(when) is plan
    assert plan.read == frozenset({"subject", "arguments"})
    assert plan.keys == frozenset({"text"})
    assert plan.joined is not None
    equal = (*when,)  # the same conditions in another tuple: planned alike, not found
    assert equal is not when
    other = module._plan(equal)
    assert other is not plan and other.conditions is equal and other.read == plan.read
    single = module._plan((when[0],))
    assert single.joined is None and single.keys == frozenset()


def test_a_freed_tuple_never_lends_its_plan_and_the_plans_stay_bounded() -> None:
    first = _condition('subject == "a"')
    second = _condition("arguments.x == 1")
    for _ in range(module._PLANS + 10):  # listings build a new subset each time
        module._plan((first,))
    assert len(module._plans) <= module._PLANS
    plan = module._plan((second,))
    assert plan.read == frozenset({"arguments"}) and plan.keys == frozenset({"x"})
    for _ in range(50):  # a new tuple at a reused address is planned for what it holds
        assert module._plan((first,)).read == frozenset({"subject"})
        assert module._plan((second,)).keys == frozenset({"x"})
