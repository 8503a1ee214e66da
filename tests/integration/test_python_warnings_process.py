"""A Python warning raised while serving is one JSON log line, not raw text on stderr.

Issue 32 item 9: joserfc warns (``SecurityWarning``) when it imports an RSA key under 2048 bits,
which the gateway does for every key of an issuer's JWK Set before it skips the weak one; the
warning went to stderr as two lines of plain text, outside the JSON log. A real ``serve``
process and the development issuer publishing a 1024-bit key.
"""

from __future__ import annotations

import asyncio
import json
import time
import warnings
from pathlib import Path

import pytest

from tests.support.replicas import replica_stack

pytestmark = pytest.mark.slow


async def test_joserfcs_security_warning_for_a_weak_key_is_a_json_log_line(
    tmp_path: Path,
) -> None:
    async with replica_stack(
        tmp_path,
        None,
        replicas=1,
        issuer_options={"token_format": "jwt"},
        overrides={"issuer": {"tokens": "jwt"}},
    ) as stack:
        (replica,) = stack.replicas
        assert (await stack.post(replica, stack.mint(), "tools/list"))[0] == 200
        with warnings.catch_warnings():  # the test process's own import of the weak key
            warnings.simplefilter("ignore")
            weak = stack.issuer.keys.add("RSA", rsa_bits=1024)
        stack.issuer.keys.use(weak)
        # An unknown kid makes the gateway fetch the JWK Set again: it imports the weak key
        # (joserfc warns), skips it, and refuses the token it signed.
        status, _, _ = await stack.post(replica, stack.mint(), "tools/list")
        assert status == 401
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # the log is a file the process writes
            if "python.warning" in replica.log():
                break
            await asyncio.sleep(0.05)
        log = replica.log()
    lines = [line for line in log.splitlines() if "Key size" in line or "Warning" in line]
    assert lines, log[-2000:]
    for line in lines:  # every mention is a whole JSON line: nothing raw on stderr
        assert line.startswith("{"), line
    (record,) = [json.loads(line) for line in lines if '"python.warning"' in line]
    assert record["level"] == "warning"
    assert record["category"] == "SecurityWarning"
    assert record["detail"] == "Key size should be >= 2048 bits"
    assert record["source"].rsplit(":", 1)[1].isdigit()  # file:line of the warning
    assert "timestamp" in record  # rendered by the gateway's log setup
