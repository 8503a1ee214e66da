"""``approvals:`` (docs/configuration.md#approvals): the claims approvers are recognised by at
the login surface, how long a retry waits for a decision, the optional webhook."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gateway.config.approvals_model import ApprovalsConfig, ApprovalWebhookConfig
from gateway.config.builder import Builder
from gateway.config.declare import fill

__all__ = ["build_approvals"]


def build_approvals(b: Builder, raw: dict[str, Any] | None, *, dev_http: bool) -> ApprovalsConfig:
    if raw is None:
        return ApprovalsConfig()
    config = fill(b, ApprovalsConfig, raw, ("approvals",), leave=("webhook",))
    hook = raw.get("webhook")
    if hook is None:
        return config
    where = ("approvals", "webhook")
    webhook = fill(b, ApprovalWebhookConfig, hook, where)
    url = b.url(
        webhook.url, (*where, "url"), insecure_ok=webhook.allow_insecure_http, private_ok=True
    )
    return replace(config, webhook=replace(webhook, url=url))
