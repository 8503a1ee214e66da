"""Where a principal's scopes come from, per issuer, and how they are spelled back.

The policy has one vocabulary; each issuer has its own spelling (Entra's clients request
``api://<app id>/mcp.access``, Keycloak's ``mcp:access``). Inward, a token's scopes are derived
in this order, one step per :class:`DerivedScope` field:

1. the claim (``scope_claims`` members, e.g. ``scp``; with ``roles``, the roles claim; with
   ``groups``, the groups claim);
2. the prefix (``scope_prefix`` for scopes, the roles' or groups' ``prefix`` for their values):
   the scope as the issuer's clients request it (``spelled``);
3. ``scope_map`` (:class:`ScopeVocabulary`): the policy's name for it (``scope``); a spelling
   that is not a key passes unchanged, unless the issuer says ``scope_map_only``: then it is
   dropped (``scope`` None), so a less trusted issuer grants only what its map names.

Policy code only ever sees the result (``Principal.scopes``); whatever the policy does with the
scopes afterwards (a scope hierarchy, conditions) starts from the policy vocabulary. Outward
(the 403 challenge's ``scope=``, ``missing_scopes``), :meth:`ScopeVocabulary.outward` spells the
policy's names as the issuer of the presented token expects them: the first key mapping to a
name, or the name itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from gateway.config import IssuerConfig, RolesConfig, ScopeMapEntry
from gateway.errors import GroupsOverage, InvalidToken

__all__ = [
    "IDENTITY",
    "MAX_SCOPES",
    "MAX_SCOPE_CHARS",
    "DerivedScope",
    "ScopeVocabulary",
    "derive_scopes",
    "granted",
]

MAX_SCOPES: Final = 256
"""Most scopes (scope claims and roles together) one JWT may carry."""
MAX_SCOPE_CHARS: Final = 256


class ScopeVocabulary:
    """One issuer's ``scope_map``: its spellings -> the policy's names, and back.

    ``only`` (``scope_map_only``): a spelling that is not a key names no policy scope at all."""

    __slots__ = ("_inward", "_only", "_outward")

    def __init__(self, entries: Iterable[ScopeMapEntry] = (), *, only: bool = False) -> None:
        inward: dict[str, str] = {}
        outward: dict[str, str] = {}
        for entry in entries:
            inward[entry.spelled] = entry.scope
            outward.setdefault(entry.scope, entry.spelled)  # the first key names it outward
        self._inward: Mapping[str, str] = inward
        self._outward: Mapping[str, str] = outward
        self._only = only

    @classmethod
    def for_issuer(cls, issuer: IssuerConfig) -> ScopeVocabulary:
        if not issuer.scope_map and not issuer.scope_map_only:
            return IDENTITY
        return cls(issuer.scope_map, only=issuer.scope_map_only)

    def __bool__(self) -> bool:
        """False when the map is empty (every scope is spelled as the policy spells it)."""
        return bool(self._inward)

    def inward(self, spelled: str) -> str | None:
        """The policy's name for a scope as this issuer's clients request it; None when the
        issuer is ``scope_map_only`` and the spelling is no key (the scope is dropped)."""
        if self._only:
            return self._inward.get(spelled)
        return self._inward.get(spelled, spelled)

    def outward(self, scopes: Iterable[str]) -> tuple[str, ...]:
        """Policy names -> this issuer's spellings, in order, first occurrence wins."""
        if not self._outward:
            return tuple(scopes)
        get = self._outward.get
        return tuple(dict.fromkeys(get(scope, scope) for scope in scopes))


IDENTITY: Final = ScopeVocabulary()
"""The vocabulary of an issuer without ``scope_map``."""


@dataclass(frozen=True, slots=True)
class DerivedScope:
    """One scope of a token, from its claim to the policy's name (``policy explain``)."""

    source: Literal["scope", "role", "group"]
    claim: str
    """The claim it was read from (a roles or groups path joined with ``.``)."""
    value: str
    """As the token says it."""
    spelled: str
    """After the prefix: as the issuer's clients request it (and its challenges name it)."""
    scope: str | None
    """After ``scope_map``: the policy's name, what ``Principal.scopes`` holds; None when the
    issuer's ``scope_map_only`` dropped it (no key spells it)."""


def granted(derived: Iterable[DerivedScope]) -> frozenset[str]:
    """The policy scopes ``derived`` grants (``Principal.scopes``): the dropped ones left out."""
    return frozenset(d.scope for d in derived if d.scope is not None)


def derive_scopes(
    claims: Mapping[str, Any],
    *,
    scope_claims: tuple[str, ...],
    scope_prefix: str = "",
    roles: RolesConfig | None = None,
    groups: RolesConfig | None = None,
    vocabulary: ScopeVocabulary = IDENTITY,
    strings_only: bool = False,
    bounded: bool = True,
) -> tuple[DerivedScope, ...]:
    """Every scope of ``claims`` with its provenance (see the module docstring for the order).

    A scope claim is a space-separated string (RFC 6749 §3.3) or, unless ``strings_only`` (an
    introspection answer's ``scope``, RFC 7662 §2.2), an array of scope strings; the roles claim
    and the groups claim an array of non-empty strings. Anything else, and with ``bounded`` more
    than :data:`MAX_SCOPES` scopes or one longer than :data:`MAX_SCOPE_CHARS`, raises
    InvalidToken; a group overage (:func:`_check_overage`) raises GroupsOverage.
    """
    found = tuple(
        _derived(
            claims,
            scope_claims=scope_claims,
            scope_prefix=scope_prefix,
            roles=roles,
            groups=groups,
            vocabulary=vocabulary,
            strings_only=strings_only,
        )
    )
    if bounded and (
        len(found) > MAX_SCOPES or any(len(d.spelled) > MAX_SCOPE_CHARS for d in found)
    ):
        raise InvalidToken(detail="too many or too long scopes")
    return found


def _derived(
    claims: Mapping[str, Any],
    *,
    scope_claims: tuple[str, ...],
    scope_prefix: str,
    roles: RolesConfig | None,
    groups: RolesConfig | None,
    vocabulary: ScopeVocabulary,
    strings_only: bool,
) -> Iterator[DerivedScope]:
    inward = vocabulary.inward
    for name in scope_claims:
        if name in claims:
            for value in _scope_values(claims[name], name, strings_only):
                spelled = scope_prefix + value
                yield DerivedScope("scope", name, value, spelled, inward(spelled))
    lists: tuple[tuple[Literal["role", "group"], RolesConfig | None], ...] = (
        ("role", roles),
        ("group", groups),
    )
    for source, names in lists:
        if names is None:
            continue
        found = _at_path(claims, names.claim)
        if found is None and source == "group":
            _check_overage(claims, names.claim)
        if found is not None:
            if not isinstance(found, list) or not all(isinstance(r, str) and r for r in found):
                raise InvalidToken(detail=f"{source}s claim is not an array of strings")
            claim = ".".join(names.claim)
            for value in found:
                spelled = names.prefix + value
                yield DerivedScope(source, claim, value, spelled, inward(spelled))


def _check_overage(claims: Mapping[str, Any], path: tuple[str, ...]) -> None:
    """Entra ID leaves ``groups`` out of a token when the user is in too many groups (JWT:
    more than 200) and says so instead: ``_claim_names: {"groups": "src1"}`` (with
    ``_claim_sources`` pointing at Microsoft Graph), or ``hasgroups: true`` (implicit flow).
    Reading that as "no groups" would decide on a partial identity: refuse the token."""
    names = claims.get("_claim_names")
    if (isinstance(names, dict) and path[0] in names) or claims.get("hasgroups") is True:
        raise GroupsOverage(
            detail="group overage: the issuer left the groups out of the token "
            "(_claim_names / hasgroups)"
        )


def _scope_values(value: object, name: str, strings_only: bool) -> list[str]:
    if isinstance(value, str):
        # RFC 6749 §3.3: space-delimited; tolerate repeated spaces rather than empty scopes.
        return [s for s in value.split(" ") if s]
    if strings_only:
        raise InvalidToken(detail=f"{name} is not a string")
    if isinstance(value, list) and all(
        isinstance(item, str) and item and " " not in item for item in value
    ):
        return list(value)
    raise InvalidToken(detail=f"{name} is not a string or an array of scope strings")


def _at_path(claims: Mapping[str, Any], path: tuple[str, ...]) -> object:
    node: object = claims
    for part in path:
        if not isinstance(node, dict):
            return None
        node = node.get(part)
    return node
