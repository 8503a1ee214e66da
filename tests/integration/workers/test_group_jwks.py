"""``serve --workers 2`` with ``audit.checkpoint``: the group's ops listener publishes the
checkpoint key the workers sign with, so ``audit verify --jwks <group ops URL>`` works on a
worker group as it does on a single process (issue 33)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

from gateway.observability.audit_chain import public_jwk
from tests.integration.workers.test_workers import fresh_call, group, log_lines, ops, until

pytestmark = pytest.mark.slow


async def test_the_groups_jwks_carries_the_audit_checkpoint_key(tmp_path: Path) -> None:
    key = Ed25519PrivateKey.generate()
    pem = tmp_path / "audit-key.pem"
    pem.write_bytes(key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()))
    # stdout: a file sink cannot be shared by workers (the config loader refuses it).
    audit = {"sink": "stdout", "checkpoint": {"key": {"file": str(pem)}, "every": 1}}
    async with group(tmp_path, overrides={"audit": audit}) as stack:
        status, document = await ops(stack, "/.well-known/jwks.json")
        call_status, _ = await fresh_call(stack, stack.mint(), text="hi")
        assert call_status == 200

        async def checkpoints() -> set[object] | None:
            kids = {
                line.get("kid")
                for line in log_lines(stack.replicas[0])
                if line.get("event") == "audit_checkpoint"
            }
            return kids or None

        kids = await until(checkpoints, "a worker's checkpoint")
    assert status == 200, document
    okp = [k for k in document["keys"] if k.get("kty") == "OKP"]
    expected = public_jwk(key.public_key())
    assert okp == [expected]
    assert "d" not in okp[0]  # never the private part
    assert kids == {expected["kid"]}  # the workers' checkpoints name that key
