"""Limiter keys (gateway/limits/keys.py): per IP, IPv4 per address and IPv6 per /64; per
principal, the issuer and the subject."""

from __future__ import annotations

import pytest

from gateway.limits.keys import client_key, principal_key
from gateway.seams import Principal


@pytest.mark.parametrize(
    ("ip", "key"),
    [
        ("198.51.100.7", "198.51.100.7"),
        ("2001:db8:1:2::1", "2001:db8:1:2::/64"),
        ("2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::/64"),
        ("2001:DB8:1:2::abcd", "2001:db8:1:2::/64"),
        ("2001:db8:1:3::1", "2001:db8:1:3::/64"),
        ("::ffff:198.51.100.7", "198.51.100.7"),
        ("fe80::1%eth0", "fe80::/64"),
        ("::1", "::/64"),
        ("unknown", "unknown"),
        ("not:an:address", "not:an:address"),
    ],
)
def test_ipv4_counts_per_address_and_ipv6_per_64(ip: str, key: str) -> None:
    assert client_key(ip) == key


def principal(issuer: str, subject: str) -> Principal:
    return Principal(
        subject=subject,
        client_id=None,
        scopes=frozenset(),
        expires_at=0.0,
        issuer=issuer,
        fingerprint="-",
    )


def test_a_principal_key_names_the_issuer_and_the_subject_unambiguously() -> None:
    a, b = "https://a.example", "https://b.example"
    assert principal_key(principal(a, "alice")) != principal_key(principal(b, "alice"))
    assert principal_key(principal(a, "alice")) == principal_key(principal(a, "alice"))
    # No pair spells another pair's key, whatever a subject or an issuer holds; appending a
    # tool name (call_limits: "tool:<key>:<name>") cannot either.
    pairs = [(a, "x"), (a + "1", "x"), (a, "1x"), ("", a + "x"), (a, "x:y"), (a + ":x", "y")]
    keys = [principal_key(principal(i, s)) for i, s in pairs]
    assert len(set(keys)) == len(keys)
    assert f"{principal_key(principal(a, 'x:y'))}:z" != f"{principal_key(principal(a, 'x'))}:y:z"
