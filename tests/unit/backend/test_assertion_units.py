"""Units of the caller assertions: claims, the reuse window, rotation by file, the JWK Set.

Signatures are checked with PyJWT against the published JWK Set (not with gateway code)."""

from __future__ import annotations

import copy
import os
import pickle
import time
from pathlib import Path
from typing import Any

import jwt
import pytest
import structlog

from gateway.auth.claims import actor_of
from gateway.backend.credentials import caller_assertion as assertion_module
from gateway.backend.credentials.assertion_keys import ASSERTION_TYP, AssertionKey, GatewayKeys
from gateway.backend.credentials.caller_assertion import AssertionSigner
from gateway.config import AssertionConfig, Secret
from gateway.seams import CachedPrincipal, CallerToken, Principal, RequestContext, ToolCall, ToolDef
from gateway.state.token_cache import decode_entry, encode_entry
from tests.support.assertion_verifier import public_pem, write_key

ISSUER = "https://mcp.example.com/mcp"
AUD = "https://tools.internal/mcp"
TOOL = ToolDef(name="docs__search", definition={}, upstream_name="search", backend="docs")
DIGEST = bytes.fromhex("ab" * 32)


def _principal(**overrides: Any) -> Principal:
    fields: dict[str, Any] = {
        "subject": "erin",
        "client_id": "claude-code",
        "scopes": frozenset({"mcp:access", "docs:read"}),
        "expires_at": time.time() + 3600,
        "issuer": "https://id.example.com",
        "fingerprint": DIGEST.hex()[:12],
    }
    return Principal(**(fields | overrides))


def _ctx(request_id: str = "req-1") -> RequestContext:
    return RequestContext(request_id, "t" * 32, "s" * 16, 0.0, "127.0.0.1")


def _config(key: Path, **overrides: Any) -> AssertionConfig:
    secret = Secret(key.read_text().strip(), f"file:{key}", key.stat().st_mtime)
    return AssertionConfig(**({"key": secret, "audience": AUD} | overrides))


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def _verify(keys: GatewayKeys, token: str, alg: str = "EdDSA") -> dict[str, Any]:
    jwks = jwt.PyJWKSet.from_dict(keys.jwks())
    kid = jwt.get_unverified_header(token)["kid"]
    (key,) = [k for k in jwks.keys if k.key_id == kid]
    return dict(jwt.decode(token, key.key, algorithms=[alg], audience=AUD, issuer=ISSUER))


def _signer(
    config: AssertionConfig, clock: Clock | None = None
) -> tuple[AssertionSigner, GatewayKeys]:
    key = AssertionKey(config)
    keys = GatewayKeys({"docs": key})
    kwargs: dict[str, Any] = {"clock": clock} if clock is not None else {}
    return AssertionSigner(config, key, issuer=ISSUER, backend="docs", **kwargs), keys


class TestClaims:
    @pytest.mark.parametrize(
        ("kind", "alg"), [("ed25519", "EdDSA"), ("p256", "ES256"), ("rsa", "RS256")]
    )
    def test_exactly_the_documented_claims_signed_with_each_algorithm(
        self, tmp_path: Path, kind: str, alg: str
    ) -> None:
        config = _config(write_key(tmp_path / "k.pem", kind), alg=alg)
        signer, keys = _signer(config)
        token = signer.assertion(TOOL, _principal(actor="agent-7"), _ctx())
        header = jwt.get_unverified_header(token)
        assert header == {"alg": alg, "kid": keys.jwks()["keys"][0]["kid"], "typ": ASSERTION_TYP}
        claims = _verify(keys, token, alg)
        assert set(claims) == {
            "iss",
            "aud",
            "sub",
            "client_id",
            "azp",
            "act",
            "scope",
            "tool",
            "iat",
            "exp",
            "jti",
            "request_id",
        }
        assert claims["act"] == {"sub": "agent-7"}
        assert claims["scope"] == "docs:read mcp:access"  # sorted
        assert claims["tool"] == {"name": "docs__search", "upstream": "search"}
        assert claims["request_id"] == "req-1"
        assert claims["exp"] - claims["iat"] == 60

    def test_no_client_no_actor_no_claims_for_them(self, tmp_path: Path) -> None:
        signer, keys = _signer(_config(write_key(tmp_path / "k.pem")))
        claims = _verify(keys, signer.assertion(TOOL, _principal(client_id=None), _ctx()))
        assert not {"client_id", "azp", "act"} & set(claims)

    def test_exp_is_bounded_by_the_callers_token_and_stays_after_iat(self, tmp_path: Path) -> None:
        clock = Clock()
        signer, keys = _signer(_config(write_key(tmp_path / "k.pem"), ttl_s=300), clock)
        short = _principal(expires_at=clock.now + 10, skew_s=5)
        claims = _verify(keys, signer.assertion(TOOL, short, _ctx()))
        assert claims["exp"] <= int(clock.now) + 16
        # Within the skew the call is admitted: the assertion is still valid right now.
        late = _principal(expires_at=clock.now - 2, skew_s=5, fingerprint="ffffffffffff")
        token = signer.assertion(TOOL, late, _ctx())
        payload = jwt.decode(token, options={"verify_signature": False})
        assert payload["exp"] >= payload["iat"] + 1


class TestReuse:
    def test_reused_for_half_the_lifetime_then_minted_again(self, tmp_path: Path) -> None:
        clock = Clock()
        signer, _ = _signer(_config(write_key(tmp_path / "k.pem"), ttl_s=60), clock)
        principal = _principal()
        first = signer.assertion(TOOL, principal, _ctx("a"))
        clock.now += 29
        assert signer.assertion(TOOL, principal, _ctx("b")) == first
        clock.now += 2
        assert signer.assertion(TOOL, principal, _ctx("c")) != first

    def test_another_tool_another_principal_or_a_collision_gets_its_own(
        self, tmp_path: Path
    ) -> None:
        signer, _ = _signer(_config(write_key(tmp_path / "k.pem")))
        principal = _principal()
        first = signer.assertion(TOOL, principal, _ctx())
        other_tool = ToolDef(name="docs__get", definition={}, upstream_name="get", backend="docs")
        assert signer.assertion(other_tool, principal, _ctx()) != first
        # Same fingerprint, different claims (a 48-bit collision): never handed over.
        assert signer.assertion(TOOL, _principal(subject="mallory"), _ctx()) != first

    def test_reuse_false_mints_every_time(self, tmp_path: Path) -> None:
        signer, _ = _signer(_config(write_key(tmp_path / "k.pem"), reuse=False))
        principal = _principal()
        tokens = {signer.assertion(TOOL, principal, _ctx()) for _ in range(5)}
        assert len(tokens) == 5

    def test_bounded_and_forgotten_with_the_callers_token(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(assertion_module, "MAX_REUSED", 3)
        signer, _ = _signer(_config(write_key(tmp_path / "k.pem")))
        principal = _principal()
        first = signer.assertion(TOOL, principal, _ctx())
        signer.forget(DIGEST)  # revoked: the next call mints
        assert signer.assertion(TOOL, principal, _ctx()) != first
        for index in range(5):
            signer.assertion(TOOL, _principal(fingerprint=f"{index:012x}"), _ctx())
        assert len(signer._minted) == 3


class TestRotation:
    def _rotate(self, path: Path, kind: str = "ed25519") -> None:
        write_key(path.with_suffix(".new"), kind)
        os.replace(path.with_suffix(".new"), path)
        stamp = time.time() + 10
        os.utime(path, (stamp, stamp))

    def test_a_new_key_file_changes_the_key_and_the_kid(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(Secret, "RECHECK_S", 0.0)
        path = write_key(tmp_path / "k.pem")
        signer, keys = _signer(_config(path, reuse=False))
        old = jwt.get_unverified_header(signer.assertion(TOOL, _principal(), _ctx()))["kid"]
        self._rotate(path)
        token = signer.assertion(TOOL, _principal(), _ctx())
        assert jwt.get_unverified_header(token)["kid"] != old
        _verify(keys, token)

    @pytest.mark.parametrize("fixed", [None, "gw-1"])
    def test_an_unusable_new_key_is_refused_and_the_old_one_keeps_signing(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fixed: str | None
    ) -> None:
        monkeypatch.setattr(Secret, "RECHECK_S", 0.0)
        path = write_key(tmp_path / "k.pem")
        signer, keys = _signer(_config(path, reuse=False, key_id=fixed))
        before = keys.jwks()
        # No kid: an RSA key for EdDSA. A fixed kid: any different key (one kid, one key).
        self._rotate(path, "rsa" if fixed is None else "ed25519")
        with structlog.testing.capture_logs() as events:
            token = signer.assertion(TOOL, _principal(), _ctx())
            signer.assertion(TOOL, _principal(), _ctx())
        assert [e["event"] for e in events] == ["assertion_key_rejected"]  # judged once
        assert "PRIVATE" not in repr(events)
        assert keys.jwks() == before
        _verify(keys, token)


class TestJwkSet:
    def test_shared_key_files_publish_one_key_and_published_files_follow_changes(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(Secret, "RECHECK_S", 0.0)
        path = write_key(tmp_path / "k.pem")
        published = tmp_path / "published.pem"
        published.write_bytes(public_pem(write_key(tmp_path / "next.pem", "p256")))
        key = AssertionKey(_config(path))
        keys = GatewayKeys({"a": key, "b": key}, [published])
        doc = keys.jwks()
        assert [(j["kty"], j["alg"]) for j in doc["keys"]] == [("OKP", "EdDSA"), ("EC", "ES256")]
        assert all("d" not in j for j in doc["keys"])
        published.write_text("garbage")
        stamp = time.time() + 10
        os.utime(published, (stamp, stamp))
        with structlog.testing.capture_logs() as events:
            assert keys.jwks() == doc  # a half-written file never drops published keys
        assert [e["event"] for e in events] == ["published_key_file_rejected"]


class TestActorClaim:
    def test_act_sub_is_read_bounded_and_travels_in_the_shared_cache(self) -> None:
        assert actor_of({"act": {"sub": "agent-7", "act": {"sub": "ci"}}}) == "agent-7"
        assert actor_of({"act": "agent-7"}) is None
        assert actor_of({"act": {"sub": "x" * 257}}) is None
        assert actor_of({}) is None
        principal = _principal(actor="agent-7")
        entry = CachedPrincipal(principal, time.time() + 30)
        decoded = decode_entry(encode_entry(entry), DIGEST, time.time())
        assert decoded is not None and decoded.principal.actor == "agent-7"
        plain = CachedPrincipal(_principal(), time.time() + 30)
        decoded = decode_entry(encode_entry(plain), DIGEST, time.time())
        assert decoded is not None and decoded.principal.actor is None


class TestCallerToken:
    def test_it_never_shows_or_serialises_the_token(self) -> None:
        token = CallerToken("very-secret-token", DIGEST)
        assert token.reveal() == "very-secret-token"
        for text in (
            repr(token),
            str(token),
            f"{token}",
            repr(ToolCall(TOOL, {}, "modern", "v", caller_token=token)),
        ):
            assert "very-secret-token" not in text
        with pytest.raises(TypeError):
            pickle.dumps(token)
        with pytest.raises(TypeError):
            copy.deepcopy(token)
