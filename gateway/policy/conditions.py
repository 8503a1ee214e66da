"""``when:`` conditions on a rule: CEL expressions compiled at load, evaluated at ``tools/call``.

The CEL implementation is ``common-expression-language`` (Rust-backed, PyPI): no home-made
expression language. It does not type-check variables at compile time, so the load-time check
is the parse (syntax) plus the names the program references (:meth:`cel.Program.variables`)
against :data:`VARIABLES`; a name bound by a comprehension macro (``x`` in
``claims.groups.exists(x, x == "sre")``) is not a variable and is allowed.

Run time: every condition of the rule must evaluate to ``true``. Anything else, ``false``, a
non-boolean, or an evaluation error (a missing map key without ``has()``, a wrong type) is a
refusal: fail closed, never an allow.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import cel

from gateway.seams import Principal

__all__ = [
    "MAX_EXPRESSION_LENGTH",
    "VARIABLES",
    "Condition",
    "ConditionFailed",
    "compile_condition",
    "conditions_hold",
]

MAX_EXPRESSION_LENGTH: Final = 1024
"""Longest ``when:`` expression, in characters (longer ones are load errors)."""

VARIABLES: Final = ("claims", "subject", "client_id", "scopes", "issuer", "tool", "arguments")
"""The names a condition may read (docs/policy.md#conditions)."""

_MACROS: Final = ("all", "exists", "exists_one", "map", "filter")


@dataclass(frozen=True, slots=True)
class Condition:
    """One compiled ``when:`` expression."""

    source: str
    where: str
    """``file:line:col`` of the expression."""
    program: Any = field(compare=False, repr=False)
    reads: tuple[str, ...] = ()
    """The variables of :data:`VARIABLES` the expression references."""


class ConditionFailed(Exception):
    """A condition could not be evaluated (the message is for the log, never the client)."""


def compile_condition(source: str, where: str) -> tuple[Condition | None, str | None]:
    """(condition, None), or (None, the reason it is refused)."""
    if len(source) > MAX_EXPRESSION_LENGTH:
        return None, f"longer than {MAX_EXPRESSION_LENGTH} characters"
    if not source.strip():
        return None, "a condition must not be empty"
    try:
        program = cel.compile(source)
    except Exception as exc:  # the library raises ValueError with the CEL parser's message
        return None, f"CEL: {_one_line(str(exc))}"
    names = list(program.variables())
    unknown = sorted(n for n in names if n not in VARIABLES and not _bound(source, n))
    if unknown:
        known = ", ".join(VARIABLES)
        return None, f"unknown variable {', '.join(unknown)} (conditions may read: {known})"
    reads = tuple(name for name in VARIABLES if name in names)
    return Condition(source, where, program, reads), None


def conditions_hold(
    conditions: tuple[Condition, ...],
    principal: Principal,
    tool: str,
    arguments: Mapping[str, Any],
) -> Condition | None:
    """The first condition that does not hold (None: all hold).

    Raises :class:`ConditionFailed` when one cannot be evaluated, naming which.
    """
    for condition in conditions:
        context = cel.Context()
        for name in condition.reads:
            context.add_variable(name, _value(name, principal, tool, arguments))
        try:
            result = condition.program.execute(context)
        except Exception as exc:
            raise ConditionFailed(
                f"{condition.where}: {type(exc).__name__}: {_one_line(str(exc))}"
            ) from None
        if result is not True:
            if result is not False:
                raise ConditionFailed(
                    f"{condition.where}: evaluated to {type(result).__name__}, not a bool"
                )
            return condition
    return None


def _value(name: str, principal: Principal, tool: str, arguments: Mapping[str, Any]) -> Any:
    if name == "claims":
        return dict(principal.claims)
    if name == "subject":
        return principal.subject
    if name == "client_id":
        return principal.client_id or ""
    if name == "scopes":
        return sorted(principal.scopes)
    if name == "issuer":
        return principal.issuer
    if name == "tool":
        return tool
    return dict(arguments)


def _bound(source: str, name: str) -> bool:
    """Whether ``name`` is the variable of a comprehension macro in ``source``."""
    macros = "|".join(_MACROS)
    return re.search(rf"\.\s*(?:{macros})\s*\(\s*{re.escape(name)}\s*,", source) is not None


def _one_line(text: str) -> str:
    return " ".join(text.split())
