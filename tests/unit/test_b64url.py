"""The one base64url codec: every spelling but the canonical one is refused."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway import b64url


@given(st.binary(max_size=300))
def test_round_trip_is_unpadded_and_canonical(raw: bytes) -> None:
    text = b64url.encode(raw)
    assert "=" not in text and "+" not in text and "/" not in text
    assert b64url.decode(text) == (raw, True)
    assert b64url.decode_canonical(text) == raw


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("QQ==", "padding"),
        ("QR", "unused low bits set (QQ is the canonical spelling of b'A')"),
        ("Q", "a length of 4n+1"),
        ("Q+8", "the standard alphabet"),
        ("Q Q", "a character outside the alphabet (Python's decoder drops it)"),
        ("QQ\n", "a newline"),
    ],
)
def test_other_spellings_are_refused(text: str, why: str) -> None:
    assert b64url.decode_canonical(text) is None, why


def test_decode_tells_non_canonical_from_not_base64url() -> None:
    assert b64url.decode("QR") == (base64.urlsafe_b64decode("QR=="), False)
    assert b64url.decode("Q=") is None
    assert b64url.decode("") == (b"", True)
