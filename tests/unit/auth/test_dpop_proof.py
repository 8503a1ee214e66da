"""The DPoP proof checks (gateway/auth/dpop.py), with proofs from an independent client."""

from __future__ import annotations

import time

import pytest

from gateway.auth.dpop import check_binding, check_proof, normalise_htu, token_hash
from gateway.errors import InvalidDpopProof
from gateway.state.dpop_replay import MemoryReplays
from tests.support.dpop_client import DpopKey, ath_of

HTU = "https://mcp.example.test/mcp"
TOKEN = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJlcmluIn0.c2ln"
ALGS = ("ES256", "EdDSA")


def _check(values: tuple[str, ...], *, method: str = "POST", now: float | None = None) -> object:
    return check_proof(
        values,
        ath=token_hash(TOKEN),
        method=method,
        htu=HTU,
        algorithms=ALGS,
        iat_window_s=300,
        now=time.time() if now is None else now,
    )


def _reason(values: tuple[str, ...], **kw: object) -> str:
    with pytest.raises(InvalidDpopProof) as info:
        _check(values, **kw)  # type: ignore[arg-type]
    return info.value.reason


@pytest.mark.parametrize("alg", ["ES256", "EdDSA"])
def test_a_valid_proof_names_its_key_thumbprint(alg: str) -> None:
    key = DpopKey(alg)
    proof = _check((key.proof(HTU, token=TOKEN, jti="j1"),))
    assert proof.jkt == key.jkt  # type: ignore[attr-defined]
    assert (proof.alg, proof.jti, proof.nonce) == (alg, "j1", None)  # type: ignore[attr-defined]
    check_binding(proof, key.jkt)  # type: ignore[arg-type]


def test_ath_is_the_base64url_sha256_of_the_token() -> None:
    assert token_hash(TOKEN) == ath_of(TOKEN)


def test_each_broken_part_is_refused_with_its_reason() -> None:
    key = DpopKey()
    good = key.proof(HTU, token=TOKEN)
    private = dict(key.key.as_dict(private=True))
    header, payload, signature = good.split(".")
    flipped = signature[:10] + ("A" if signature[10] != "A" else "B") + signature[11:]
    cases = {
        "missing": (),
        "multiple": (good, key.proof(HTU, token=TOKEN)),
        "malformed": ("not-a-jws",),
        "typ": (key.proof(HTU, token=TOKEN, typ="JWT"),),
        "alg": (key.proof(HTU, token=TOKEN, alg="none"),),
        "jwk": (key.proof(HTU, token=TOKEN, jwk=private),),
        "signature": (f"{header}.{payload}.{flipped}",),
        "htm": (key.proof(HTU, token=TOKEN, htm="GET"),),
        "htu": (key.proof("https://other.example.test/mcp", token=TOKEN),),
        "iat": (key.proof(HTU, token=TOKEN, iat=time.time() - 301),),
        "ath": (key.proof(HTU, token=TOKEN + "x"),),
        "jti": (key.proof(HTU, token=TOKEN, claims={"jti": ""}),),
    }
    assert {reason: _reason(values) for reason, values in cases.items()} == {
        reason: reason for reason in cases
    }


def test_hmac_with_the_public_key_and_an_unknown_alg_are_refused() -> None:
    key = DpopKey()
    assert _reason((key.proof(HTU, token=TOKEN, alg="HS256"),)) == "alg"
    other = DpopKey("EdDSA")
    # An Ed25519 key named as the key of an ES256 proof does not fit the algorithm.
    assert _reason((key.proof(HTU, token=TOKEN, jwk=other.public_jwk),)) == "jwk"


@pytest.mark.parametrize(
    "htu",
    [
        "https://mcp.example.test/mcp?x=1",
        "https://mcp.example.test/mcp#f",
        "https://mcp.example.test/other",
        "https://mcp.example.test:8443/mcp",
        "http://mcp.example.test/mcp",
        "https://user@mcp.example.test/mcp",
    ],
)
def test_htu_with_a_query_fragment_other_path_port_scheme_or_userinfo_is_refused(
    htu: str,
) -> None:
    assert _reason((DpopKey().proof(htu, token=TOKEN),)) == "htu"


@pytest.mark.parametrize(
    "htu",
    [
        "HTTPS://MCP.Example.TEST/mcp",
        "https://mcp.example.test:443/mcp",
        "https://mcp.example.test/./x/../mcp",
        "https://mcp.example.test/%6Dcp",
    ],
)
def test_htu_is_compared_after_rfc3986_normalisation(htu: str) -> None:
    _check((DpopKey().proof(htu, token=TOKEN),))


def test_normalise_htu() -> None:
    assert normalise_htu("https://[::1]:8443/a/../b") == "https://[::1]:8443/b"
    assert normalise_htu("https://x.test") == "https://x.test/"
    assert normalise_htu("https://x.test/a%2fb") == "https://x.test/a%2Fb"
    assert normalise_htu("ftp://x.test/") is None


def test_iat_window_holds_at_the_bound_and_refuses_just_past_it() -> None:
    key = DpopKey()
    now = time.time() // 1
    _check((key.proof(HTU, token=TOKEN, iat=now - 300),), now=now)
    _check((key.proof(HTU, token=TOKEN, iat=now + 300),), now=now)
    assert _reason((key.proof(HTU, token=TOKEN, iat=now - 301),), now=now) == "iat"
    assert _reason((key.proof(HTU, token=TOKEN, iat=now + 301),), now=now) == "iat"


def test_a_proof_without_ath_is_refused() -> None:
    assert _reason((DpopKey().proof(HTU, token=TOKEN, ath=None),)) == "ath"


def test_duplicate_members_are_refused_by_the_strict_decoder() -> None:
    key = DpopKey()
    proof = key.proof(HTU, token=TOKEN)
    header, payload, signature = proof.split(".")
    import base64

    raw = base64.urlsafe_b64decode(payload + "==").decode()
    doubled = raw[:-1] + ',"htm":"GET"}'
    forged = base64.urlsafe_b64encode(doubled.encode()).rstrip(b"=").decode()
    assert _reason((f"{header}.{forged}.{signature}",)) == "malformed"


def test_the_key_must_be_the_tokens_cnf_jkt() -> None:
    key = DpopKey()
    proof = _check((key.proof(HTU, token=TOKEN),))
    with pytest.raises(InvalidDpopProof) as info:
        check_binding(proof, DpopKey().jkt)  # type: ignore[arg-type]
    assert info.value.reason == "jkt"


async def test_the_memory_replay_cache_refuses_a_second_use_until_it_ends() -> None:
    now = [1000.0]
    replays = MemoryReplays(max_entries=2, clock=lambda: now[0])
    assert await replays.first_use(b"a", 1010.0)
    assert not await replays.first_use(b"a", 1010.0)
    now[0] = 1011.0
    assert await replays.first_use(b"a", 1020.0)  # ended, then seen anew
    assert await replays.first_use(b"b", 1020.0)
    assert await replays.first_use(b"c", 1020.0)
    assert len(replays) == 2  # the oldest went first past the bound


def test_a_header_checked_once_still_has_every_proof_verified_and_its_alg_allowed() -> None:
    key = DpopKey()
    good = key.proof(HTU, token=TOKEN)
    _check((good,))  # the header's checks and the key's import are now cached
    header, payload, signature = key.proof(HTU, token=TOKEN).split(".")
    flipped = signature[:10] + ("A" if signature[10] != "A" else "B") + signature[11:]
    assert _reason((f"{header}.{payload}.{flipped}",)) == "signature"
    with pytest.raises(InvalidDpopProof) as info:  # another issuer's algorithms
        check_proof(
            (good,),
            ath=token_hash(TOKEN),
            method="POST",
            htu=HTU,
            algorithms=("EdDSA",),
            iat_window_s=300,
            now=time.time(),
        )
    assert info.value.reason == "alg"


def test_a_jwk_spelled_otherwise_is_the_same_key_and_another_key_never_hits_its_entry() -> None:
    key, other = DpopKey(), DpopKey()
    first = _check((key.proof(HTU, token=TOKEN),))
    respelled = {"use": "sig", **dict(reversed(key.public_jwk.items()))}
    second = _check((key.proof(HTU, token=TOKEN, jwk=respelled),))
    assert first.jkt == second.jkt == key.jkt  # type: ignore[attr-defined]
    # The other key's proof names its own jwk: its header text differs, so it is checked (and
    # thumbprinted) as its own; with the first key's jwk it cannot be verified at all.
    assert _check((other.proof(HTU, token=TOKEN),)).jkt == other.jkt  # type: ignore[attr-defined]
    assert _reason((other.proof(HTU, token=TOKEN, jwk=key.public_jwk),)) == "signature"
    # A jwk whose own members say it is not for signatures verifies nothing.
    assert _reason((key.proof(HTU, token=TOKEN, jwk={**key.public_jwk, "use": "enc"}),)) == (
        "signature"
    )
