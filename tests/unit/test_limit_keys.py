"""Per-IP limiter keys: IPv4 per address, IPv6 per /64 (gateway/limits/keys.py)."""

from __future__ import annotations

import pytest

from gateway.limits.keys import client_key


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
