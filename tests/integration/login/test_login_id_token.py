"""The ID token of a sign-in, checked claim by claim through the whole flow (OIDC Core 1.0
§3.1.3.7): the development issuer's knobs make a token wrong in exactly one respect, and the
sign-in must fail; the subject is the claim the issuer entry derives MCP subjects from."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import aiohttp
import pytest

from gateway.dev.dev_issuer import DevIssuer
from gateway.login.cookies import SESSION_COOKIE
from tests.integration.login.test_login_refusals import assert_row
from tests.support.jwt_forge import forge_hs256_with_public_key, forge_none, tamper
from tests.support.live_stack import MakeStack
from tests.support.login_stack import USERS, HttpBrowser, LoginStack, authorize, login_stack

NOW = int(time.time())


async def signed_in(stack: LoginStack, user: str = "alice") -> tuple[tuple[int, Any, str], bool]:
    async with aiohttp.ClientSession() as session:
        browser = HttpBrowser(session, stack.origin)
        _, headers, _ = await browser.get(stack.url("/login"))
        answer = await browser.get(await authorize(browser, headers["Location"], user))
        return answer, SESSION_COOKIE in browser.cookies


Forger = Callable[[DevIssuer], Callable[[dict[str, Any]], str]]


def _hs256(issuer: DevIssuer) -> Callable[[dict[str, Any]], str]:
    public = issuer.keys.key().as_dict(private=False)
    from joserfc.jwk import RSAKey

    return lambda claims: forge_hs256_with_public_key(
        claims, RSAKey.import_key(public), issuer.keys.signing_kid
    )


FORGERS: dict[str, Forger] = {
    "alg none": lambda issuer: forge_none,
    "HS256 with the public key": _hs256,
    "tampered signature": lambda issuer: (
        lambda claims: tamper(issuer.keys.sign(claims, header={"typ": "JWT"}))
    ),
    "another key": lambda issuer: _other_key_sign,
}


def _other_key_sign(claims: dict[str, Any]) -> str:
    from gateway.dev.issuer_keys import DevKeySet

    stranger = DevKeySet()
    stranger.add("EC")
    return stranger.sign(claims, header={"typ": "JWT", "kid": "not-published"})


@pytest.mark.row("login_failed")
@pytest.mark.parametrize(
    ("part", "wrong"),
    [
        pytest.param("id_token_claims", {"iss": "https://elsewhere.example"}, id="iss-another"),
        pytest.param("id_token_claims", {"iss": None}, id="iss-missing"),
        pytest.param("id_token_claims", {"aud": "another-client"}, id="aud-another"),
        pytest.param(
            "id_token_claims", {"aud": ["another-client", "and-another"]}, id="aud-others"
        ),
        pytest.param(
            "id_token_claims",
            {"aud": ["gateway-login", "another-client"], "azp": "another-client"},
            id="azp-another-among-audiences",
        ),
        pytest.param("id_token_claims", {"azp": "another-client"}, id="azp-another"),
        pytest.param("id_token_claims", {"exp": NOW - 3600}, id="exp-passed"),
        pytest.param("id_token_claims", {"exp": None}, id="exp-missing"),
        pytest.param("id_token_claims", {"iat": NOW + 3600}, id="iat-ahead"),
        # Older than login.login_ttl_s: a stale token replayed into a fresh sign-in.
        pytest.param("id_token_claims", {"iat": NOW - 7200}, id="iat-stale"),
        pytest.param("id_token_claims", {"iat": None}, id="iat-missing"),
        pytest.param("id_token_claims", {"nonce": "not-the-sign-ins"}, id="nonce-another"),
        pytest.param("id_token_claims", {"nonce": None}, id="nonce-missing"),
        pytest.param("id_token_claims", {"sub": None}, id="sub-missing"),
        pytest.param("id_token_claims", {"sub": ""}, id="sub-empty"),
        pytest.param("id_token_claims", {"sub": "x" * 257}, id="sub-too-long"),
        pytest.param("id_token_header", {"typ": "at+jwt"}, id="header-typ-at+jwt"),
        pytest.param("id_token_header", {"crit": ["exp"]}, id="header-crit"),
        pytest.param("id_token_header", {"kid": "unknown"}, id="header-kid-unknown"),
    ],
)
async def test_an_id_token_wrong_in_one_claim_or_its_header_signs_nobody_in(
    make_stack: MakeStack, part: str, wrong: dict[str, Any]
) -> None:
    async with make_stack.of(login_stack) as stack:
        getattr(stack.issuer, part).update(wrong)
        answer, session = await signed_in(stack)
        assert_row(answer, "login_failed", 403)
        assert not session


@pytest.mark.row("login_failed")
@pytest.mark.parametrize("forger", list(FORGERS))
async def test_an_id_token_not_signed_by_the_issuers_key_signs_nobody_in(
    make_stack: MakeStack, forger: str
) -> None:
    async with make_stack.of(login_stack) as stack:
        stack.issuer.server.id_token_forger = FORGERS[forger](stack.issuer)
        answer, session = await signed_in(stack)
        assert_row(answer, "login_failed", 403)
        assert not session


async def test_an_id_token_without_typ_is_accepted(make_stack: MakeStack) -> None:
    async with make_stack.of(login_stack) as stack:
        stack.issuer.id_token_header["typ"] = None
        (status, headers, _), session = await signed_in(stack)
        assert (status, headers["Location"], session) == (303, "/gateway/account", True)


async def test_the_subject_is_the_claim_the_issuer_entry_derives_mcp_subjects_from(
    make_stack: MakeStack,
) -> None:
    # Entra-like: sub pairwise per application, oid the same across them (subject_claim: oid).
    issuer = DevIssuer(users=USERS, token_format="jwt", introspection=False)
    entry = {
        "url": "{issuer_url}",
        "tokens": "jwt",
        "subject_claim": "oid",
        "allow_insecure_http": True,
        "client_id": None,
        "client_secret": None,
    }
    async with make_stack.of(login_stack, dev=issuer, gateway={"issuer": entry}) as stack:
        issuer.id_token_claims.update({"sub": "pairwise-for-the-login-client", "oid": "oid-1"})
        async with aiohttp.ClientSession() as session:
            browser = HttpBrowser(session, stack.origin)
            _, headers, _ = await browser.get(stack.url("/login"))
            await browser.get(await authorize(browser, headers["Location"], "alice"))
            _, _, page = await browser.get(stack.url("/account"))
        assert "Signed in as <code>oid-1</code>" in page
        issuer.id_token_claims.pop("oid")
        answer, session_made = await signed_in(stack)
        assert_row(answer, "login_failed", 403)  # no oid: no usable subject
        assert not session_made
