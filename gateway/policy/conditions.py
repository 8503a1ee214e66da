"""``when:`` conditions on a rule: CEL expressions, evaluated fail-closed.

The CEL implementation is ``common-expression-language`` (Rust-backed, PyPI): no home-made
expression language. Load-time checks (syntax, names, functions, types, bounds) are in
:mod:`.condition_checks`; this module holds what a call needs.

Cost. The library converts every Python value it is given into a CEL value, about 3 µs per
object converted (a map key, a string, a list item), and it keeps the converted variables of a
``cel.Context`` until the context is modified. So the token facts (``claims``, ``subject``,
``client_id``, ``scopes``, ``issuer``, ``auth_method``) are converted once per principal, into
a context kept by the policy set's :data:`TokenContexts` (the auth layer caches the principal,
so: once per token and replica; for the :data:`TOKEN_CONTEXTS` most recently used principals),
and the per-call values (the tool, prompt or resource name, ``arguments``, ``backend``,
``request``, ``now``) come from the context's variable resolver,
which the library binds per evaluation without touching the cached variables; a per-call value
is converted only when an expression reads it.

Size. The library cannot be given a cost limit, so :mod:`.condition_cost` bounds each
expression at load over the largest inputs it can get; for ``arguments`` (the caller's) that
bound holds because only the arguments the rule's conditions read are given to them, and the
call is refused when those are over :data:`MAX_ARGUMENT_VALUES` values or
:data:`MAX_ARGUMENT_CHARACTERS` characters (:class:`ArgumentsTooLarge`).

Run time: every condition of the rule must evaluate to ``true``. Anything else, ``false``, a
non-boolean, or an evaluation error (a missing map key without ``has()``, a wrong type) is a
refusal: fail closed, never an allow.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any, Final

import cel

from gateway.policy.glob import Glob
from gateway.seams import Principal, PrincipalFacts

__all__ = [
    "CALL_VARIABLES",
    "MAX_ARGUMENT_CHARACTERS",
    "MAX_ARGUMENT_VALUES",
    "MAX_GLOB_PATTERN",
    "TOKEN_CONTEXTS",
    "TOKEN_VARIABLES",
    "ArgumentsTooLarge",
    "Condition",
    "ConditionFailed",
    "TokenContext",
    "TokenContexts",
    "call_values",
    "conditions_hold",
    "glob_matches",
    "reason_of",
    "token_context",
    "token_facts",
    "variables_of",
    "wall_clock",
]

TOKEN_VARIABLES: Final = ("claims", "subject", "client_id", "scopes", "issuer", "auth_method")
"""What the token says: the same for every call of one principal (converted once)."""
NAMED: Final = {"tools": "tool", "prompts": "prompt", "resources": "resource"}
"""The variable that holds the name (or URI) of what a rule of each section governs."""
CALL_VARIABLES: Final = ("arguments", "backend", "request", "now")
"""Per-call facts besides the name. ``arguments`` is the one a listing cannot know."""

wall_clock: Callable[[], float] = time.time
"""Where ``now`` comes from (a test may put a fixed clock here)."""


def variables_of(section: str) -> tuple[str, ...]:
    """The names a condition of a ``section`` rule may read (docs/policy.md#conditions):
    resources have no arguments."""
    calls = CALL_VARIABLES if section != "resources" else CALL_VARIABLES[1:]
    return (*TOKEN_VARIABLES, NAMED[section], *calls)


@dataclass(frozen=True, slots=True)
class Condition:
    """One compiled ``when:`` expression."""

    source: str
    where: str
    """``file:line:col`` of the expression."""
    program: Any = field(compare=False, repr=False)
    reads: tuple[str, ...] = ()
    """The variables the expression references (of :func:`variables_of`)."""
    argument_keys: frozenset[str] | None = field(default=None, compare=False)
    """The argument names it reads (``arguments.env``), None: ``arguments`` as a whole (both
    derived from ``source``, so left out of comparisons and the hash: it is hashed per call)."""
    cost: int = field(default=0, compare=False)
    """Its worst-case cost (:mod:`.condition_cost`)."""

    @property
    def listable(self) -> bool:
        """Decidable at a listing: it does not read ``arguments``."""
        return "arguments" not in self.reads


class ConditionFailed(Exception):
    """A condition could not be evaluated (the message is for the log, never the client)."""


class ArgumentsTooLarge(Exception):
    """The arguments a rule's conditions read are over the bound of their cost (module
    docstring, Size): the call is refused before any condition runs."""


MAX_ARGUMENT_VALUES: Final = 256
"""The most values of ``arguments`` a rule's conditions are given: each map, map entry, list,
string, number, boolean and null counts one."""
MAX_ARGUMENT_CHARACTERS: Final = 8192
"""The most characters (strings and map keys) of ``arguments`` a rule's conditions are given."""


def call_values(
    conditions: tuple[Condition, ...],
    section: str,
    name: str,
    arguments: Mapping[str, Any] | None,
    *,
    backend: str,
    client_ip: str,
) -> dict[str, Any]:
    """The per-call values the conditions read, and only those (a value nobody reads is
    never converted). ``now`` is a UTC timestamp, read once per call. ``arguments``: those the
    conditions name (all of them if one reads the map as a whole); raises
    :class:`ArgumentsTooLarge` when they are over the bound."""
    plan = _plan(conditions)
    read, keys = plan.read, plan.keys
    values: dict[str, Any] = {}
    named = NAMED[section]
    if named in read:
        values[named] = name
    if "arguments" in read and arguments is not None:
        given = arguments if keys is None else {k: arguments[k] for k in keys if k in arguments}
        if _oversized(given):
            raise ArgumentsTooLarge
        values["arguments"] = given
    if "backend" in read:
        values["backend"] = backend
    if "request" in read:
        values["request"] = {"ip": client_ip}
    if "now" in read:
        values["now"] = datetime.fromtimestamp(wall_clock(), UTC)
    return values


def conditions_hold(
    conditions: tuple[Condition, ...], token: TokenContext | str, call: Mapping[str, Any]
) -> Condition | None:
    """The first condition that does not hold (None: all hold).

    ``token``: the principal's context (:func:`token_context`, kept by the policy set's
    :class:`TokenContexts`); ``call``: the per-call values (:func:`call_values`). Raises
    :class:`ConditionFailed` when one cannot be evaluated, naming which.
    """
    if isinstance(token, str):
        raise ConditionFailed(f"{conditions[0].where}: {token}")
    token.call.update(call)
    try:
        joined = _plan(conditions).joined
        if joined is not None:
            # One evaluation for the common case (every condition true): the library's fixed
            # cost per evaluation dominates on the request path. CEL's && is true only when
            # every operand is the bool true (a false, an error or a non-bool never gives
            # true), so anything else is decided one by one below, as before.
            try:
                if joined.execute(token.context) is True:
                    return None
            except Exception:  # noqa: S110 - decided (and reported) by the loop below
                pass
        for condition in conditions:
            try:
                result = condition.program.execute(token.context)
            except Exception as exc:
                reason = reason_of(exc, condition.source)
                raise ConditionFailed(f"{condition.where}: {reason}") from None
            if result is not True:
                if result is not False:
                    raise ConditionFailed(
                        f"{condition.where}: evaluated to {type(result).__name__}, not a bool"
                    )
                return condition
        return None
    finally:
        token.call.clear()  # no call's arguments outlive it in the cached context


class _Plan:
    """What a call needs of a rule's conditions besides their programs: the variables and
    argument names they read (:func:`_reads`), and their joined program (:func:`_joined`; None
    for one condition)."""

    __slots__ = ("conditions", "joined", "keys", "read")

    def __init__(self, conditions: tuple[Condition, ...]) -> None:
        self.conditions = conditions
        """Held, so that no other tuple gets this one's ``id`` while the plan is kept."""
        self.read, self.keys = _reads(conditions)
        self.joined: Any = _joined(conditions) if len(conditions) > 1 else None


_PLANS: Final = 1024
_plans: dict[int, _Plan] = {}
"""Plans by the identity of the conditions tuple (a rule's ``when``, the same object call after
call): the cached functions behind them hash the tuple, which hashes every condition in Python
(about 7,000 instructions per call). Bounded: cleared when full (listings build new subsets)."""


def _plan(conditions: tuple[Condition, ...]) -> _Plan:
    plan = _plans.get(id(conditions))
    if plan is not None and plan.conditions is conditions:
        return plan
    plan = _Plan(conditions)
    if len(_plans) >= _PLANS:
        _plans.clear()
    _plans[id(conditions)] = plan
    return plan


@lru_cache(maxsize=1024)  # one entry per conditioned rule (and listing subset): bounded
def _reads(conditions: tuple[Condition, ...]) -> tuple[frozenset[str], frozenset[str] | None]:
    """The variables the conditions read, and the argument names (None: one of them reads
    the whole map)."""
    read = frozenset(variable for condition in conditions for variable in condition.reads)
    keys: set[str] = set()
    for condition in conditions:
        if "arguments" in condition.reads:
            if condition.argument_keys is None:
                return read, None
            keys |= condition.argument_keys
    return read, frozenset(keys)


def _oversized(arguments: Mapping[str, Any]) -> bool:
    """Whether ``arguments`` has more than :data:`MAX_ARGUMENT_VALUES` values or
    :data:`MAX_ARGUMENT_CHARACTERS` characters (stops counting there). JSON's dict and list
    are tested first: an ABC's isinstance costs more than the rest of a call's check."""
    values = characters = 0
    stack: list[Any] = [arguments]
    while stack:
        item = stack.pop()
        values += 1
        if isinstance(item, str):
            characters += len(item)
        elif isinstance(item, dict) or (not isinstance(item, list) and isinstance(item, Mapping)):
            values += len(item)
            for key in item:
                characters += len(key)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        if values > MAX_ARGUMENT_VALUES or characters > MAX_ARGUMENT_CHARACTERS:
            return True
    return False


@lru_cache(maxsize=1024)  # one entry per conditioned rule (and listing subset): bounded
def _joined(conditions: tuple[Condition, ...]) -> Any:
    """The rule's conditions as one program (``(a) && (b)``), None if that cannot compile."""
    try:
        return cel.compile(" && ".join(f"({c.source})" for c in conditions))
    except Exception:
        return None


class TokenContext:
    """A principal's CEL context: the token facts as variables (converted once, kept by the
    library until the context changes), the per-call values through the resolver."""

    __slots__ = ("call", "context")

    def __init__(self, principal: Principal) -> None:
        self.call: dict[str, Any] = {}
        context = cel.Context()
        for name, value in token_facts(principal).items():
            context.add_variable(name, value)
        context.add_function("glob", glob_matches)
        # The resolver is asked first for every name; None falls through to the variables.
        context.set_variable_resolver(self.call.get)
        self.context = context


def token_facts(principal: Principal) -> dict[str, Any]:
    """The token variables of a condition, as Python values (their CEL types:
    docs/policy.md#conditions)."""
    return {
        "claims": dict(principal.claims),
        "subject": principal.subject,
        "client_id": principal.client_id or "",
        "scopes": sorted(principal.scopes),
        "issuer": principal.issuer,
        "auth_method": principal.auth_method,
    }


def token_context(principal: Principal) -> TokenContext | str:
    """The principal's context, or the reason its claims cannot be CEL values (kept as its
    fact too, so a token that cannot be converted costs one attempt)."""
    try:
        return TokenContext(principal)
    except Exception as exc:
        return f"token claims are not CEL values: {type(exc).__name__}"


TokenContexts = PrincipalFacts[TokenContext | str]
"""The owner of the principals' contexts: one per gateway (built by the composition root and
handed to every policy set a reload loads), bounded by :data:`TOKEN_CONTEXTS`."""

TOKEN_CONTEXTS: Final = 4096
"""Principals whose CEL context is kept (least recently used first out): a context costs about
15 KB (the library's function registry and the converted claims), so about 60 MB."""


MAX_GLOB_PATTERN: Final = 128
"""The longest ``glob`` pattern (a longer one is an evaluation error): a pattern may come from a
claim or an argument, and matching costs up to its length times the name's."""


def glob_matches(value: object, pattern: object) -> bool:
    """The ``glob`` helper: ``subject.glob("*@example.com")``, ``glob(tool, "admin_*")``. The
    policy's own pattern rules (:mod:`.glob`: ``*`` any run, ``?`` one character, the rest
    literal, case-sensitive); ``[`` and ``]`` are refused, as in rule keys."""
    if not isinstance(value, str) or not isinstance(pattern, str):
        raise TypeError("glob(string, string)")
    if len(pattern) > MAX_GLOB_PATTERN:
        raise ValueError(f"glob patterns are at most {MAX_GLOB_PATTERN} characters")
    return _glob(pattern).matches(value)


@lru_cache(maxsize=256)  # patterns may come from claims: bounded
def _glob(pattern: str) -> Glob:
    if "[" in pattern or "]" in pattern:
        raise ValueError("glob patterns have no character classes")
    return Glob(pattern)


_UNSUPPORTED: Final = re.compile(r"Unsupported operation: (\w+ \S{1,3} \w+)")
_QUOTED: Final = re.compile(r"'([A-Za-z_][A-Za-z0-9_.]{0,63})'")


def reason_of(exc: Exception, source: str) -> str:
    """Why an evaluation failed, in words safe for the log: the library's messages can quote
    a value (a missing key named by a claim, a string that is no int), so only names that stand
    in the expression itself and the library's type words are kept, never a value."""
    kind = type(exc).__name__
    text = str(exc)
    named = _QUOTED.search(text)
    name = named.group(1) if named is not None and named.group(1) in source else None
    if isinstance(exc, KeyError):
        return f"no such key {name!r} (use has())" if name else "no such key (use has())"
    if isinstance(exc, TypeError):
        unsupported = _UNSUPPORTED.search(text)
        if unsupported is not None:
            return f"wrong types: {unsupported.group(1)}"
        return "wrong types: no such overload"
    if isinstance(exc, ZeroDivisionError):
        return "division by zero"
    if isinstance(exc, IndexError):
        return "index out of bounds"
    if text.startswith("Function ") and name:
        return f"function {name} failed"
    if text.startswith("Undefined variable or function") and name:
        return f"no function {name} for these argument types"
    return kind
