"""The AEAD envelope (gateway/sealing.py), by property: any payload under any context opens to
itself and within :func:`envelope_chars`; a text changed in any one byte or character, cut
short, opened under another context, label, resource or key, or longer than ``max_chars`` is
refused with :class:`EnvelopeError`; and across a key rotation an old text opens until its key
leaves the ring."""

from __future__ import annotations

import string

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from gateway import b64url
from gateway.config import SealKey
from gateway.sealing import EnvelopeError, SealRing, envelope_chars

PROPERTY = settings(
    max_examples=100, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
RESOURCE = "https://mcp.example.com/mcp"
LABEL = b"test-envelope"
SECRET = b"\x01" * 32

payloads = st.binary(max_size=600)
contexts = st.binary(max_size=48)
key_ids = st.text(string.ascii_letters + string.digits + "_-", min_size=1, max_size=16)
secrets = st.binary(min_size=32, max_size=32)


def ring(
    *keys: tuple[str, bytes],
    seal: str | None = None,
    label: bytes = LABEL,
    resource: str = RESOURCE,
) -> SealRing:
    configured = [SealKey(id=kid, key=key) for kid, key in keys]
    return SealRing(configured, seal or keys[0][0], label=label, resource=resource)


def refused(sealer: SealRing, text: str, context: bytes = b"", max_chars: int = 10_000) -> bool:
    try:
        sealer.open(text, max_chars=max_chars, context=context)
    except EnvelopeError:
        return True
    return False


@PROPERTY
@given(payloads, contexts, key_ids)
def test_any_payload_opens_to_itself_under_its_context_and_within_the_promised_length(
    payload: bytes, context: bytes, kid: str
) -> None:
    sealer = ring((kid, SECRET))
    text = sealer.seal(payload, context=context)
    assert len(text) <= envelope_chars(len(payload))
    assert sealer.open(text, max_chars=len(text), context=context) == payload
    assert refused(sealer, text, context, max_chars=len(text) - 1)
    assert sealer.seal(payload, context=context) != text  # a fresh nonce every time


@PROPERTY
@given(payloads, contexts, st.data())
def test_a_change_of_any_one_byte_of_the_envelope_is_refused(
    payload: bytes, context: bytes, data: st.DataObject
) -> None:
    sealer = ring(("k1", SECRET), ("k2", b"\x02" * 32), ("k", b"\x03" * 32))
    raw = bytearray(b64url.decode_canonical(sealer.seal(payload, context=context)) or b"")
    index = data.draw(st.integers(0, len(raw) - 1), label="index")
    raw[index] ^= data.draw(st.integers(1, 255), label="xor")
    assert refused(sealer, b64url.encode(bytes(raw)), context)


@PROPERTY
@given(payloads, st.data())
def test_a_change_of_any_one_character_of_the_text_is_refused(
    payload: bytes, data: st.DataObject
) -> None:
    sealer = ring(("k1", SECRET))
    text = sealer.seal(payload)
    index = data.draw(st.integers(0, len(text) - 1), label="index")
    other = data.draw(st.characters(max_codepoint=0x2FFF).filter(lambda c: c != text[index]))
    assert refused(sealer, text[:index] + other + text[index + 1 :])


@PROPERTY
@given(payloads, st.data())
def test_a_text_or_an_envelope_cut_short_is_refused(payload: bytes, data: st.DataObject) -> None:
    sealer = ring(("k1", SECRET))
    text = sealer.seal(payload)
    raw = b64url.decode_canonical(text) or b""
    assert refused(sealer, text[: data.draw(st.integers(0, len(text) - 1), label="chars")])
    assert refused(sealer, b64url.encode(raw[: data.draw(st.integers(0, len(raw) - 1))]))


@PROPERTY
@given(payloads, contexts, contexts)
def test_another_context_is_refused(payload: bytes, context: bytes, other: bytes) -> None:
    assume(context != other)
    sealer = ring(("k1", SECRET))
    assert refused(sealer, sealer.seal(payload, context=context), other)


@PROPERTY
@given(payloads, st.binary(max_size=24), st.binary(max_size=24))
def test_another_label_is_refused(payload: bytes, label: bytes, other: bytes) -> None:
    assume(label != other)
    text = ring(("k1", SECRET), label=label).seal(payload)
    assert refused(ring(("k1", SECRET), label=other), text)


@PROPERTY
@given(payloads, st.text(max_size=24))
def test_another_resource_is_refused(payload: bytes, resource: str) -> None:
    assume(resource != RESOURCE)
    text = ring(("k1", SECRET)).seal(payload)
    assert refused(ring(("k1", SECRET), resource=resource), text)


@PROPERTY
@given(payloads, key_ids, secrets, secrets)
def test_the_same_key_id_with_another_secret_is_refused(
    payload: bytes, kid: str, secret: bytes, other: bytes
) -> None:
    assume(secret != other)
    text = ring((kid, secret)).seal(payload)
    assert refused(ring((kid, other)), text)


@PROPERTY
@given(st.lists(payloads, min_size=1, max_size=4), key_ids, key_ids, secrets, secrets)
def test_a_rotation_opens_old_texts_until_their_key_is_dropped(
    payloads_: list[bytes], old: str, new: str, old_secret: bytes, new_secret: bytes
) -> None:
    assume(old != new)
    before = ring((old, old_secret))
    old_texts = [before.seal(p) for p in payloads_]
    during = ring((old, old_secret), (new, new_secret), seal=new)
    new_texts = [during.seal(p) for p in payloads_]
    assert [during.open(t, max_chars=10_000) for t in old_texts + new_texts] == payloads_ * 2
    assert all(refused(before, t) for t in new_texts)  # a replica not yet rotated
    after = ring((new, new_secret))
    assert all(refused(after, t) for t in old_texts)
    assert [after.open(t, max_chars=10_000) for t in new_texts] == payloads_


def test_a_ring_refuses_key_ids_it_cannot_carry_and_a_sealing_key_it_lacks() -> None:
    with pytest.raises(ValueError, match="1-16"):
        ring(("k" * 17, SECRET))
    with pytest.raises(ValueError, match="seal_key_id"):
        ring(("k1", SECRET), seal="k2")
