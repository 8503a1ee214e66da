"""The section builders' shared state: the located document, its directory and environment.

Every finding goes to ``doc.problem`` (``file:line:column: key.path: message``) and is reported
together with all others by :func:`gateway.config.loader.load_config`; warnings (literal secrets)
are collected here and end up in :attr:`Config.warnings <gateway.config.model.Config.warnings>`.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from gateway.config.secrets import SKIPPED, Secret, resolve_secret
from gateway.config.urls import is_loopback_url, is_private_url
from gateway.yaml_source import Located, PathPart

__all__ = ["Builder"]


class Builder:
    """Turns a schema-valid document into typed sections, recording semantic problems."""

    def __init__(
        self,
        doc: Located,
        base_dir: Path,
        environ: dict[str, str],
        *,
        resolve_secrets: bool | Collection[str] = True,
    ) -> None:
        self.doc = doc
        self.base_dir = base_dir
        self.environ = environ
        self.resolve_secrets = resolve_secrets
        """False for ``check --skip-secrets``: references are taken as given, not read; a
        collection of top-level keys: only the references under those are read (the
        ``catalog`` commands need the backends' credentials and nothing else)."""
        self.warnings: list[str] = []

    def secret(self, raw: Any, path: tuple[PathPart, ...]) -> Secret | None:
        reads = self.resolve_secrets
        if not isinstance(reads, bool):
            reads = bool(path) and path[0] in reads
        if not reads and isinstance(raw, dict):
            return Secret("", SKIPPED)  # not read; the schema checked the reference's form
        return resolve_secret(
            raw,
            path,
            self.doc,
            environ=self.environ,
            resolve_path=self.path,
            warnings=self.warnings,
        )

    def path(self, raw: str) -> Path:
        """A path from the file, relative to the configuration file's directory."""
        candidate = Path(raw)
        return candidate if candidate.is_absolute() else self.base_dir / candidate

    def url(
        self, raw: str, path: tuple[PathPart, ...], *, insecure_ok: bool, private_ok: bool = False
    ) -> str:
        parts = urlsplit(raw)
        if parts.scheme not in {"https", "http"} or not parts.hostname:
            self.doc.problem(path, "must be an absolute http(s) URL")
            return raw
        if parts.fragment or "#" in raw:
            self.doc.problem(path, "must not contain a fragment")
        if "@" in parts.netloc:
            # Credentials in a URL are a literal secret (use {env:}/{file:} references), and
            # aiohttp would send them as an Authorization header of its own.
            self.doc.problem(path, "must not contain userinfo (user:password@)")
        if parts.scheme == "http":
            allowed = is_loopback_url(raw) or (private_ok and is_private_url(raw))
            if not (insecure_ok and allowed):
                self.doc.problem(
                    path,
                    "must use https (plain http only for loopback"
                    + (" or private" if private_ok else "")
                    + " addresses with allow_insecure_http: true)",
                )
        return raw
