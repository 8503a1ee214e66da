"""Human approval put together (``approval:`` rules, docs/policy.md#approvals): the records in
``state:``'s store (one replica's memory, or Redis shared by every replica), the desk the front
door asks, the approval pages on the login surface, the optional webhook. Without ``login:``
there is no desk: a call a rule holds for approval is ``approval_unavailable`` (fail closed)."""

from __future__ import annotations

from gateway.approvals.approval_pages import ApprovalPages
from gateway.approvals.desk import ApprovalDesk
from gateway.approvals.webhook import ApprovalWebhook
from gateway.backend.credentials.service_credential import make_credential
from gateway.config import Config
from gateway.login.login_surface import LoginSurface
from gateway.observability.approval_events import ApprovalAudit
from gateway.observability.audit import AuditSink
from gateway.observability.metrics import Metrics
from gateway.outbound.client import Outbound
from gateway.state.approval_records import ApprovalStore, MemoryApprovalStore
from gateway.state.approval_records_redis import RedisApprovalStore
from gateway.state.shared import SharedState

__all__ = ["build_approval_desk"]


def build_approval_desk(
    config: Config,
    outbound: Outbound,
    state: SharedState,
    login: LoginSurface | None,
    *,
    audit: AuditSink | None,
    metrics: Metrics | None,
) -> ApprovalDesk | None:
    if login is None:
        return None
    store: ApprovalStore = (
        RedisApprovalStore(state.store) if state.store is not None else MemoryApprovalStore()
    )
    desk = ApprovalDesk(
        store,
        ApprovalAudit(audit, metrics.approvals if metrics else None, config.logging),
        base_url=login.origin + login.prefix,
        webhook=_webhook(config, outbound),
    )
    ApprovalPages(login, desk).install()
    return desk


def _webhook(config: Config, outbound: Outbound) -> ApprovalWebhook | None:
    """The webhook with its service credential (built as a backend's), when configured."""
    hook = config.approvals.webhook
    if hook is None:
        return None
    credential = (
        None
        if hook.credential is None
        else make_credential(hook.credential, config, outbound, backend="approval-webhook")
    )
    return ApprovalWebhook(hook, outbound, credential)
