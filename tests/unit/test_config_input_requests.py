"""``input_requests:``: seal keys checked at load (length, encoding, ids), defaults, warnings."""

from __future__ import annotations

import base64
import secrets
from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.config import load_config
from gateway.config.input_requests import decode_seal_key, max_sealed_chars
from gateway.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "config"
KEY = base64.b64encode(bytes(range(32))).decode()
ENV = {
    "TEST_INTROSPECTION_SECRET": "introspection-secret",
    "TEST_BACKEND_TOKEN": "backend-token",
    "SEAL_A": KEY,
}


def _load(tmp_path: Path, section: Any, env: dict[str, str] | None = None, **top: Any) -> Any:
    doc = yaml.safe_load((FIXTURES / "minimal.yaml").read_text())
    doc["input_requests"] = section
    doc.update(top)
    (tmp_path / "policy.yaml").write_text((FIXTURES / "policy.yaml").read_text())
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return load_config(path, {**ENV, **(env or {})})


def _problems(tmp_path: Path, section: Any, env: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, section, env)
    return info.value.problems


class TestKeyEncodings:
    @pytest.mark.parametrize(
        "text",
        [
            base64.b64encode(bytes(32)).decode(),  # standard, padded (44)
            base64.b64encode(bytes(32)).decode().rstrip("="),  # 43
            base64.urlsafe_b64encode(b"\xff" * 32).decode(),  # base64url
            bytes(32).hex(),  # 64 hex digits
            bytes(32).hex().upper(),
            "  " + bytes(32).hex() + "\n",  # a file with a trailing newline
        ],
    )
    def test_32_bytes_in_each_accepted_spelling(self, text: str) -> None:
        assert decode_seal_key(text) is not None
        assert len(decode_seal_key(text) or b"") == 32

    @pytest.mark.parametrize(
        "text",
        [
            base64.b64encode(bytes(31)).decode(),  # one byte short
            base64.b64encode(bytes(33)).decode(),  # one byte long
            bytes(31).hex(),
            bytes(33).hex(),
            "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAB=",  # non-zero padding bits
            "not a key at all, just a passphrase........",
            "",
        ],
    )
    def test_anything_else_is_refused(self, text: str) -> None:
        assert decode_seal_key(text) is None


class TestLoad:
    def test_one_key_seals_by_default_and_the_defaults_apply(self, tmp_path: Path) -> None:
        c = _load(tmp_path, {"seal_keys": [{"id": "a", "key": {"env": "SEAL_A"}}]})
        ir = c.input_requests
        assert ir.enabled is True
        assert ir.seal_key_id == "a"
        assert ir.seal_keys[0].key == bytes(range(32))
        assert (ir.ttl_s, ir.max_rounds) == (600, 8)
        assert (ir.max_state_bytes, ir.max_input_response_bytes) == (8192, 32768)
        assert c.warnings == ()

    def test_a_short_key_is_a_problem_that_never_shows_the_value(self, tmp_path: Path) -> None:
        short = base64.b64encode(b"sixteen byte key").decode()
        problems = _problems(
            tmp_path, {"seal_keys": [{"id": "a", "key": {"env": "SHORT"}}]}, {"SHORT": short}
        )
        assert len(problems) == 1
        assert (
            "input_requests.seal_keys[0].key: must be 32 random bytes as base64 or hex"
            in (problems[0])
        )
        assert short not in problems[0]

    def test_duplicate_ids_and_an_unknown_seal_key_id_are_problems(self, tmp_path: Path) -> None:
        problems = _problems(
            tmp_path,
            {
                "seal_keys": [
                    {"id": "a", "key": {"env": "SEAL_A"}},
                    {"id": "a", "key": {"env": "SEAL_A"}},
                ],
                "seal_key_id": "b",
            },
        )
        assert any("input_requests.seal_keys[1].id: duplicate key id" in p for p in problems)
        assert any(
            "input_requests.seal_key_id: must be the id of one of seal_keys" in p for p in problems
        )

    def test_enabled_without_keys_is_a_problem_disabled_is_not(self, tmp_path: Path) -> None:
        assert any("needs seal_keys" in p for p in _problems(tmp_path, {"ttl_s": 60}))
        c = _load(tmp_path, {"enabled": False})
        assert c.input_requests.enabled is False

    def test_the_schema_bounds_the_numbers(self, tmp_path: Path) -> None:
        keys = [{"id": "a", "key": {"env": "SEAL_A"}}]
        for key, bad in (("ttl_s", 9), ("max_rounds", 0), ("max_state_bytes", 32769)):
            problems = _problems(tmp_path, {"seal_keys": keys, key: bad})
            assert any(f"input_requests.{key}" in p for p in problems), problems
        long_id = [{"id": "x" * 17, "key": {"env": "SEAL_A"}}]
        assert _problems(tmp_path, {"seal_keys": long_id})

    def test_a_state_that_could_not_come_back_is_a_warning(self, tmp_path: Path) -> None:
        keys = [{"id": "a", "key": {"env": "SEAL_A"}}]
        c = _load(
            tmp_path,
            {"seal_keys": keys, "max_state_bytes": 8192},
            limits={"json": {"max_string_bytes": 4096}},
        )
        (warning,) = c.warnings
        assert warning.startswith(
            f"input_requests.max_state_bytes: a sealed state may be {max_sealed_chars(8192)} "
            "characters, more than limits.json.max_string_bytes (4096)"
        )

    def test_a_file_key_with_a_newline_loads(self, tmp_path: Path) -> None:
        (tmp_path / "seal.key").write_text(secrets.token_hex(32) + "\n")
        c = _load(tmp_path, {"seal_keys": [{"id": "f", "key": {"file": "seal.key"}}]})
        assert len(c.input_requests.seal_keys[0].key) == 32
