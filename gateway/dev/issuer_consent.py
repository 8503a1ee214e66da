"""RFC 6749 §4.1.1 step (B): the development issuer's one-click consent page.

DEVELOPMENT ONLY. Shown when the issuer runs with ``consent="page"``: the resource owner (always
``demo-user``) ticks the scopes to grant and approves or denies. The form re-posts the original
authorization request plus a single-use nonce, so it cannot be replayed or forged cross-site.
"""

from __future__ import annotations

import html

from gateway.dev.issuer_adapter import IssuerSettings, ParsedRequest
from gateway.dev.issuer_store import DevClient

__all__ = ["consent_page"]


def consent_page(
    client: DevClient,
    parsed: ParsedRequest,
    offered: list[str],
    settings: IssuerSettings,
    nonce: str,
) -> str:
    hidden = "".join(
        f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(v)}">'
        for k, values in _query_lists(parsed).items()
        for v in values
    )
    boxes = "".join(
        f'<label><input type="checkbox" name="scope_choice" value="{html.escape(s)}"'
        f"{' checked' if s in offered else ''}> {html.escape(s)}</label><br>"
        for s in settings.scopes_supported
    )
    name = html.escape(client.client_name or client.client_id)
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>Development issuer</title></head>"
        "<body style='font-family:sans-serif;max-width:40em;margin:2em auto'>"
        f"<h1>Authorize {name}?</h1><p>Development issuer (not for production). Signed in as "
        f"<b>demo-user</b>. Scopes to grant:</p>"
        f"<form method='post' action='{html.escape(settings.issuer)}/authorize'>{hidden}"
        f"<input type='hidden' name='consent_nonce' value='{html.escape(nonce)}'>{boxes}<p>"
        "<button name='approve' value='yes' type='submit'>Approve</button> "
        "<button name='approve' value='no' type='submit'>Deny</button></p></form></body></html>"
    )


def _query_lists(parsed: ParsedRequest) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for key, value in parsed.query.items():
        out.setdefault(key, []).append(value)
    return out
