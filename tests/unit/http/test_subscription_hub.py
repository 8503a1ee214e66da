"""The replica's subscription bounds and the listen filter (http/subscriptions/subscription_hub.py,
_plan.py).

Through HTTP in tests/integration/policy/test_subscriptions_http.py; here each bound at and just
past its limit, per subject, and what a release gives back.
"""

from __future__ import annotations

import pytest

from gateway.config import Limits
from gateway.errors import InvalidParams, OverCapacity, TooManySubscriptions
from gateway.http.subscriptions.subscription_hub import SubscriptionHub
from gateway.http.subscriptions.subscription_plan import parse_filter
from gateway.seams import ListenFilter


def hub(**limits: int) -> SubscriptionHub:
    return SubscriptionHub(Limits(**limits), None)


def test_streams_per_principal_at_and_past_the_bound() -> None:
    h = hub(max_subscriptions_per_principal=2)
    first, _ = h.admit("ann", 0), h.admit("ann", 0)
    with pytest.raises(TooManySubscriptions):
        h.admit("ann", 0)
    h.admit("bob", 0)  # another subject has its own share
    h.release(first)
    h.release(first)  # twice is once
    h.admit("ann", 0)
    assert len(h) == 3


def test_uris_per_principal_count_across_streams() -> None:
    h = hub(max_subscribed_uris_per_principal=3)
    one = h.admit("ann", 2)
    h.admit("ann", 1)  # at the bound
    with pytest.raises(TooManySubscriptions):
        h.admit("ann", 1)
    h.release(one)
    h.admit("ann", 2)


def test_streams_per_replica_and_the_drain() -> None:
    h = hub(max_subscriptions=2)
    h.admit("a", 0)
    last = h.admit("b", 0)
    with pytest.raises(OverCapacity) as caught:
        h.admit("c", 0)
    assert caught.value.retry_after == 1
    h.release(last)
    slot = h.admit("c", 0)
    h.drain()
    assert slot.queue.get_nowait() == ("drain", None)
    with pytest.raises(OverCapacity):
        h.admit("d", 0)


def test_the_filter_is_parsed_strictly() -> None:
    got = parse_filter(
        {"notifications": {"toolsListChanged": True, "resourceSubscriptions": ["a://x", "a://x"]}},
        4,
    )
    assert got == ListenFilter(tools=True, uris=("a://x",))  # duplicates once
    assert parse_filter({"notifications": {}}, 4).empty
    for bad in (
        {},
        {"notifications": []},
        {"notifications": {"promptsListChanged": 1}},
        {"notifications": {"resourceSubscriptions": ["a" * 8193]}},
        {"notifications": {"resourceSubscriptions": [""]}},
    ):
        with pytest.raises(InvalidParams):
            parse_filter(bad, 4)
    parse_filter({"notifications": {"resourceSubscriptions": ["u://1", "u://2"]}}, 2)
    with pytest.raises(TooManySubscriptions):
        parse_filter({"notifications": {"resourceSubscriptions": ["u://1", "u://2", "u://3"]}}, 2)


def test_a_revocation_reaches_the_streams_bound_to_the_token_while_they_are_open() -> None:
    h = hub()
    one, two, other = h.admit("ann", 0), h.admit("ann", 0), h.admit("bob", 0)
    for slot, token in ((one, b"t1"), (two, b"t1"), (other, b"t2")):
        h.bind(slot, token)
    h.revoked(b"t1")
    assert one.queue.get_nowait() == two.queue.get_nowait() == ("revoked", None)
    assert other.queue.empty()
    h.bind(one, b"t3")  # its next stream runs on another token
    h.bind(two, None)  # its stream ended
    h.release(other)
    h.bind(other, b"t1")  # released: nothing to bind
    h.revoked(b"t1")
    h.revoked(b"t2")
    assert one.queue.empty() and two.queue.empty() and other.queue.empty()
    h.revoked(b"t3")
    assert one.queue.get_nowait() == ("revoked", None)


def test_a_session_counts_no_listen_and_its_get_streams_only_while_attached() -> None:
    h = hub(max_subscriptions=8, max_subscriptions_per_principal=1)  # GET share: 8 // 4 = 2
    sessions = [h.hold("ann") for _ in range(3)]
    assert len(h) == 0  # sessions without a stream hold none of the replica's streams
    h.admit("ann", 0)  # the one listen: sessions took none of the listen slots
    with pytest.raises(TooManySubscriptions):
        h.admit("ann", 0)
    h.attach(sessions[0])
    h.attach(sessions[1])  # at the share
    with pytest.raises(TooManySubscriptions):
        h.attach(sessions[2])
    h.attach(h.hold("bob"))  # another principal has its own share
    assert len(h) == 4
    h.detach(sessions[1])  # that stream ended: its share is back
    h.detach(sessions[1])  # twice is once
    h.attach(sessions[2])
    h.release(sessions[2])  # a session ended with its stream attached
    h.detach(sessions[2])  # the stream's own end afterwards changes nothing
    assert len(h) == 3


def test_listens_and_get_streams_share_the_replicas_bound() -> None:
    h = hub(max_subscriptions=2)  # GET share: at least 1
    h.attach(h.hold("a"))
    h.admit("b", 0)
    session = h.hold("c")  # a session: no stream yet, so room for it
    for over in (lambda: h.attach(session), lambda: h.admit("c", 0)):
        with pytest.raises(OverCapacity):
            over()
    h.drain()
    with pytest.raises(OverCapacity):
        h.hold("d")
