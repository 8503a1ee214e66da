"""``groups`` in the scope derivation: source, prefix, paths, and the overage forms."""

from __future__ import annotations

import pytest

from gateway.auth.scopes import ScopeVocabulary, derive_scopes
from gateway.config import RolesConfig, ScopeMapEntry
from gateway.errors import GroupsOverage, InvalidToken

GROUPS = RolesConfig(claim=("groups",), prefix="group:")


def test_groups_derive_after_roles_with_their_prefix_and_the_map() -> None:
    vocabulary = ScopeVocabulary([ScopeMapEntry("group:g-1", "team:sre")])
    found = derive_scopes(
        {"scope": "mcp:access", "roles": ["r"], "groups": ["g-1", "g-2"]},
        scope_claims=("scope",),
        roles=RolesConfig(prefix="role:"),
        groups=GROUPS,
        vocabulary=vocabulary,
    )
    assert [(d.source, d.claim, d.value, d.spelled, d.scope) for d in found] == [
        ("scope", "scope", "mcp:access", "mcp:access", "mcp:access"),
        ("role", "roles", "r", "role:r", "role:r"),
        ("group", "groups", "g-1", "group:g-1", "team:sre"),
        ("group", "groups", "g-2", "group:g-2", "group:g-2"),
    ]


def test_a_nested_groups_path_and_no_groups_at_all() -> None:
    nested = RolesConfig(claim=("ext", "groups"), prefix="")
    found = derive_scopes({"ext": {"groups": ["a"]}}, scope_claims=(), groups=nested)
    assert [(d.claim, d.scope) for d in found] == [("ext.groups", "a")]
    assert derive_scopes({"sub": "x"}, scope_claims=(), groups=GROUPS) == ()


@pytest.mark.parametrize(
    "claims",
    [
        {"_claim_names": {"groups": "src1"}, "_claim_sources": {"src1": {"endpoint": "x"}}},
        {"hasgroups": True},
    ],
)
def test_an_overage_is_refused_not_read_as_no_groups(claims: dict[str, object]) -> None:
    with pytest.raises(GroupsOverage):
        derive_scopes(claims, scope_claims=(), groups=GROUPS)
    # Without groups configured the overage does not matter (groups feed no decision).
    assert derive_scopes(claims, scope_claims=()) == ()


def test_overage_markers_that_do_not_name_the_groups_claim_are_ignored() -> None:
    for claims in (
        {"_claim_names": {"other": "src1"}},
        {"_claim_names": "groups"},
        {"hasgroups": "true"},
    ):
        assert derive_scopes(claims, scope_claims=(), groups=GROUPS) == ()
    # Groups present: the claim itself is used, whatever else the token says.
    found = derive_scopes({"groups": ["a"], "hasgroups": True}, scope_claims=(), groups=GROUPS)
    assert [d.scope for d in found] == ["group:a"]


@pytest.mark.parametrize("value", ["a b", [1], [""], {"a": 1}])
def test_a_groups_claim_that_is_not_an_array_of_strings_is_malformed(value: object) -> None:
    with pytest.raises(InvalidToken) as caught:
        derive_scopes({"groups": value}, scope_claims=(), groups=GROUPS)
    assert not isinstance(caught.value, GroupsOverage)
    assert caught.value.detail == "groups claim is not an array of strings"
