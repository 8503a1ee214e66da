"""The approval record's content (gateway/approvals/records.py) and the claims a session keeps
(gateway/login/person.py): the preview is deterministic and redacts exactly the named paths; a
binding's digest changes with each field; a body reads back as written; kept claims are
bounded."""

from __future__ import annotations

import dataclasses
import hashlib

import pytest

from gateway.approvals.desk import may_decide
from gateway.approvals.records import REDACTED, RecordBody, binding_digest, redacted_preview
from gateway.jsonkit.write import canonical
from gateway.login.person import MAX_CLAIM_VALUES, BrowserIdentity, kept_claims
from gateway.seams import ApprovalBinding, ApprovalRule

BINDING = ApprovalBinding("https://id.example", "alice", "cli", "pay", "send", "A" * 43, "v1", "p")


def test_the_preview_redacts_named_paths_only_and_leaves_the_arguments_alone() -> None:
    arguments = {"card": {"number": "4111", "name": "A"}, "cvc": "123", "amount": 5, "l": [1]}
    preview = redacted_preview(arguments, ("card.number", "cvc", "missing.path", "amount.x"))
    assert preview == {
        "card": {"number": REDACTED, "name": "A"},
        "cvc": REDACTED,
        "amount": 5,
        "l": [1],
    }
    assert arguments["card"] == {"number": "4111", "name": "A"} and arguments["cvc"] == "123"
    again = redacted_preview(dict(reversed(list(arguments.items()))), ("cvc", "card.number"))
    assert canonical(again) == canonical(preview)  # the same text, whatever the key order


def test_every_field_of_the_binding_changes_its_digest() -> None:
    digests = {binding_digest(BINDING)}
    for field in dataclasses.fields(ApprovalBinding):
        digests.add(binding_digest(dataclasses.replace(BINDING, **{field.name: "other"})))
    assert len(digests) == 1 + len(dataclasses.fields(ApprovalBinding))


def test_a_body_reads_back_and_hashes_its_preview() -> None:
    rule = ApprovalRule(by="claim", claim="groups", value="ops", ttl_s=60, redact=("cvc",))
    body = RecordBody(BINDING, rule, {"cvc": REDACTED, "x": 1}, 100, 160)
    assert RecordBody.decode(body.encode()) == body
    assert body.preview_sha256 == hashlib.sha256(body.preview_text.encode()).hexdigest()
    with pytest.raises(ValueError):
        RecordBody.decode(b'{"b": {}}')


def test_who_may_decide() -> None:
    own = RecordBody(BINDING, ApprovalRule(), {}, 0, 1)
    group = RecordBody(BINDING, ApprovalRule(by="claim", claim="groups", value="ops"), {}, 0, 1)
    alice = BrowserIdentity("https://id.example", "alice", (("groups", "ops"),))
    bob = BrowserIdentity("https://id.example", "bob", (("groups", "ops"),))
    other_issuer = BrowserIdentity("https://other.example", "alice")
    assert may_decide(own, alice) and not may_decide(own, bob)
    assert not may_decide(own, other_issuer)
    assert may_decide(group, bob) and not may_decide(group, alice)  # never the caller
    assert not may_decide(group, BrowserIdentity("https://id.example", "carol"))


def test_kept_claims_are_strings_and_bounded() -> None:
    claims = {"groups": ["ops", 3, "", "x" * 200, "ops", *[f"g{i}" for i in range(40)]], "r": "a"}
    kept = kept_claims(claims, ("groups", "r", "absent"))
    assert kept[0] == ("groups", "ops") and ("groups", "x" * 200) not in kept
    assert len(kept) == MAX_CLAIM_VALUES and len(set(kept)) == len(kept)
    assert kept_claims({"groups": "solo"}, ("groups",)) == (("groups", "solo"),)
