"""The log redaction safety net (redact_secrets) and configure()'s JSON output."""

from __future__ import annotations

import io
import json
import logging
import sys
from typing import Any

import pytest
import structlog

from gateway.observability.logging import REDACTED, configure, is_secret_key, redact_secrets

TOKEN = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJib2IifQ.sig-abc_123"


def redact(**event: Any) -> dict[str, Any]:
    return dict(redact_secrets(None, "info", dict(event)))


class TestSecretKeys:
    @pytest.mark.parametrize(
        "key",
        [
            "authorization",
            "Authorization",
            "proxy-authorization",
            "token",
            "access_token",
            "refresh_token",
            "id_token",
            "client_secret",
            "password",
            "cookie",
            "Set-Cookie",
            "api_key",
            "X-Api-Key",
            "private_key",
            "client_assertion",
            "mcp-session-id",
        ],
    )
    def test_a_secret_named_key_has_its_value_masked(self, key: str) -> None:
        assert is_secret_key(key)
        assert redact(**{key: TOKEN})[key] == REDACTED

    @pytest.mark.parametrize(
        "key", ["token_fp", "token_type", "subject", "client_id", "tool", "scope", "event"]
    )
    def test_ordinary_keys_are_left_alone(self, key: str) -> None:
        assert not is_secret_key(key)
        assert redact(**{key: "value"})[key] == "value"

    def test_a_none_secret_stays_none(self) -> None:
        assert redact(access_token=None)["access_token"] is None


class TestBearerText:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            pytest.param(f"Bearer {TOKEN}", "Bearer [REDACTED]", id="Bearer <token>"),
            pytest.param(f"bearer {TOKEN}", "Bearer [REDACTED]", id="bearer <token> lowercase"),
            pytest.param(f"BEARER\t{TOKEN}", "Bearer [REDACTED]", id="BEARER<tab><token>"),
            pytest.param(
                f"upstream said: Authorization: Bearer {TOKEN}, retrying",
                "upstream said: Authorization: Bearer [REDACTED], retrying",
                id="inside a sentence",
            ),
        ],
    )
    def test_bearer_credentials_in_any_string_are_masked(self, text: str, expected: str) -> None:
        assert redact(event=text)["event"] == expected

    def test_nested_mappings_and_lists_are_cleaned(self) -> None:
        out = redact(
            headers={"Authorization": f"Bearer {TOKEN}", "Accept": "application/json"},
            attempts=[{"client_secret": "s3cr3t"}, f"Bearer {TOKEN}"],
        )
        assert out["headers"] == {"Authorization": REDACTED, "Accept": "application/json"}
        assert out["attempts"] == [{"client_secret": REDACTED}, "Bearer [REDACTED]"]
        assert TOKEN not in json.dumps(out) and "s3cr3t" not in json.dumps(out)

    def test_text_without_the_word_bearer_is_unchanged(self) -> None:
        assert redact(event="token rejected: expired")["event"] == "token rejected: expired"

    @pytest.mark.parametrize(
        "text",
        [
            "token_type is not a bearer access token",
            "the bearer scheme is",
            "missing Bearer credentials, retrying",
            "send a Bearer token",
            "typ claim is not Bearer (refresh or ID token)",  # no b64token starts with "("
        ],
    )
    def test_the_gateways_own_prose_after_bearer_is_left_alone(self, text: str) -> None:
        assert redact(event=text)["event"] == text

    @pytest.mark.parametrize(
        "credential", ["token-abc123", "access.eyJhbGciOi", "tokens_x", "scheme2", TOKEN]
    )
    def test_credentials_that_start_like_a_prose_word_are_still_masked(
        self, credential: str
    ) -> None:
        assert redact(event=f"Bearer {credential} x")["event"] == "Bearer [REDACTED] x"


@pytest.mark.usefixtures("restore_logging")  # configure() is process-wide: undo it after each
class TestConfigure:
    def test_json_lines_are_redacted_and_carry_level_and_timestamp(self) -> None:
        stream = io.StringIO()
        configure("json", "info", stream=stream)
        log = structlog.get_logger("gateway.test")
        log.info("introspection.failed", authorization=f"Bearer {TOKEN}", status=502)
        log.debug("hidden at info")
        (line,) = [json.loads(raw) for raw in stream.getvalue().splitlines()]
        assert line["authorization"] == REDACTED and line["status"] == 502
        assert line["level"] == "info" and line["timestamp"].endswith("Z")
        assert TOKEN not in stream.getvalue()

    def test_stdlib_records_go_through_the_same_redaction(self) -> None:
        stream = io.StringIO()
        configure("json", "info", stream=stream)
        logging.getLogger("aiohttp.server").error("bad header Authorization: Bearer %s", TOKEN)
        (line,) = [json.loads(raw) for raw in stream.getvalue().splitlines()]
        assert line["event"] == "bad header Authorization: Bearer [REDACTED]"
        assert TOKEN not in stream.getvalue()

    def test_exception_text_is_redacted_too(self) -> None:
        stream = io.StringIO()
        configure("json", "info", stream=stream)
        try:
            raise RuntimeError(f"upstream rejected Bearer {TOKEN}")
        except RuntimeError:
            structlog.get_logger("gateway.test").exception("call.failed")
        line = json.loads(stream.getvalue())
        assert "Bearer [REDACTED]" in line["exception"]
        assert TOKEN not in stream.getvalue()

    def test_a_cached_logger_writes_to_the_current_stdout_not_the_one_at_configure_time(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        configure("json", "info")
        log = structlog.get_logger("gateway.test")
        first, second = io.StringIO(), io.StringIO()
        monkeypatch.setattr(sys, "stdout", first)
        log.info("one")
        first.close()  # e.g. a test runner's capture stream, replaced and closed
        monkeypatch.setattr(sys, "stdout", second)
        log.info("two")
        assert json.loads(second.getvalue())["event"] == "two"
