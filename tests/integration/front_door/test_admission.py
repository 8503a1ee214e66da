"""HTTP admission rows (pipeline steps 2-4, 10-11): 405, 403, 406, 415, 413, 429, 503, 408."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest

from gateway.config import Rate
from gateway.errors import RATE_LIMITED_CODE, UNSUPPORTED_MEDIA_TYPE_CODE
from tests.integration.front_door.conftest import MakeGateway
from tests.support.assertions import assert_error, assert_json_ok
from tests.support.gateway_harness import Gateway, modern_headers, modern_request

PING = modern_request("server/discover", 1)


class TestMethod:
    @pytest.mark.row("method_not_allowed")
    @pytest.mark.parametrize("method", ["GET", "DELETE", "PUT", "PATCH"])
    async def test_a_non_post_on_the_mcp_path_is_answered_405_allow_post_before_auth(
        self, gw: Gateway, method: str
    ) -> None:
        response = await gw.client.request(method, "/mcp")
        await assert_error(response, 405, empty=True)
        assert response.headers["Allow"] == "POST"
        assert "WWW-Authenticate" not in response.headers
        assert gw.authenticator.calls == 0

    async def test_any_other_path_is_404(self, gw: Gateway) -> None:
        for path in ("/", "/mcp/", "/MCP", "/mcp/extra", "/metrics"):
            response = await gw.client.post(path, data=b"{}")
            assert response.status == 404, path


class TestOrigin:
    @pytest.mark.row("origin_forbidden")
    async def test_a_present_origin_not_on_the_allowlist_is_answered_403_empty(
        self, gw: Gateway
    ) -> None:
        headers = modern_headers("server/discover", Origin="https://evil.example")
        response = await gw.post(PING, headers)
        await assert_error(response, 403, empty=True)
        assert gw.authenticator.calls == 0

    async def test_an_absent_origin_is_fine(self, gw: Gateway) -> None:
        await assert_json_ok(await gw.post(PING, modern_headers("server/discover")))

    async def test_an_allow_listed_origin_is_admitted_case_insensitively(
        self, make_gw: MakeGateway
    ) -> None:
        import dataclasses

        from tests.support.gateway_harness import harness_config

        config = dataclasses.replace(
            harness_config(), allowed_origins=frozenset({"https://app.example.com"})
        )
        gw = await make_gw(config=config)
        headers = modern_headers("server/discover", Origin="https://App.Example.com")
        await assert_json_ok(await gw.post(PING, headers))
        headers["Origin"] = "null"
        await assert_error(await gw.post(PING, headers), 403, empty=True)

    @pytest.mark.parametrize("origin", ["https://mcp.example.com", "HTTPS://MCP.Example.com/"])
    async def test_the_resources_own_origin_is_admitted_without_an_allowlist(
        self, gw: Gateway, origin: str
    ) -> None:
        # Conformance dns-rebinding-protection/localhost-host-valid-accepted: a page served by
        # the resource's own origin is same-origin, not a rebinding attacker.
        assert gw.config.allowed_origins == frozenset()
        headers = modern_headers("server/discover", Origin=origin)
        await assert_json_ok(await gw.post(PING, headers))

    @pytest.mark.parametrize(
        "origin",
        [
            "http://mcp.example.com",  # another scheme
            "https://mcp.example.com:8443",  # another port
            "https://mcp.example.com.evil.example",  # a suffix trick
            "https://example.com",  # the parent domain
        ],
    )
    async def test_neighbours_of_the_resources_origin_are_still_refused(
        self, gw: Gateway, origin: str
    ) -> None:
        headers = modern_headers("server/discover", Origin=origin)
        await assert_error(await gw.post(PING, headers), 403, empty=True)
        assert gw.authenticator.calls == 0

    async def test_allowed_origins_add_to_the_resources_own_origin(
        self, make_gw: MakeGateway
    ) -> None:
        import dataclasses

        from tests.support.gateway_harness import harness_config

        config = dataclasses.replace(
            harness_config(), allowed_origins=frozenset({"https://app.example.com"})
        )
        gw = await make_gw(config=config)
        for origin in ("https://app.example.com", "https://mcp.example.com"):
            headers = modern_headers("server/discover", Origin=origin)
            await assert_json_ok(await gw.post(PING, headers))


class TestAccept:
    @pytest.mark.row("not_acceptable")
    @pytest.mark.parametrize(
        "accept",
        ["text/html", "text/event-stream", "application/json;q=0", "*/*, application/json;q=0"],
        ids=["html only", "sse only", "json q=0", "wildcard but json q=0"],
    )
    async def test_an_accept_that_excludes_json_is_answered_406(
        self, gw: Gateway, accept: str
    ) -> None:
        response = await gw.post(PING, modern_headers("server/discover", Accept=accept))
        payload = await assert_error(response, 406)
        assert payload == {
            "error": "not_acceptable",
            "error_description": "Accept must allow application/json",
        }

    @pytest.mark.parametrize(
        "accept", ["*/*", "application/*", "application/json", "text/html, application/json;q=0.1"]
    )
    async def test_an_accept_admitting_json_is_served(self, gw: Gateway, accept: str) -> None:
        await assert_json_ok(await gw.post(PING, modern_headers("server/discover", Accept=accept)))

    async def test_an_absent_accept_is_served(self, gw: Gateway) -> None:
        headers = modern_headers("server/discover")
        del headers["Accept"]
        await assert_json_ok(await gw.post(PING, headers))


class TestContentType:
    @pytest.mark.row("unsupported_media_type")
    @pytest.mark.parametrize(
        "content_type",
        [
            "text/plain",
            "application/json; charset=latin-1",
            "application/x-www-form-urlencoded",
            "application/json; boundary=x",
            "application/jsonl",
        ],
    )
    async def test_a_body_that_is_not_utf8_json_is_answered_415(
        self, gw: Gateway, content_type: str
    ) -> None:
        headers = modern_headers("server/discover", **{"Content-Type": content_type})
        response = await gw.post(PING, headers)
        await assert_error(response, 415, UNSUPPORTED_MEDIA_TYPE_CODE)

    @pytest.mark.row("unsupported_media_type")
    async def test_a_missing_content_type_is_answered_415(self, gw: Gateway) -> None:
        headers = modern_headers("server/discover")
        del headers["Content-Type"]
        response = await gw.client.post(
            "/mcp", data=b'{"jsonrpc":"2.0"}', headers={**headers, "Content-Type": ""}
        )
        await assert_error(response, 415, UNSUPPORTED_MEDIA_TYPE_CODE)

    @pytest.mark.parametrize(
        "content_type", ["application/json; charset=utf-8", 'Application/JSON; Charset="UTF-8"']
    )
    async def test_json_with_a_utf8_charset_is_served(self, gw: Gateway, content_type: str) -> None:
        headers = modern_headers("server/discover", **{"Content-Type": content_type})
        await assert_json_ok(await gw.post(PING, headers))


def _padded(size: int) -> bytes:
    """A valid discover request of exactly ``size`` bytes (whitespace padding is legal JSON)."""
    import json

    raw = json.dumps(PING).encode()
    assert len(raw) <= size
    return raw + b" " * (size - len(raw))


class TestBodyCap:
    CAP = 1024

    async def test_a_body_exactly_at_the_cap_is_served(self, make_gw: MakeGateway) -> None:
        gw = await make_gw(max_body_bytes=self.CAP)
        response = await gw.post(_padded(self.CAP), modern_headers("server/discover"))
        await assert_json_ok(response)

    @pytest.mark.row("body_too_large")
    async def test_a_content_length_one_past_the_cap_is_answered_413(
        self, make_gw: MakeGateway
    ) -> None:
        gw = await make_gw(max_body_bytes=self.CAP)
        response = await gw.post(_padded(self.CAP + 1), modern_headers("server/discover"))
        await assert_error(response, 413)

    async def test_a_chunked_body_at_the_cap_is_served(self, make_gw: MakeGateway) -> None:
        gw = await make_gw(max_body_bytes=self.CAP)
        response = await gw.client.post(
            "/mcp", data=_chunks(_padded(self.CAP)), headers=modern_headers("server/discover")
        )
        await assert_json_ok(response)

    @pytest.mark.row("body_too_large")
    async def test_a_chunked_body_one_past_the_cap_is_answered_413(
        self, make_gw: MakeGateway
    ) -> None:
        gw = await make_gw(max_body_bytes=self.CAP)
        response = await gw.client.post(
            "/mcp", data=_chunks(_padded(self.CAP + 1)), headers=modern_headers("server/discover")
        )
        await assert_error(response, 413)

    @pytest.mark.row("request_timeout")
    async def test_a_chunked_body_broken_mid_stream_ends_at_the_deadline_and_frees_the_slot(
        self, make_gw: MakeGateway
    ) -> None:
        gw = await make_gw(request_deadline_s=0.5)
        reader, writer = await asyncio.open_connection("127.0.0.1", gw.server.port)
        head = "".join(f"{k}: {v}\r\n" for k, v in modern_headers("server/discover").items())
        writer.write(
            f"POST /mcp HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n{head}\r\n".encode()
            + b'5\r\n{"a":\r\n'
        )
        await writer.drain()
        await _until(lambda: bool(gw.observer.started))
        writer.write(b"ZZ\r\nnot a chunk\r\n")  # not a hex chunk size
        await writer.drain()
        async with asyncio.timeout(5):
            status_line = await reader.readline()
        writer.close()
        assert status_line.startswith(b"HTTP/1.1 408 "), status_line
        await _until(lambda: gw.endpoint.in_flight == 0)
        assert gw.observer.finished[-1].error_row == "request_timeout"


async def _chunks(body: bytes, size: int = 100) -> AsyncIterator[bytes]:
    for start in range(0, len(body), size):
        yield body[start : start + size]


class TestRates:
    @pytest.mark.row("rate_limited")
    async def test_the_pre_auth_budget_per_client_ip_is_answered_429_retry_after(
        self, make_gw: MakeGateway
    ) -> None:
        gw = await make_gw(pre_auth_rate=Rate(2, 60.0))
        for _ in range(2):
            await assert_json_ok(await gw.post(PING, modern_headers("server/discover")))
        response = await gw.post(PING, modern_headers("server/discover"))
        await assert_error(response, 429, RATE_LIMITED_CODE)
        # The rest of the full window, then half of the next (the two decaying as "previous").
        assert 30 <= int(response.headers["Retry-After"]) <= 90
        assert gw.authenticator.calls == 2, "a rate-limited request must not reach the issuer"

    @pytest.mark.row("rate_limited")
    async def test_the_per_subject_budget_is_answered_429_retry_after(
        self, make_gw: MakeGateway
    ) -> None:
        gw = await make_gw(principal_rate=Rate(1, 60.0))
        await assert_json_ok(await gw.post(PING, modern_headers("server/discover")))
        response = await gw.post(PING, modern_headers("server/discover"))
        await assert_error(response, 429, RATE_LIMITED_CODE)
        assert int(response.headers["Retry-After"]) >= 1
        other = modern_headers("server/discover", Authorization="Bearer ops")
        await assert_json_ok(await gw.post(PING, other))


WHOLE_REPLICA = {"max_in_flight_per_principal": 10, "max_in_flight_per_ip": 10}
"""One caller may use every slot: these tests are about the replica-wide cap."""


class TestInFlight:
    @pytest.mark.row("over_capacity")
    async def test_the_in_flight_cap_is_answered_503_retry_after(
        self, make_gw: MakeGateway
    ) -> None:
        gw = await make_gw(max_in_flight=1, **WHOLE_REPLICA)
        first = asyncio.create_task(gw.call_tool("slow", {"seconds": 10}))
        await _until(lambda: len(gw.backend.calls) == 1)
        response = await gw.post(PING, modern_headers("server/discover"))
        await assert_error(response, 503)
        assert response.headers["Retry-After"] == "1"
        gw.backend.release.set()
        await assert_json_ok(await first)
        assert gw.endpoint.in_flight == 0
        await assert_json_ok(await gw.post(PING, modern_headers("server/discover")))

    async def test_the_cap_is_checked_before_the_body_is_read(self, make_gw: MakeGateway) -> None:
        gw = await make_gw(max_in_flight=1, max_body_bytes=400, **WHOLE_REPLICA)
        first = asyncio.create_task(gw.call_tool("slow", {"seconds": 10}))
        await _until(lambda: len(gw.backend.calls) == 1)
        # Over the body cap too: 503, not 413, proves the body was never looked at.
        response = await gw.post(_padded(1000), modern_headers("server/discover"))
        await assert_error(response, 503)
        gw.backend.release.set()
        await first


class TestDeadline:
    @pytest.mark.row("request_timeout")
    async def test_a_body_that_does_not_arrive_before_the_deadline_is_answered_408(
        self, make_gw: MakeGateway
    ) -> None:
        gw = await make_gw(request_deadline_s=0.3)

        async def stalled() -> AsyncIterator[bytes]:
            yield b'{"jsonrpc":'
            await asyncio.sleep(1.0)
            yield b"}"

        response = await gw.client.post(
            "/mcp", data=stalled(), headers=modern_headers("server/discover")
        )
        await assert_error(response, 408)
        assert gw.endpoint.in_flight == 0


async def _until(condition: Callable[[], bool]) -> None:
    async with asyncio.timeout(5.0):
        while not condition():  # noqa: ASYNC110 - polling a fake's call list is the simplest probe
            await asyncio.sleep(0.01)


class TestStep11Order:
    """docs/architecture.md step 11: Accept, then Content-Type and Content-Encoding, then the
    body's size (406 before 415 before 413), as http/pipeline/endpoint.py checks them (issue 32 item
    12: the docs listed Accept last)."""

    CAP = 1024

    async def test_406_comes_before_415_and_413(self, make_gw: MakeGateway) -> None:
        gw = await make_gw(max_body_bytes=self.CAP)
        headers = modern_headers("server/discover", Accept="text/html")
        headers["Content-Type"] = "text/plain"
        await assert_error(await gw.post(_padded(self.CAP + 1), headers), 406)

    async def test_415_comes_before_413(self, make_gw: MakeGateway) -> None:
        gw = await make_gw(max_body_bytes=self.CAP)
        headers = modern_headers("server/discover")
        headers["Content-Type"] = "text/plain"
        await assert_error(await gw.post(_padded(self.CAP + 1), headers), 415)
        headers = modern_headers("server/discover", **{"Content-Encoding": "gzip"})
        await assert_error(await gw.post(_padded(self.CAP + 1), headers), 415)
