"""The ``tasks:`` section: relaying the tasks extension (``io.modelcontextprotocol/tasks``).

A task handle is sealed under the keys every replica already shares, ``input_requests.seal_keys``
(with a derivation of its own, :mod:`gateway.protocol.task_handle`), and a task's input requests
are relayed under the ``input_requests`` rules: so ``tasks`` needs that section, enabled.
Rotation is the input rounds' (add the new key, point ``seal_key_id`` at it), except that an old
key must stay listed until ``tasks.max_ttl_s`` has passed, not only ``ttl_s``.
"""

from __future__ import annotations

from typing import Any

from gateway.config.builder import Builder
from gateway.config.declare import fill
from gateway.config.model import InputRequestsConfig, TasksConfig

__all__ = ["build_tasks"]


def build_tasks(b: Builder, raw: dict[str, Any], inputs: InputRequestsConfig) -> TasksConfig:
    if not raw:
        return TasksConfig()
    config = fill(b, TasksConfig, raw, ("tasks",))  # the section's presence turns it on
    if config.enabled and not (inputs.enabled and inputs.seal_keys):
        b.doc.problem(
            ("tasks",),
            "needs input_requests with seal_keys (task handles are sealed under them, and a "
            "task's input requests are relayed by its rules)",
        )
    return config
