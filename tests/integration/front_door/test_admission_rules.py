"""The pure admission rules of gateway/http/admission.py, case by case (no server needed)."""

from __future__ import annotations

import ipaddress

import pytest

from gateway.errors import NotAcceptable, OriginForbidden, UnsupportedMediaType
from gateway.http.admission import (
    MAX_ACCEPT_RANGES,
    AcceptInfo,
    accepts,
    check_content_type,
    check_origin,
    client_ip,
)

PROXIES = (ipaddress.ip_network("10.0.0.0/8"), ipaddress.ip_network("fd00::/8"))


class TestClientIp:
    def test_without_trusted_proxies_the_tcp_peer_is_the_client(self) -> None:
        assert client_ip("198.51.100.7", ["203.0.113.1"], ()) == "198.51.100.7"

    def test_forwarded_for_from_an_untrusted_peer_is_ignored(self) -> None:
        assert client_ip("198.51.100.7", ["203.0.113.1"], PROXIES) == "198.51.100.7"

    def test_behind_a_trusted_proxy_the_right_most_untrusted_hop_is_the_client(self) -> None:
        # "1.1.1.1" was written by the client itself (spoofable); the proxy appended the peer.
        hops = ["1.1.1.1, 203.0.113.9", "10.0.0.3"]
        assert client_ip("10.0.0.2", hops, PROXIES) == "203.0.113.9"

    def test_an_ipv4_mapped_peer_is_matched_against_ipv4_proxies(self) -> None:
        assert client_ip("::ffff:10.0.0.2", ["203.0.113.9"], PROXIES) == "203.0.113.9"

    def test_when_every_hop_is_a_proxy_the_left_most_proxy_is_used(self) -> None:
        assert client_ip("10.0.0.2", ["10.0.0.5, 10.0.0.4"], PROXIES) == "10.0.0.5"

    def test_a_garbage_hop_stops_the_walk_at_the_last_trusted_hop(self) -> None:
        assert client_ip("10.0.0.2", ["203.0.113.9, not-an-ip"], PROXIES) == "10.0.0.2"

    def test_an_unknown_peer_is_reported_as_unknown(self) -> None:
        assert client_ip(None, [], PROXIES) == "unknown"


class TestOrigin:
    def test_absent_origin_is_allowed(self) -> None:
        check_origin(None, frozenset())

    @pytest.mark.parametrize("origin", ["https://evil.example", "null", ""])
    def test_present_origins_off_the_list_are_forbidden(self, origin: str) -> None:
        with pytest.raises(OriginForbidden):
            check_origin(origin, frozenset({"https://app.example.com"}))

    def test_listed_origins_match_case_insensitively(self) -> None:
        check_origin("HTTPS://APP.example.com", frozenset({"https://app.example.com"}))


class TestContentType:
    @pytest.mark.parametrize(
        "value",
        ["application/json", "application/json;charset=utf-8", 'APPLICATION/JSON; charset="UTF-8"'],
    )
    def test_json_with_an_optional_utf8_charset_is_admitted(self, value: str) -> None:
        check_content_type(value)

    @pytest.mark.parametrize(
        "value",
        [
            None,
            "",
            "text/json",
            "application/json; charset=latin-1",
            "application/json; q=1",
            "application/json; charset",
            "application/json-seq",
        ],
    )
    def test_anything_else_is_refused(self, value: str | None) -> None:
        with pytest.raises(UnsupportedMediaType):
            check_content_type(value)


class TestAccept:
    @pytest.mark.parametrize(
        ("values", "sse"),
        [
            ((), False),
            (("",), False),
            (("application/json, text/event-stream",), True),
            (("text/event-stream", "application/json"), True),
            (("*/*",), False),
            (("application/*, text/*",), True),
            (("application/json;q=0.001",), False),
        ],
        ids=["absent", "empty", "both", "two lines", "wildcard", "partial wildcards", "tiny q"],
    )
    def test_json_acceptable_and_sse_only_when_explicit(
        self, values: tuple[str, ...], sse: bool
    ) -> None:
        assert accepts(values) == AcceptInfo(json=True, sse=sse)

    @pytest.mark.parametrize(
        "value",
        [
            "text/html",
            "application/json;q=0",
            "*/*;q=1, application/json;q=0",
            "application/*;q=0, */*",
            "application/json;q=abc",
            "application/json;q=2",
        ],
    )
    def test_json_excluded_is_refused(self, value: str) -> None:
        with pytest.raises(NotAcceptable):
            accepts((value,))

    def test_the_number_of_media_ranges_is_capped_at_the_limit(self) -> None:
        at_limit = ", ".join(["text/plain"] * (MAX_ACCEPT_RANGES - 1) + ["application/json"])
        assert accepts((at_limit,)).json
        with pytest.raises(NotAcceptable):
            accepts((at_limit + ", text/html",))
