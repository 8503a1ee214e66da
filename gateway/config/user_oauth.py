"""``user_oauth:`` and what a ``type: user_oauth`` backend credential needs from the rest of the
file (docs/user-authorization.md#per-user-upstream-authorization).

Checked at load: the section's key ring (as ``input_requests.seal_keys``); a ``user_oauth``
backend needs this section (its tokens are sealed with these keys) and ``login:`` (the consent
link is a page of the login surface, where the person who opens it proves who they are).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gateway.config.backend_model import BackendConfig
from gateway.config.builder import Builder
from gateway.config.declare import fill
from gateway.config.input_requests import read_seal_keys
from gateway.config.login_model import LoginConfig
from gateway.config.model import UserOAuthConfig
from gateway.yaml_source import PathPart

__all__ = ["build_user_oauth", "user_oauth_backends"]

_WHERE: tuple[PathPart, ...] = ("user_oauth",)


def user_oauth_backends(backends: tuple[BackendConfig, ...]) -> tuple[BackendConfig, ...]:
    """The backends that act for each user with the user's own upstream token."""
    return tuple(b for b in backends if b.credential.type == "user_oauth")


def build_user_oauth(
    b: Builder,
    raw: dict[str, Any] | None,
    backends: tuple[BackendConfig, ...],
    login: LoginConfig | None,
    *,
    single: bool,
) -> UserOAuthConfig | None:
    """None without the section. ``single``: the file has ``backend:`` (not ``backends:``),
    for the position of a problem."""
    users = user_oauth_backends(backends)
    for backend in users:
        where: tuple[PathPart, ...] = (
            ("backend", "credential", "type")
            if single
            else ("backends", backend.name, "credential", "type")
        )
        if raw is None:
            b.doc.problem(where, "user_oauth needs the user_oauth: section (its token store keys)")
        if login is None:
            b.doc.problem(
                where, "user_oauth needs login: (people confirm who they are at its pages)"
            )
    if raw is None:
        return None
    config = fill(b, UserOAuthConfig, raw, _WHERE, leave=("seal_keys", "seal_key_id"))
    keys, seal_key_id = read_seal_keys(b, raw, _WHERE)
    if not users:
        b.warnings.append(
            f"{b.doc.where(_WHERE)}: user_oauth: no backend has credential.type user_oauth; "
            "the section is not used"
        )
    return replace(config, seal_keys=keys, seal_key_id=seal_key_id)
