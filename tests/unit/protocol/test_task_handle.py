"""The task handle: sealed to its creator, tamper-evident, opened by any key of the ring."""

from __future__ import annotations

import base64
import dataclasses
import os

import pytest

from gateway.config import SealKey
from gateway.errors import InvalidRequestState
from gateway.protocol.sealed_state import Claims, Sealer
from gateway.protocol.task_handle import (
    MAX_HANDLE_CHARS,
    PREFIX,
    HandleRefused,
    HandleTooLarge,
    TaskClaims,
    TaskHandles,
    check_owner,
    handle_digest,
)
from gateway.seams import Principal

RESOURCE = "https://mcp.example.test/mcp"
K1 = SealKey("k1", os.urandom(32))
K2 = SealKey("k2", os.urandom(32))
ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def _claims(**changes: object) -> TaskClaims:
    base = TaskClaims(
        backend="default",
        upstream_id="786512e2-9e0d-44bd-8f29-789f320fe840",
        issuer="https://id.example.test",
        subject="alice",
        client_id="cli",
        tool="build_report",
        issued_at=1000,
        expires_at=4600,
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def _principal(**changes: object) -> Principal:
    base = Principal(
        subject="alice",
        client_id="cli",
        scopes=frozenset(),
        expires_at=9e9,
        issuer="https://id.example.test",
        fingerprint="fp",
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def _handles(*keys: SealKey, seal: str = "k1", resource: str = RESOURCE) -> TaskHandles:
    return TaskHandles(keys or (K1,), seal, resource=resource)


def _refusal(handles: TaskHandles, handle: str) -> str:
    with pytest.raises(HandleRefused) as info:
        handles.open(handle)
    return info.value.reason


class TestRoundTrip:
    def test_what_is_sealed_opens_unchanged(self) -> None:
        handles = _handles()
        for claims in (_claims(), _claims(client_id=None, upstream_id="é" * 128)):
            assert handles.open(handles.seal(claims)) == claims

    def test_the_handle_hides_every_claim(self) -> None:
        handle = _handles().seal(_claims(upstream_id="UPSTREAM-ID-42"))
        assert handle.startswith(PREFIX)
        assert set(handle[len(PREFIX) :]) <= set(ALPHABET)
        raw = base64.urlsafe_b64decode(handle[3:] + "=" * (-len(handle[3:]) % 4))
        for secret in (b"UPSTREAM", b"alice", b"build_report", b"default", b"cli"):
            assert secret not in raw

    def test_two_handles_of_one_task_differ_but_the_digest_of_each_is_stable(self) -> None:
        handles = _handles()
        first, second = handles.seal(_claims()), handles.seal(_claims())
        assert first != second
        assert handle_digest(first) == handle_digest(first) != handle_digest(second)
        assert len(handle_digest(first)) == 32

    def test_a_key_rotation_keeps_old_handles_open(self) -> None:
        old = _handles(K1, seal="k1").seal(_claims())
        rotated = _handles(K1, K2, seal="k2")
        assert rotated.open(old) == _claims()
        assert _refusal(_handles(K2, seal="k2"), old) == "tampered"  # k1 dropped: unknown key

    def test_oversized_claims_are_refused_at_sealing(self) -> None:
        with pytest.raises(HandleTooLarge):
            _handles().seal(_claims(subject="s" * 2100))

    def test_the_largest_handle_fits_the_bound(self) -> None:
        # Claims filling the bound: the handle still fits what a handle may be.
        claims = _claims(subject="s" * 800, issuer="i" * 500, tool="t" * 64, client_id="c" * 400)
        handle = _handles().seal(claims)
        assert len(handle) <= MAX_HANDLE_CHARS


class TestRefusals:
    def test_every_single_bit_flip_is_refused(self) -> None:
        handles = _handles()
        body = handles.seal(_claims())[len(PREFIX) :]
        raw = bytearray(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
        for index in range(len(raw)):
            for bit in range(8):
                flipped = bytearray(raw)
                flipped[index] ^= 1 << bit
                forged = PREFIX + base64.urlsafe_b64encode(bytes(flipped)).decode().rstrip("=")
                assert _refusal(handles, forged) == "tampered"

    @pytest.mark.parametrize(
        "handle",
        ["", "t1.", "786512e2-9e0d", "t2.AQJrMQ", "T1.AQJrMQ", "t1.!!!", "t1.AQJrMQ", "x" * 40],
    )
    def test_garbage_is_refused(self, handle: str) -> None:
        assert _refusal(_handles(), handle) in ("malformed", "tampered")

    def test_too_long_is_refused_before_decoding(self) -> None:
        assert _refusal(_handles(), PREFIX + "A" * MAX_HANDLE_CHARS) == "malformed"

    def test_a_request_state_never_opens_as_a_handle_nor_the_reverse(self) -> None:
        # The same keys, another label: one secret never keys two purposes.
        sealer = Sealer((K1,), "k1", resource=RESOURCE, max_state_bytes=1024)
        state = sealer.seal(
            Claims("alice", "https://id.example.test", "cli", "t", "default", "a", "v", 1, 2, 1)
        )
        assert _refusal(_handles(), PREFIX + state) == "tampered"
        handle = _handles().seal(_claims())
        with pytest.raises(InvalidRequestState):
            sealer.open(handle[len(PREFIX) :])

    def test_another_deployment_cannot_open_it(self) -> None:
        handle = _handles(resource="https://other.example.test/mcp").seal(_claims())
        assert _refusal(_handles(), handle) == "tampered"


class TestOwner:
    def test_the_creator_passes_until_expiry(self) -> None:
        check_owner(_claims(), _principal(), 4599.9)
        with pytest.raises(HandleRefused) as info:
            check_owner(_claims(), _principal(), 4600)
        assert info.value.reason == "expired"

    @pytest.mark.parametrize(
        ("changes", "reason"),
        [
            ({"subject": "mallory"}, "subject"),
            ({"client_id": "other-client"}, "client"),
            ({"client_id": None}, "client"),
            ({"issuer": "https://evil.example.test"}, "issuer"),
        ],
    )
    def test_another_caller_is_refused(self, changes: dict[str, object], reason: str) -> None:
        with pytest.raises(HandleRefused) as info:
            check_owner(_claims(), _principal(**changes), 2000)
        assert info.value.reason == reason
