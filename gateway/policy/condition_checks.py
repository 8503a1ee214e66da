"""Load-time checks of ``when:`` conditions: every mistake the library lets us find, at
``file:line:col`` of the expression, all of them in one ``check``.

``common-expression-language`` parses and evaluates; it has no type checker and no cost limit.
So, in this order, an expression is refused when it is:

1. empty, or longer than :data:`MAX_EXPRESSION_LENGTH` characters;
2. nested deeper than :data:`MAX_NESTING` brackets, or with comprehension macros (``all``,
   ``exists``, ``exists_one``, ``map``, ``filter``) nested deeper than
   :data:`MAX_COMPREHENSION_NESTING` or more than :data:`MAX_COMPREHENSIONS` of them;
3. not CEL (the parser's message);
4. reading a name that is no variable of its section (:func:`.conditions.variables_of`),
   or calling a function that is neither CEL's (as this library implements it) nor ``glob``;
5. more costly at worst than :data:`.condition_cost.BUDGET` over the largest inputs it can be
   given (:mod:`.condition_cost`), alone or with the rule's conditions before it;
6. a type error found by a probe: the expression is evaluated once with values of the right
   types for every variable (``claims`` and ``arguments`` empty maps). A wrong operand type
   (``subject + 1``, ``now > 5``, ``scopes.size() > "3"``), a function given wrong argument
   types, or a result that is not a bool is a load error. What the probe does not reach (past a
   missing claim, a short-circuited branch) is found at run time instead, where it denies and
   is counted.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any, Final

import cel

from gateway.policy.cel_syntax import CelSyntaxError, Node, TooDeep, parse
from gateway.policy.condition_cost import BUDGET, TIMESTAMP_ACCESSORS, CostUnbounded, cost_of
from gateway.policy.conditions import NAMED, Condition, glob_matches, variables_of
from gateway.yaml_source import Located

__all__ = [
    "FUNCTIONS",
    "MAX_COMPREHENSIONS",
    "MAX_COMPREHENSION_NESTING",
    "MAX_EXPRESSION_LENGTH",
    "MAX_NESTING",
    "compile_condition",
    "conditions_of",
]

MAX_EXPRESSION_LENGTH: Final = 1024
"""Longest ``when:`` expression, in characters (longer ones are load errors)."""
MAX_NESTING: Final = 24
"""Deepest bracket nesting (``(``, ``[``, ``{``)."""
MAX_COMPREHENSION_NESTING: Final = 2
MAX_COMPREHENSIONS: Final = 6

FUNCTIONS: Final = frozenset(
    {
        "size",
        "contains",
        "startsWith",
        "endsWith",
        "matches",
        "int",
        "uint",
        "double",
        "string",
        "bytes",
        "timestamp",
        "duration",
        "dyn",
        "type",
        *TIMESTAMP_ACCESSORS,
        "glob",
    }
)
"""The named functions a condition may call (operators are always allowed)."""
TYPE_NAMES: Final = frozenset(
    {"bool", "int", "uint", "double", "string", "bytes", "list", "map", "null_type", "type"}
)
"""Identifiers that name CEL types (``type(x) == string``), not variables."""


def compile_condition(source: str, where: str, section: str) -> tuple[Condition | None, str | None]:
    """(condition, None), or (None, the reason it is refused)."""
    if len(source) > MAX_EXPRESSION_LENGTH:
        return None, f"longer than {MAX_EXPRESSION_LENGTH} characters"
    if not source.strip():
        return None, "a condition must not be empty"
    tree: Node | None = None
    try:
        tree = parse(source, MAX_NESTING)
    except TooDeep as exc:
        return None, str(exc)
    except CelSyntaxError:
        pass  # the library's parser says why below (or, if it reads it, cost_of cannot)
    nested = _comprehensions(tree) if tree is not None else None
    if nested is not None:
        return None, nested
    try:
        program = cel.compile(source)
    except Exception as exc:  # the library raises ValueError with the CEL parser's message
        return None, f"CEL: {_parser_message(str(exc))}"
    if tree is None:
        return None, "the gateway cannot read this expression to bound its cost"
    allowed = variables_of(section)
    names = list(program.variables())
    bound = {node.args[1].text for node in tree.walk() if node.kind == "macro"}
    unknown = sorted(n for n in names if n not in allowed and n not in TYPE_NAMES | bound)
    if unknown:
        return None, (
            f"unknown variable {', '.join(unknown)} "
            f"({section} conditions may read: {', '.join(allowed)})"
        )
    functions = sorted(f for f in program.functions() if f[:1].isalpha() and f not in FUNCTIONS)
    if functions:
        return None, f"unknown function {', '.join(functions)} (docs/policy.md#conditions)"
    try:
        cost = cost_of(tree)
    except CostUnbounded as exc:
        return None, str(exc)
    if cost > BUDGET:
        return None, _over_budget(cost)
    reads = tuple(name for name in allowed if name in names)
    condition = Condition(source, where, program, reads, _argument_keys(tree), cost)
    wrong = _probe(condition, section)
    if wrong is not None:
        return None, wrong
    return condition, None


def conditions_of(
    doc: Located, path: tuple[str, str], section: str, when: Any, *, problems: bool
) -> tuple[Condition, ...]:
    """Compile ``when:`` (one expression or a list); with ``problems``, report each refusal
    at its position (every one of them, not only the first). The rule's conditions together
    are held to the budget too: each is evaluated at every call of the rule."""
    if isinstance(when, str):
        items: list[tuple[tuple[Any, ...], Any]] = [((*path, "when"), when)]
    elif isinstance(when, list):
        items = [((*path, "when", index), item) for index, item in enumerate(when)]
    else:
        return ()
    found = []
    total = 0
    for where_path, source in items:
        if not isinstance(source, str):
            continue  # reported by the schema
        condition, reason = compile_condition(source, doc.where(where_path), section)
        if condition is not None and total + condition.cost > BUDGET:
            together = _over_budget(total + condition.cost)
            condition, reason = None, f"with the rule's conditions before it, {together}"
        if condition is not None:
            total += condition.cost
            found.append(condition)
        elif problems:
            doc.problem(where_path, reason or "invalid condition")
    return tuple(found)


def _over_budget(cost: int) -> str:
    return (
        f"may cost up to {cost / 1e6:,.1f} ms with the largest inputs it can be given (a "
        f"rule's conditions may cost {BUDGET / 1e6:,.0f} ms together: docs/policy.md#cost)"
    )


def _comprehensions(tree: Node) -> str | None:
    """Comprehension macros nested too deep, or too many (module docstring, 2)."""
    count = 0
    deepest = 0
    stack: list[tuple[Node, int]] = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if node.kind == "macro":
            count += 1
            deepest = max(deepest, depth + 1)
            source, _, *body = node.args
            stack.append((source, depth))
            stack.extend((part, depth + 1) for part in body)
        else:
            stack.extend((arg, depth) for arg in node.args)
    if deepest > MAX_COMPREHENSION_NESTING:
        return (
            f"comprehensions nested {deepest} deep (at most {MAX_COMPREHENSION_NESTING}): "
            "the cost grows with the list sizes to that power"
        )
    if count > MAX_COMPREHENSIONS:
        return f"{count} comprehensions (at most {MAX_COMPREHENSIONS})"
    return None


def _argument_keys(tree: Node) -> frozenset[str] | None:
    """The argument names the expression reads, or None when it reads ``arguments`` as a
    whole (iterates it, takes its size, indexes it by a computed key): then it is given all
    of them (docs/policy.md#cost)."""
    keyed = [key for node in tree.walk() if (key := _named_argument(node)) is not None]
    reads = sum(1 for node in tree.walk() if node.kind == "ident" and node.text == "arguments")
    return frozenset(keyed) if len(keyed) == reads else None


def _named_argument(node: Node) -> str | None:
    """The key of a read of one named argument: ``arguments.env``, ``has(arguments.env)``,
    ``arguments["env"]``, ``"env" in arguments``."""
    args = node.args
    if node.kind in ("select", "has") and _is_arguments(args[0]):
        return node.text
    if node.kind == "index" and _is_arguments(args[0]) and args[1].kind == "string":
        return args[1].text
    if node.kind == "call" and node.text == "in" and _is_arguments(args[1]):
        return args[0].text if args[0].kind == "string" else None
    return None


def _is_arguments(node: Node) -> bool:
    return node.kind == "ident" and node.text == "arguments"


def _probe(condition: Condition, section: str) -> str | None:
    """The type probe (module docstring, 5): a wrong type found on typed sample values."""
    samples: dict[str, Any] = {
        "claims": {},
        "subject": "",
        "client_id": "",
        "scopes": [],
        "issuer": "",
        "auth_method": "jwt",
        NAMED[section]: "",
        "arguments": {},
        "backend": "",
        "request": {"ip": ""},
        "now": datetime(2026, 1, 1, tzinfo=UTC),
    }
    context = cel.Context({name: samples[name] for name in condition.reads})
    context.add_function("glob", glob_matches)
    try:
        result = condition.program.execute(context)
    except TypeError:
        return "type error: an operator is applied to operands of the wrong types"
    except RuntimeError as exc:
        called = re.match(r"Undefined variable or function: '(\w+)'", str(exc))
        if called is not None and called.group(1) in FUNCTIONS:
            return f"type error: {called.group(1)}() does not take arguments of these types"
        return None  # a value error (e.g. int("")): the probe's values are not the caller's
    except Exception:
        return None  # a missing key (no has()) and the like: decided at run time
    if not isinstance(result, bool):
        return f"evaluates to {type(result).__name__}, not a bool"
    return None


def _parser_message(text: str) -> str:
    """The parser's own message, on one line, without the library's restatement of the whole
    expression (the position is already ours: file:line:col)."""
    text = re.sub(r"^Failed to parse expression '.*?': ", "", text, count=1, flags=re.DOTALL)
    return " ".join(text.split())[:300]
