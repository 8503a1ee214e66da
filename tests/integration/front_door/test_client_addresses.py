"""Per-IP limits key IPv6 clients by /64, and a proxy that is not trusted is reported."""

from __future__ import annotations

import dataclasses
import ipaddress

import pytest
from structlog.testing import capture_logs

from gateway.config import Rate
from tests.integration.front_door.conftest import MakeGateway
from tests.support.assertions import assert_error
from tests.support.gateway_harness import harness_config, modern_headers, modern_request

LOOPBACK = (ipaddress.ip_network("127.0.0.0/8"),)
DISCOVER = modern_request("server/discover", 1)


@pytest.mark.row("rate_limited")
async def test_ipv6_clients_share_the_pre_auth_rate_per_64(make_gw: MakeGateway) -> None:
    config = dataclasses.replace(
        harness_config(pre_auth_rate=Rate(2, 60.0)), trusted_proxies=LOOPBACK
    )
    gw = await make_gw(config=config)

    async def from_ip(ip: str) -> int:
        headers = modern_headers("server/discover", **{"X-Forwarded-For": ip})
        response = await gw.post(DISCOVER, headers)
        await response.read()
        return response.status

    # Two addresses of one /64 spend its budget; a third address of it is refused.
    assert await from_ip("2001:db8:1:2::1") == 200
    assert await from_ip("2001:db8:1:2::2") == 200
    headers = modern_headers("server/discover", **{"X-Forwarded-For": "2001:db8:1:2:abcd::9"})
    await assert_error(await gw.post(DISCOVER, headers), 429)
    # Another /64, and an IPv4 client, have budgets of their own.
    assert await from_ip("2001:db8:1:3::1") == 200
    assert await from_ip("198.51.100.7") == 200
    # The access record keeps the full address.
    assert gw.observer.finished[-3].client_ip == "2001:db8:1:2:abcd::9"


async def test_forwarded_requests_from_a_private_peer_without_trusted_proxies_are_reported(
    make_gw: MakeGateway,
) -> None:
    gw = await make_gw()  # trusted_proxies is empty; the test client connects from 127.0.0.1
    headers = modern_headers("server/discover", **{"X-Forwarded-For": "203.0.113.9"})
    with capture_logs() as logs:
        for _ in range(3):
            response = await gw.post(DISCOVER, headers)
            assert response.status == 200
    warnings = [entry for entry in logs if entry["event"] == "trusted_proxies_unset"]
    assert len(warnings) == 1, "reported once, not per request"
    assert warnings[0]["log_level"] == "warning"
    assert warnings[0]["peer"] == "127.0.0.1"
    # Every client is the proxy's address: the X-Forwarded-For value is not believed.
    assert gw.observer.finished[-1].client_ip == "127.0.0.1"


async def test_no_report_without_forwarded_headers_or_with_trusted_proxies(
    make_gw: MakeGateway,
) -> None:
    trusted = await make_gw(config=dataclasses.replace(harness_config(), trusted_proxies=LOOPBACK))
    plain = await make_gw()
    with capture_logs() as logs:
        forwarded = modern_headers("server/discover", **{"X-Forwarded-For": "203.0.113.9"})
        assert (await trusted.post(DISCOVER, forwarded)).status == 200
        assert (await plain.post(DISCOVER, modern_headers("server/discover"))).status == 200
    assert not [entry for entry in logs if entry["event"] == "trusted_proxies_unset"]
