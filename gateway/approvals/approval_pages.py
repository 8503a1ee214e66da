"""The approval pages on the login surface (docs/policy.md#approvals):

===============================  ======  ===================================================
``<prefix>/approve/<id>``        GET     one request: the tool, the backend, who asked, the
                                         redacted preview (canonical JSON) and its SHA-256,
                                         the expiry, its state; Approve and Deny (CSRF)
                                 POST    ``decision=approve|deny``: decided once, any replica
``<prefix>/approvals``           GET     the pending requests the signed-in person may decide
===============================  ======  ===================================================

Both need a signed-in person (without one: the sign-in, then back). Who may see and decide a
request is :func:`~gateway.approvals.desk.may_decide`'s rule; anyone else gets
``approval_forbidden`` and the record stays as it was. The preview is the redacted copy the
record holds: the arguments themselves are never on a page.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from aiohttp import web

from gateway.approvals.desk import KIND, ApprovalDesk, Shown
from gateway.errors import LoginBadRequest, LoginNotFound
from gateway.login.cookies import Session
from gateway.login.login_surface import LoginSurface
from gateway.login.page_kinds import Visit
from gateway.login.pages import Html, hidden_field, html, page
from gateway.login.person import BrowserIdentity

__all__ = ["LIST_PATH", "ApprovalPages"]

LIST_PATH = "/approvals"
_STATES = {
    "pending": "waiting for a decision",
    "approved": "approved (the call may run once)",
    "denied": "denied",
    "expired": "expired",
    "consumed": "approved and run",
}


class ApprovalPages:
    def __init__(self, surface: LoginSurface, desk: ApprovalDesk) -> None:
        self._surface = surface
        self._desk = desk

    def install(self) -> None:
        self._surface.add_action(KIND, self._approve)
        self._surface.add_page(LIST_PATH, self._list, methods=("GET", "HEAD"))

    async def _approve(self, request: web.Request, visit: Visit) -> web.StreamResponse:
        if len(visit.nonce) != 43:
            raise LoginNotFound(detail="not an approval id")
        if visit.form is None:
            shown = await self._desk.show(visit.nonce, visit.identity)
            return self._request_page(shown, visit)
        decision = visit.form.get("decision")
        if decision not in ("approve", "deny"):
            raise LoginBadRequest(detail="no decision")
        _, body, _ = await self._desk.decide(visit.nonce, visit.identity, decision == "approve")
        text = (
            '<p id="decided">Approved: the call of <code>{}</code> may run once. Return to '
            "the MCP client.</p>"
            if decision == "approve"
            else '<p id="decided">Denied: the call of <code>{}</code> will not run.</p>'
        )
        back = html('<p><a href="{}">Other requests waiting for you</a></p>', self._desk.list_url)
        return page("Approval", Html.concat([html(text, body.binding.tool), back]))

    def _request_page(self, shown: Shown, visit: Visit) -> web.Response:
        record, body, digest = shown
        binding = body.binding
        parts = [
            html(
                '<p class="who">Signed in as <code>{}</code>.</p>'
                "<p><code>{}</code> (client <code>{}</code>) asks to call <code>{}</code> at "
                "<code>{}</code> with these arguments{}:</p>"
                '<pre id="preview">{}</pre>'
                '<p>Preview SHA-256: <code id="preview-hash">{}</code></p>'
                "<p>Policy <code>{}</code>; request <code>{}</code>; expires {}.</p>"
                '<p id="state">State: {}</p>',
                visit.identity.subject,
                binding.subject,
                binding.client_id or "-",
                binding.tool,
                binding.backend,
                " (some values redacted)" if body.rule.redact else "",
                body.preview_text,
                body.preview_sha256,
                binding.policy_version,
                digest[:32],
                time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(body.expires_at)),
                _STATES.get(record.state, record.state),
            )
        ]
        if record.state == "pending":
            parts.append(
                html(
                    '<form method="post">{}{}<button type="submit" id="approve">Approve</button>'
                    "</form>"
                    '<form method="post">{}{}<button type="submit" id="deny">Deny</button>'
                    "</form>",
                    visit.csrf_field(),
                    hidden_field("decision", "approve"),
                    visit.csrf_field(),
                    hidden_field("decision", "deny"),
                )
            )
        return page("Approve this call?", Html.concat(parts))

    async def _list(
        self, request: web.Request, session: Session | None, form: Mapping[str, str] | None
    ) -> web.StreamResponse:
        if session is None:
            return self._surface.to_signin(request)
        waiting = await self._desk.waiting_for(session.identity)
        rows = [
            html(
                '<li><a href="{}">{}</a> by <code>{}</code> at <code>{}</code>, asked by '
                "<code>{}</code></li>",
                self._desk.url(record.id),
                body.binding.tool,
                body.rule.approvers,
                body.binding.backend,
                body.binding.subject,
            )
            for record, body, _ in waiting
        ]
        listing = (
            html('<ul id="waiting">{}</ul>', Html.concat(rows))
            if rows
            else html('<p id="none">Nothing is waiting for you.</p>')
        )
        return page("Requests waiting for you", Html.concat([_who(session.identity), listing]))


def _who(identity: BrowserIdentity) -> Html:
    return html('<p class="who">Signed in as <code>{}</code>.</p>', identity.subject)
