"""The sealed ``requestState`` envelope: authenticity, bindings, rotation, canonical text."""

from __future__ import annotations

import base64
import dataclasses
import os

import pytest

from gateway.config import SealKey
from gateway.config.input_requests import max_sealed_chars
from gateway.errors import InvalidRequestState
from gateway.protocol.sealed_state import (
    Binding,
    Claims,
    Sealer,
    SealError,
    arguments_digest,
    check_bindings,
)

RESOURCE = "https://mcp.example.test/mcp"
K1 = SealKey("k1", os.urandom(32))
K2 = SealKey("k2", os.urandom(32))


def _claims(**changes: object) -> Claims:
    base = Claims(
        subject="alice",
        issuer="https://id.example.test",
        client_id="cli",
        tool="confirm_delete",
        backend="default",
        arguments=arguments_digest({"path": "/tmp/x"}),
        policy_version="abc123",
        issued_at=1000,
        expires_at=1600,
        round=1,
        requests={"confirm": "elicitation/create"},
        state="upstream-state-é",
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def _sealer(*keys: SealKey, seal: str = "k1", resource: str = RESOURCE) -> Sealer:
    return Sealer(keys or (K1,), seal, resource=resource, max_state_bytes=8192)


def _refused(sealer: Sealer, text: str) -> InvalidRequestState:
    with pytest.raises(InvalidRequestState) as info:
        sealer.open(text)
    return info.value


class TestRoundTrip:
    def test_what_is_sealed_opens_unchanged(self) -> None:
        sealer = _sealer()
        for claims in (_claims(), _claims(state=None, client_id=None, requests={})):
            assert sealer.open(sealer.seal(claims)) == claims

    def test_an_empty_upstream_state_is_not_an_absent_one(self) -> None:
        sealer = _sealer()
        assert sealer.open(sealer.seal(_claims(state=""))).state == ""
        assert sealer.open(sealer.seal(_claims(state=None))).state is None

    def test_the_text_is_base64url_and_reveals_neither_state_nor_bindings(self) -> None:
        text = _sealer().seal(_claims(state="SECRET-UPSTREAM-STATE"))
        assert set(text) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        assert raw[0] == 1 and raw[1] == 2 and raw[2:4] == b"k1"  # version, key id
        for secret in (b"SECRET", b"alice", b"confirm_delete", b"elicitation"):
            assert secret not in raw

    def test_every_seal_uses_a_fresh_nonce(self) -> None:
        sealer = _sealer()
        assert sealer.seal(_claims()) != sealer.seal(_claims())


class TestTampering:
    def test_every_single_bit_flip_is_refused(self) -> None:
        sealer = _sealer()
        text = sealer.seal(_claims())
        raw = bytearray(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
        for index in range(len(raw)):
            for bit in range(8):
                flipped = bytearray(raw)
                flipped[index] ^= 1 << bit
                forged = base64.urlsafe_b64encode(bytes(flipped)).decode().rstrip("=")
                assert _refused(sealer, forged).reason == "invalid"

    def test_a_text_with_different_unused_padding_bits_is_refused(self) -> None:
        # Lenient base64 decoders map several texts to the same bytes; one spelling is accepted.
        sealer = _sealer()
        text = sealer.seal(_claims())
        assert len(text) % 4 in (2, 3)
        alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
        last = alphabet.index(text[-1])
        twin = text[:-1] + alphabet[last ^ 1]  # flips the lowest, unused bit of the last char
        pad = "=" * (-len(text) % 4)
        assert base64.urlsafe_b64decode(twin + pad) == base64.urlsafe_b64decode(text + pad)
        assert _refused(sealer, twin).detail == "not canonical base64url"

    @pytest.mark.parametrize(
        "text", ["", "!!!!", "a", "AQ", "AQJrMQ", "AgJrMQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"]
    )
    def test_garbage_and_truncated_envelopes_are_refused(self, text: str) -> None:
        assert _refused(_sealer(), text).reason == "invalid"

    def test_too_long_is_refused_before_decoding(self) -> None:
        sealer = _sealer()
        refused = _refused(sealer, "A" * (max_sealed_chars(8192) + 1))
        assert refused.detail == "not a sealed state"

    def test_a_key_id_no_one_configured_is_refused(self) -> None:
        sealed = _sealer(SealKey("zz", os.urandom(32)), seal="zz").seal(_claims())
        refused = _refused(_sealer(), sealed)
        assert (refused.reason, refused.detail) == ("invalid", "unknown seal key id")

    def test_the_same_key_id_with_another_key_is_refused(self) -> None:
        impostor = SealKey("k1", os.urandom(32))
        refused = _refused(_sealer(), _sealer(impostor).seal(_claims()))
        assert refused.detail == "authentication failed"

    def test_a_state_of_another_deployment_sharing_the_key_is_refused(self) -> None:
        other = _sealer(resource="https://staging.example.test/mcp").seal(_claims())
        assert _refused(_sealer(), other).detail == "authentication failed"

    def test_swapping_the_key_id_in_the_header_is_refused(self) -> None:
        both = _sealer(K1, K2)
        raw = bytearray(base64.urlsafe_b64decode(both.seal(_claims()) + "=="))
        raw[3] = ord("2")  # "k1" -> "k2": a configured key, but not the one that sealed
        forged = base64.urlsafe_b64encode(bytes(raw)).decode().rstrip("=")
        assert _refused(both, forged).detail == "authentication failed"


class TestRotation:
    def test_old_keys_open_and_the_named_key_seals(self) -> None:
        old = _sealer(K1)
        rotated = _sealer(K2, K1, seal="k2")
        assert rotated.open(old.seal(_claims())) == _claims()
        fresh = rotated.seal(_claims())
        assert base64.urlsafe_b64decode(fresh[:8])[:4] == b"\x01\x02k2"
        assert _refused(old, fresh).detail == "unknown seal key id"

    def test_a_seal_key_id_that_names_no_key_is_a_programming_error(self) -> None:
        with pytest.raises(ValueError, match="seal_key_id"):
            _sealer(K1, seal="k2")


class TestBounds:
    def test_a_state_at_the_limit_seals_one_byte_more_does_not(self) -> None:
        sealer = Sealer((K1,), "k1", resource=RESOURCE, max_state_bytes=256)
        at = sealer.seal(_claims(state="x" * 256))
        assert len(at) <= max_sealed_chars(256)
        with pytest.raises(SealError):
            sealer.seal(_claims(state="x" * 257))

    def test_a_sealed_text_longer_than_clients_may_send_is_not_issued(self) -> None:
        sealer = Sealer((K1,), "k1", resource=RESOURCE, max_state_bytes=8192, max_text_chars=600)
        sealer.seal(_claims(state="x" * 100))
        with pytest.raises(SealError):
            sealer.seal(_claims(state="x" * 400))


class TestBindings:
    BINDING = Binding(
        subject="alice",
        issuer="https://id.example.test",
        client_id="cli",
        tool="confirm_delete",
        arguments=arguments_digest({"path": "/tmp/x"}),
    )

    def test_the_same_call_before_expiry_fits(self) -> None:
        check_bindings(_claims(), self.BINDING, now=1599.9)

    def test_at_expiry_it_is_expired(self) -> None:
        with pytest.raises(InvalidRequestState) as info:
            check_bindings(_claims(), self.BINDING, now=1600)
        assert info.value.reason == "expired"

    @pytest.mark.parametrize(
        ("field", "value"),
        [
            ("subject", "bob"),
            ("issuer", "https://other-issuer.example.test"),
            ("client_id", "other-client"),
            ("client_id", None),
            ("tool", "another_tool"),
            ("arguments", arguments_digest({"path": "/etc"})),
        ],
    )
    def test_any_other_binding_is_a_mismatch(self, field: str, value: object) -> None:
        binding = dataclasses.replace(self.BINDING, **{field: value})  # type: ignore[arg-type]
        with pytest.raises(InvalidRequestState) as info:
            check_bindings(_claims(), binding, now=1000)
        assert info.value.reason == "mismatch"
        assert info.value.detail == f"requestState bound to another {field}"

    def test_the_owning_backend_when_known(self) -> None:
        check_bindings(_claims(), dataclasses.replace(self.BINDING, backend="default"), now=1000)
        with pytest.raises(InvalidRequestState) as info:
            check_bindings(_claims(), dataclasses.replace(self.BINDING, backend="docs"), now=1000)
        assert info.value.detail == "requestState bound to another backend"

    def test_the_digest_ignores_key_order_but_not_values_or_types(self) -> None:
        assert arguments_digest({"a": 1, "b": [1, 2]}) == arguments_digest({"b": [1, 2], "a": 1})
        assert arguments_digest({"a": 1}) != arguments_digest({"a": 1.0})
        assert arguments_digest({"a": "1"}) != arguments_digest({"a": 1})
        assert arguments_digest({}) != arguments_digest({"a": None})
