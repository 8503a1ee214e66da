"""Load-time checks of ``when:`` conditions: every mistake the library lets us find, at
``file:line:col`` of the expression, all of them in one ``check``.

``common-expression-language`` parses and evaluates; it has no type checker and no cost model.
So, in this order, an expression is refused when it is:

1. empty, or longer than :data:`MAX_EXPRESSION_LENGTH` characters;
2. nested deeper than :data:`MAX_NESTING` brackets, or with comprehension macros (``all``,
   ``exists``, ``exists_one``, ``map``, ``filter``) nested deeper than
   :data:`MAX_COMPREHENSION_NESTING` or more than :data:`MAX_COMPREHENSIONS` of them (the cost
   bound that stands in for CEL's cost model: an expression's work is linear in its length
   times the sizes of the lists it walks, to the power of the comprehension nesting; the lists
   are bounded by the token and the request body);
3. not CEL (the parser's message);
4. reading a name that is no variable of its section (:func:`.conditions.variables_of`),
   or calling a function that is neither CEL's (as this library implements it) nor ``glob``;
5. a type error found by a probe: the expression is evaluated once with values of the right
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

MACROS: Final = ("all", "exists", "exists_one", "map", "filter")
FUNCTIONS: Final = frozenset({
    "size", "contains", "startsWith", "endsWith", "matches",
    "int", "uint", "double", "string", "bytes", "timestamp", "duration", "dyn", "type",
    "getFullYear", "getMonth", "getDayOfYear", "getDayOfMonth", "getDate", "getDayOfWeek",
    "getHours", "getMinutes", "getSeconds", "getMilliseconds",
    "glob",
})  # fmt: skip
"""The named functions a condition may call (operators are always allowed)."""
TYPE_NAMES: Final = frozenset(
    {"bool", "int", "uint", "double", "string", "bytes", "list", "map", "null_type", "type"}
)
"""Identifiers that name CEL types (``type(x) == string``), not variables."""

_TOKEN: Final = re.compile(
    r"""(?P<string>[rRbB]{0,2}(?:'''(?:\\.|[^\\])*?'''|\"\"\"(?:\\.|[^\\])*?\"\"\"|'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*"))"""
    r"|(?P<macro>\.\s*(?:exists_one|exists|all|map|filter)\s*\()"
    r"|(?P<open>[(\[{])|(?P<close>[)\]}])",
    re.DOTALL,
)


def compile_condition(source: str, where: str, section: str) -> tuple[Condition | None, str | None]:
    """(condition, None), or (None, the reason it is refused)."""
    if len(source) > MAX_EXPRESSION_LENGTH:
        return None, f"longer than {MAX_EXPRESSION_LENGTH} characters"
    if not source.strip():
        return None, "a condition must not be empty"
    too_costly = _bounds(source)
    if too_costly is not None:
        return None, too_costly
    try:
        program = cel.compile(source)
    except Exception as exc:  # the library raises ValueError with the CEL parser's message
        return None, f"CEL: {_parser_message(str(exc))}"
    allowed = variables_of(section)
    names = list(program.variables())
    unknown = sorted(
        n for n in names if n not in allowed and n not in TYPE_NAMES and not _bound(source, n)
    )
    if unknown:
        return None, (
            f"unknown variable {', '.join(unknown)} "
            f"({section} conditions may read: {', '.join(allowed)})"
        )
    functions = sorted(f for f in program.functions() if f[:1].isalpha() and f not in FUNCTIONS)
    if functions:
        return None, f"unknown function {', '.join(functions)} (docs/policy.md#conditions)"
    reads = tuple(name for name in allowed if name in names)
    condition = Condition(source, where, program, reads)
    wrong = _probe(condition, section)
    if wrong is not None:
        return None, wrong
    return condition, None


def conditions_of(
    doc: Located, path: tuple[str, str], section: str, when: Any, *, problems: bool
) -> tuple[Condition, ...]:
    """Compile ``when:`` (one expression or a list); with ``problems``, report each refusal
    at its position (every one of them, not only the first)."""
    if isinstance(when, str):
        items: list[tuple[tuple[Any, ...], Any]] = [((*path, "when"), when)]
    elif isinstance(when, list):
        items = [((*path, "when", index), item) for index, item in enumerate(when)]
    else:
        return ()
    found = []
    for where_path, source in items:
        if not isinstance(source, str):
            continue  # reported by the schema
        condition, reason = compile_condition(source, doc.where(where_path), section)
        if condition is not None:
            found.append(condition)
        elif problems:
            doc.problem(where_path, reason or "invalid condition")
    return tuple(found)


def _bounds(source: str) -> str | None:
    """The cost bound (module docstring, 2): bracket and comprehension nesting, outside
    string literals."""
    stack: list[bool] = []
    deepest = comprehensions = 0
    for match in _TOKEN.finditer(source):
        kind = match.lastgroup
        if kind == "string":
            continue
        if kind == "close":
            if stack:
                stack.pop()
            continue
        is_macro = kind == "macro"
        stack.append(is_macro)
        if len(stack) > MAX_NESTING:
            return f"nested deeper than {MAX_NESTING} brackets"
        if is_macro:
            comprehensions += 1
            deepest = max(deepest, sum(stack))
    if deepest > MAX_COMPREHENSION_NESTING:
        return (
            f"comprehensions nested {deepest} deep (at most {MAX_COMPREHENSION_NESTING}): "
            "the cost grows with the list sizes to that power"
        )
    if comprehensions > MAX_COMPREHENSIONS:
        return f"{comprehensions} comprehensions (at most {MAX_COMPREHENSIONS})"
    return None


def _probe(condition: Condition, section: str) -> str | None:
    """The type probe (module docstring, 5): a wrong type found on typed sample values."""
    samples: dict[str, Any] = {
        "claims": {}, "subject": "", "client_id": "", "scopes": [], "issuer": "",
        "auth_method": "jwt", NAMED[section]: "", "arguments": {}, "backend": "",
        "request": {"ip": ""}, "now": datetime(2026, 1, 1, tzinfo=UTC),
    }  # fmt: skip
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


def _bound(source: str, name: str) -> bool:
    """Whether ``name`` is the variable of a comprehension macro in ``source``."""
    macros = "|".join(MACROS)
    return re.search(rf"\.\s*(?:{macros})\s*\(\s*{re.escape(name)}\s*,", source) is not None


def _parser_message(text: str) -> str:
    """The parser's own message, on one line, without the library's restatement of the whole
    expression (the position is already ours: file:line:col)."""
    text = re.sub(r"^Failed to parse expression '.*?': ", "", text, count=1, flags=re.DOTALL)
    return " ".join(text.split())[:300]
