"""Legacy session ids (gateway/http/subscriptions/legacy_sessions.py) and the hub's per-URI
counting.

Through HTTP in tests/integration/policy/test_legacy_subscriptions_http.py; here what an id
verifies for, every way one can be spoiled, and the URI count of a session at and past the bound.
"""

from __future__ import annotations

import dataclasses

import pytest

from gateway import b64url
from gateway.config import Limits
from gateway.errors import TooManySubscriptions
from gateway.http.subscriptions.legacy_sessions import MAX_ID_CHARS, SessionIds
from gateway.http.subscriptions.subscription_hub import SubscriptionHub
from gateway.seams import Principal

ANN = Principal(
    subject="ann",
    client_id="cli",
    scopes=frozenset({"mcp:access"}),
    expires_at=2e9,
    issuer="https://id.example",
    fingerprint="f",
)


def test_an_id_verifies_for_its_principal_only() -> None:
    ids = SessionIds()
    sid = ids.mint(ANN)
    assert ids.valid(sid, ANN)
    assert len(sid) == 45 and all(0x21 <= ord(c) <= 0x7E for c in sid)  # transports.mdx
    assert ids.valid(sid, dataclasses.replace(ANN, scopes=frozenset(), fingerprint="g"))
    for other in (
        dataclasses.replace(ANN, subject="bob"),
        dataclasses.replace(ANN, client_id="other-app"),
        dataclasses.replace(ANN, client_id=None),
        dataclasses.replace(ANN, issuer="https://other.example"),
    ):
        assert not ids.valid(sid, other)
    assert not SessionIds().valid(sid, ANN)  # another process (another key)
    assert ids.mint(ANN) != sid


@pytest.mark.parametrize(
    "spoil",
    [
        lambda s: s[:-1] + ("A" if s[-1] != "A" else "B"),  # the MAC altered
        lambda s: ("A" if s[0] != "A" else "B") + s[1:],  # the nonce altered
        lambda s: s.replace(".", ""),
        lambda s: s + "=",  # padded: not canonical
        lambda s: s.split(".")[0] + ".",
        lambda s: "." + s.split(".")[1],
        lambda s: s + "." + s,
        lambda s: s.split(".")[0][:-1] + "." + s.split(".")[1],  # a shorter nonce
        lambda s: "x" * (MAX_ID_CHARS + 1),
        lambda s: "",
    ],
)
def test_a_spoiled_id_never_verifies(spoil: object) -> None:
    ids = SessionIds()
    sid = ids.mint(ANN)
    assert callable(spoil)
    assert not ids.valid(spoil(sid), ANN)


def test_a_non_canonical_spelling_of_the_same_bytes_is_refused() -> None:
    ids = SessionIds(key=b"k" * 32)
    nonce_text, mac_text = ids.mint(ANN).split(".")
    raw = b64url.decode_canonical(mac_text)
    assert raw is not None
    # The last character's unused low bits set: decodes to the same bytes, another spelling.
    last = b64url.encode(raw)[-1]
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    twin = mac_text[:-1] + alphabet[alphabet.index(last) | 1]
    assert twin != mac_text
    assert not ids.valid(f"{nonce_text}.{twin}", ANN)


def test_a_sessions_uris_count_against_the_subjects_bound() -> None:
    hub = SubscriptionHub(Limits(max_subscribed_uris_per_principal=3), None)
    first, second = hub.hold("ann"), hub.admit("ann", 1)  # a session, a listen stream
    hub.grow(first, 2)  # at the bound (2 + 1)
    with pytest.raises(TooManySubscriptions):
        hub.grow(first, 1)
    assert first.uris == 2
    hub.shrink(first, 1)
    hub.grow(first, 1)
    hub.shrink(first, 5)  # never below zero
    assert first.uris == 0
    hub.release(second)
    hub.grow(first, 3)
    hub.release(first)
    hub.grow(first, 1)  # a released slot counts nothing
    assert hub.admit("ann", 3).uris == 3
