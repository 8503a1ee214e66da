"""Ports for servers a test starts on a port fixed in advance (and restarts).

The choice is the demo's (:func:`gateway.demo.ports.free_port`): below the ephemeral range,
which every outgoing connection on the machine draws from too, so a busy machine cannot take
the port before the server binds it (EADDRINUSE), and never the same port twice per process.
Under pytest-xdist each worker chooses from its own slice of that range
(:func:`share_among_workers`, called by tests/conftest.py), so two workers never pick the same
port; in-process demo stacks choose through the same function and so honour the slice too.
"""

from __future__ import annotations

import os

from gateway.demo.ports import free_port, share

__all__ = ["free_port", "share_among_workers"]


def share_among_workers() -> None:
    """Take this xdist worker's slice of the range (``gw3`` of 4: the fourth); no-op serially."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker is not None:
        share(int(worker.removeprefix("gw")), int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))
