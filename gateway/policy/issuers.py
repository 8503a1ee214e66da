"""Whose names a rule's ``subjects`` and ``clients`` are: every entry belongs to one issuer.

A ``sub`` or a ``client_id`` is a name its issuer gives, and two issuers may both have an
``alice`` or an ``ops-console``. So an entry applies to the principals of one issuer only:

* a plain entry (``alice``, ``ops-console``) to the **first** configured issuer (``issuer:``, or
  the first of ``issuers:``): a single-issuer configuration reads exactly as before, and with
  several issuers an unqualified name fails closed for the others;
* a qualified entry (``{issuer: <url>, subject: alice}``, ``{issuer: <url>, client: id}``) to
  the issuer whose ``url`` is exactly that.

The loader resolves each entry to its issuer once (:func:`entries`), given the configured issuers'
urls; without them (an offline tool that has no configuration) a plain entry applies to no principal
at all, so a forgotten argument cannot widen a rule. ``check`` and startup warn about plain entries
under several issuers and about issuers no configuration has
(:func:`gateway.policy.warnings.issuer_warnings`), never refuse: such an entry only ever grants
less.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from gateway.policy.glob import Glob
from gateway.seams import Principal
from gateway.yaml_source import Located

__all__ = [
    "NAME",
    "NO_CLASSES",
    "Entry",
    "Kind",
    "admits_client",
    "admits_subject",
    "canonical_entries",
    "check_entries",
    "describe_entries",
    "entries",
]

Kind = Literal["subjects", "clients"]
"""Which list of a rule an entry stands in."""

NO_CLASSES: Final = "character classes ([...]) are not supported; use * and ?"
NAME: Final = {"subjects": "subject", "clients": "client"}
"""The key of one entry of each list (``{issuer: <url>, subject: ...}``)."""
"""The key of a qualified entry's name: ``{issuer: ..., subject: ...}``, ``{issuer, client}``."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One ``subjects`` or ``clients`` entry and the issuer it applies to."""

    value: str
    """The ``sub`` pattern or the ``client_id``, as written."""
    issuer: str | None
    """The issuer whose principals it applies to: the written one, else the first configured
    issuer; None when the policy was loaded without issuers (then it applies to nobody)."""
    written: str | None = None
    """The issuer as written; None for a plain entry."""
    where: str = field(default="", compare=False)
    glob: Glob | None = field(default=None, compare=False)
    """The compiled pattern of a ``subjects`` entry (None for ``clients``)."""

    @property
    def qualified(self) -> bool:
        return self.written is not None


def check_entries(doc: Located, path: tuple[str, str], raw: Any) -> None:
    """What the schema cannot say about a rule's ``subjects`` (pattern syntax)."""
    subjects = raw.get("subjects") if isinstance(raw, dict) else None
    for index, entry in enumerate(subjects if isinstance(subjects, list) else []):
        value = entry.get("subject") if isinstance(entry, dict) else entry
        if isinstance(value, str) and ("[" in value or "]" in value):
            doc.problem((*path, "subjects", index), NO_CLASSES)


def entries(
    doc: Located, path: tuple[str, str], kind: Kind, body: Mapping[str, Any], issuers: Sequence[str]
) -> tuple[Entry, ...] | None:
    """A validated rule's ``subjects`` or ``clients`` (None: the rule has none), each entry
    resolved to its issuer."""
    raw = body.get(kind)
    if raw is None:
        return None
    first = issuers[0] if issuers else None
    found = []
    for index, item in enumerate(raw):
        if isinstance(item, dict):
            value, written = item[NAME[kind]], item["issuer"]
        else:
            value, written = item, None
        found.append(
            Entry(
                value=value,
                issuer=written if written is not None else first,
                written=written,
                where=doc.where((*path, kind, index)),
                glob=Glob(value) if kind == "subjects" else None,
            )
        )
    return tuple(found)


def admits_client(clients: tuple[Entry, ...], principal: Principal) -> bool:
    """Whether one of ``clients`` names the principal's ``client_id`` at its issuer."""
    client_id, issuer = principal.client_id, principal.issuer
    return any(e.value == client_id and e.issuer == issuer for e in clients)


def admits_subject(subjects: tuple[Entry, ...], principal: Principal) -> bool:
    """Whether one of ``subjects`` matches the principal's ``sub`` at its issuer."""
    issuer, subject = principal.issuer, principal.subject
    return any(
        e.issuer == issuer and e.glob is not None and e.glob.matches(subject) for e in subjects
    )


def canonical_entries(kind: Kind, found: tuple[Entry, ...] | None) -> list[Any] | None:
    """The entries' part of the policy version, as written: a policy of plain entries keeps the
    version it had before entries could name an issuer (``clients`` sorted, ``subjects`` in
    order, plain names first)."""
    if found is None:
        return None
    shown: list[Any] = [
        e.value if e.written is None else {"issuer": e.written, NAME[kind]: e.value} for e in found
    ]
    if kind == "clients":
        order = sorted(range(len(found)), key=lambda i: _client_order(found[i]))
        shown = [shown[i] for i in order]
    return shown


def _client_order(entry: Entry) -> tuple[bool, str, str]:
    return entry.written is not None, entry.written or "", entry.value


def describe_entries(found: Iterable[Entry]) -> list[dict[str, Any]]:
    """``policy explain``'s view of entries: each name with the issuer it applies to."""
    return [{"name": e.value, "issuer": e.issuer, "qualified": e.qualified} for e in found]
