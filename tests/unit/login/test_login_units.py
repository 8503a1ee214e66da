"""The login surface's pieces on their own: sealed cookies, the person and its digest, the HTML
escaping and security headers, the origin check, and the memory store of pending actions."""

from __future__ import annotations

import base64
import hashlib
import re

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from gateway.config import SealKey
from gateway.login.cookies import SESSION_COOKIE, SIGNIN_COOKIE, Cookies
from gateway.login.forms import same_origin
from gateway.login.pages import CSP, STYLE, Html, html, page
from gateway.login.person import BrowserIdentity, same_person
from gateway.protocol.sealed_state import Claims, Sealer
from gateway.seams import Principal
from gateway.state.browser_records import MemoryBrowserState

KEYS = (SealKey("k1", bytes(range(32))),)
RESOURCE = "https://mcp.example.com/mcp"
ALICE = BrowserIdentity("https://id.example.com", "alice")


def request_with(cookies: dict[str, str], **headers: str) -> web.Request:
    cookie = "; ".join(f"{k}={v}" for k, v in cookies.items())
    return make_mocked_request("GET", "/gateway/account", headers={"Cookie": cookie, **headers})


class Clock:
    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class TestCookies:
    def test_a_session_opens_until_it_expires_and_never_as_a_signin(self) -> None:
        clock = Clock()
        cookies = Cookies(KEYS, "k1", resource=RESOURCE, clock=clock)
        session = cookies.new_session(ALICE, "oidc", 60)
        sealed = cookies.seal_session(session)
        assert cookies.session(request_with({SESSION_COOKIE: sealed})) == session
        assert cookies.signin(request_with({SIGNIN_COOKIE: sealed})) is None  # another label
        clock.now += 60
        assert cookies.session(request_with({SESSION_COOKIE: sealed})) is None

    def test_a_signin_never_opens_as_a_session(self) -> None:
        cookies = Cookies(KEYS, "k1", resource=RESOURCE)
        signin = cookies.new_signin("/gateway/account", "oidc", 60, pkce=True)
        sealed = cookies.seal_signin(signin)
        assert cookies.signin(request_with({SIGNIN_COOKIE: sealed})) == signin
        assert cookies.session(request_with({SESSION_COOKIE: sealed})) is None
        assert len(signin.verifier) == 43 and signin.state != signin.nonce

    def test_other_sealed_texts_and_other_deployments_do_not_open_as_sessions(self) -> None:
        cookies = Cookies(KEYS, "k1", resource=RESOURCE)
        state = Sealer(KEYS, "k1", resource=RESOURCE, max_state_bytes=1024).seal(
            Claims("alice", "https://id.example.com", None, "t", "b", "a", "v", 0, 2**40, 1)
        )
        assert cookies.session(request_with({SESSION_COOKIE: state})) is None
        elsewhere = Cookies(KEYS, "k1", resource="https://other.example.com/mcp")
        sealed = elsewhere.seal_session(elsewhere.new_session(ALICE, "oidc", 60))
        assert cookies.session(request_with({SESSION_COOKIE: sealed})) is None

    def test_rotation_every_listed_key_opens_the_sealing_one_seals(self) -> None:
        old, new = SealKey("old", bytes(32)), SealKey("new", bytes([7]) * 32)
        before = Cookies((old,), "old", resource=RESOURCE)
        sealed = before.seal_session(before.new_session(ALICE, "oidc", 60))
        during = Cookies((new, old), "new", resource=RESOURCE)
        assert during.session(request_with({SESSION_COOKIE: sealed})) is not None
        after = Cookies((new,), "new", resource=RESOURCE)
        assert after.session(request_with({SESSION_COOKIE: sealed})) is None

    @pytest.mark.parametrize("value", ["", "x", "A" * 5000, "not base64!", "AQEA"])
    def test_garbage_is_no_session(self, value: str) -> None:
        cookies = Cookies(KEYS, "k1", resource=RESOURCE)
        assert cookies.session(request_with({SESSION_COOKIE: value})) is None

    def test_a_session_for_the_longest_identity_fits_a_cookie(self) -> None:
        cookies = Cookies(KEYS, "k1", resource=RESOURCE)
        person = BrowserIdentity("https://" + "i" * 1000 + ".example.com", "s" * 256)
        sealed = cookies.seal_session(cookies.new_session(person, "verifier", 60))
        assert len(SESSION_COOKIE) + 1 + len(sealed) < 4096


class TestPerson:
    def test_same_person_is_the_same_issuer_and_subject_only(self) -> None:
        principal = Principal("alice", "cli", frozenset(), 2e9, "https://id.example.com", "fp")
        assert same_person(ALICE, principal)
        assert BrowserIdentity.of(principal) == ALICE
        assert not same_person(BrowserIdentity("https://other.example.com", "alice"), principal)
        assert not same_person(BrowserIdentity("https://id.example.com", "Alice"), principal)

    def test_the_owner_digest_has_no_separator_ambiguity(self) -> None:
        a = BrowserIdentity("https://id.example.com|x", "y")
        b = BrowserIdentity("https://id.example.com", "x|y")
        assert a.owner() != b.owner() and len(a.owner()) == 32


class TestPages:
    def test_values_are_escaped_and_markup_is_not(self) -> None:
        made = html("<p>{}</p>{}", '<script>alert("x")</script>', Html("<b>ok</b>"))
        assert made == "<p>&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;</p><b>ok</b>"

    def test_the_only_style_is_allowed_by_its_hash_and_nothing_else_runs(self) -> None:
        digest = base64.b64encode(hashlib.sha256(STYLE.encode()).digest()).decode()
        assert f"style-src 'sha256-{digest}'" in CSP
        assert "default-src 'none'" in CSP and "frame-ancestors 'none'" in CSP
        body = page("Title <x>", Html("<p>hi</p>")).text or ""
        assert "<script" not in body and "&lt;x&gt;" in body
        assert re.findall(r"<style>(.*?)</style>", body) == [STYLE]


class TestOriginCheck:
    @pytest.mark.parametrize(
        ("headers", "accepted"),
        [
            ({"Origin": "https://mcp.example.com"}, True),
            ({"Origin": "https://MCP.example.com"}, True),
            ({"Origin": "null", "Sec-Fetch-Site": "same-origin"}, True),
            ({"Sec-Fetch-Site": "same-origin"}, True),
            ({"Origin": "null", "Sec-Fetch-Site": "same-site"}, False),
            ({"Origin": "null", "Sec-Fetch-Site": "cross-site"}, False),
            ({"Origin": "null"}, False),
            ({}, False),
            ({"Origin": "https://mcp.example.com.evil.example"}, False),
            ({"Origin": "http://mcp.example.com"}, False),
        ],
    )
    def test_only_the_surfaces_own_origin(self, headers: dict[str, str], accepted: bool) -> None:
        request = make_mocked_request("POST", "/gateway/logout", headers=headers)
        assert same_origin(request, "https://mcp.example.com") is accepted


class TestMemoryRecords:
    async def test_a_record_is_its_owners_once_and_nobody_elses(self) -> None:
        clock = Clock()
        store = MemoryBrowserState(clock=clock)
        assert await store.put("k", b"owner", b"body", clock.now + 60)
        assert not await store.put("k", b"other", b"x", clock.now + 60)  # never overwritten
        assert (await store.read("k", b"other", take=True)).found == "foreign"
        peeked = await store.read("k", b"owner", take=False)
        assert (peeked.found, peeked.body) == ("owned", b"body")
        taken = await store.read("k", b"owner", take=True)
        assert (taken.found, taken.body) == ("owned", b"body")
        assert (await store.read("k", b"owner", take=True)).found == "missing"

    async def test_records_and_marks_expire(self) -> None:
        clock = Clock()
        store = MemoryBrowserState(clock=clock)
        await store.put("k", b"o", b"b", clock.now + 10)
        assert await store.mark("m", clock.now + 10)
        assert not await store.mark("m", clock.now + 10)  # the second use
        assert await store.marked("m")
        clock.now += 10
        assert (await store.read("k", b"o", take=False)).found == "missing"
        assert not await store.marked("m")
        assert await store.mark("m", clock.now + 10)
