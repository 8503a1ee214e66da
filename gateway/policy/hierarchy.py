"""``scope_hierarchy:``: a granted scope implies the scopes listed under it, transitively.

MCP 2026-07-28 authorization (scope challenge handling): servers MUST account for scope
hierarchies when deciding whether the granted scopes suffice. The hierarchy only widens what a
token's scopes *satisfy*; rules, baselines and challenges keep naming the scopes they need, so
a step-up challenge still asks for the least-privilege scope (``tickets:read``), never for a
scope that merely implies it (``admin``). Cycles are load errors (:func:`find_cycles`), so the
closure is a finite DAG walk done once per policy set.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Final

__all__ = ["EXPANSION_CACHE_SIZE", "NO_HIERARCHY", "ScopeHierarchy", "find_cycle", "find_cycles"]

EXPANSION_CACHE_SIZE: Final = 1024
"""Memoised expansions (one per distinct granted scope set); the memo starts over when full."""


class ScopeHierarchy:
    """The declared hierarchy, its transitive closure, and per scope set the expanded grant."""

    __slots__ = ("_closure", "_expanded", "_implied_by", "declared")

    def __init__(self, declared: Mapping[str, tuple[str, ...]] | None = None) -> None:
        self.declared: Mapping[str, tuple[str, ...]] = MappingProxyType(dict(declared or {}))
        """As written (merged over the files): scope -> the scopes it directly implies."""
        closure = {scope: frozenset(_reach(self.declared, scope)) for scope in self.declared}
        self._closure: Mapping[str, frozenset[str]] = closure
        implied_by: dict[str, set[str]] = {}
        for scope, implied in closure.items():
            for target in implied:
                implied_by.setdefault(target, set()).add(scope)
        self._implied_by = {target: tuple(sorted(by)) for target, by in implied_by.items()}
        self._expanded: dict[frozenset[str], frozenset[str]] = {}

    def __bool__(self) -> bool:
        return bool(self.declared)

    def implied(self, scope: str) -> frozenset[str]:
        """Every scope ``scope`` implies (transitively, not itself)."""
        return self._closure.get(scope, frozenset())

    def expand(self, granted: frozenset[str]) -> frozenset[str]:
        """``granted`` plus everything its scopes imply; memoised (bounded)."""
        if not self._closure:
            return granted
        found = self._expanded.get(granted)
        if found is None:
            if len(self._expanded) >= EXPANSION_CACHE_SIZE:
                self._expanded.clear()
            closure = self._closure
            wider = set(granted)
            for scope in granted:
                wider.update(closure.get(scope, ()))
            found = self._expanded[granted] = frozenset(wider)
        return found

    def held(self, scope: str, granted: frozenset[str]) -> str | None:
        """The granted scope that satisfies ``scope``: itself if granted, else the first (by
        name) granted scope implying it; None when nothing granted does."""
        if scope in granted:
            return scope
        return next((by for by in self._implied_by.get(scope, ()) if by in granted), None)

    def holders(self, scopes: Iterable[str], granted: frozenset[str]) -> tuple[str, ...]:
        """The granted scopes a decision over ``scopes`` rested on, in order, no repeats."""
        found = (self.held(scope, granted) for scope in scopes)
        return tuple(dict.fromkeys(scope for scope in found if scope is not None))


NO_HIERARCHY: Final = ScopeHierarchy()
"""A policy without ``scope_hierarchy``: a scope satisfies only itself."""


def _reach(declared: Mapping[str, tuple[str, ...]], start: str) -> set[str]:
    seen: set[str] = set()
    stack = list(declared.get(start, ()))
    while stack:
        scope = stack.pop()
        if scope not in seen:
            seen.add(scope)
            stack.extend(declared.get(scope, ()))
    return seen


def find_cycle(declared: Mapping[str, Iterable[str]]) -> list[str] | None:
    """One cycle of ``declared`` as a path (first element repeated at the end), or None.

    Deterministic: keys are visited in the order given, their implied scopes in order.
    """
    graph = {scope: tuple(implied) for scope, implied in declared.items()}
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(scope: str) -> list[str] | None:
        state[scope] = 1
        path.append(scope)
        for target in graph.get(scope, ()):
            mark = state.get(target)
            if mark == 1:
                return [*path[path.index(target) :], target]
            if mark is None:
                found = visit(target)
                if found is not None:
                    return found
        path.pop()
        state[scope] = 2
        return None

    for scope in graph:
        if scope not in state:
            found = visit(scope)
            if found is not None:
                return found
    return None


def find_cycles(declared: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """One cycle (:func:`find_cycle`'s form) per group of scopes that lead back to each other,
    so that every group is reported at once; groups in the order of their first declared scope.
    """
    graph = {scope: tuple(implied) for scope, implied in declared.items()}
    reach = {scope: _reach(graph, scope) for scope in graph}
    cycles: list[list[str]] = []
    covered: set[str] = set()
    for scope in graph:
        if scope in covered or scope not in reach[scope]:
            continue
        group = {other for other in reach[scope] if other in graph and scope in reach[other]}
        covered |= group
        inside = {
            s: tuple(t for t in implied if t in group) for s, implied in graph.items() if s in group
        }
        found = find_cycle({scope: inside[scope], **inside})
        if found is not None:
            cycles.append(found)
    return cycles
