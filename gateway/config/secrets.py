"""Secrets by reference: ``{env: NAME}`` / ``{file: PATH}`` resolved at load into :class:`Secret`.

A :class:`Secret`'s ``repr`` never shows the value. A literal string in the file is accepted with a
warning (the configuration file is then itself a secret), never silently.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any, ClassVar, Final

from gateway.config.declare import Key
from gateway.yaml_source import Located, PathPart

__all__ = ["SECRET", "SKIPPED", "Secret", "SecretRef", "resolve_secret"]

SKIPPED = "skipped"
"""The :attr:`Secret.source` of a reference that was not read (``resolve_secrets=False``)."""


class Secret:
    """A resolved secret. ``reveal()`` gives the value; ``repr``/``str`` never do.

    File secrets remember their path so rotating consumers (backend bearer tokens) can call
    :meth:`current` to re-read the file when it changed.
    """

    __slots__ = ("_checked", "_mtime", "_path", "_value", "source")

    RECHECK_S: ClassVar[float] = 1.0
    """A file secret is stat()ed at most this often (it is read on the hot path)."""

    def __init__(self, value: str, source: str, mtime: float | None = None) -> None:
        self._value = value
        self.source = source
        """``env:NAME``, ``file:PATH``, ``literal`` or :data:`SKIPPED`."""
        self._mtime = mtime
        self._path = Path(source[5:]) if source.startswith("file:") else None
        self._checked = time.monotonic()

    def reveal(self) -> str:
        return self._value

    @property
    def skipped(self) -> bool:
        """A reference ``check --skip-secrets`` did not read: its value is empty, so no check
        of the value applies (the schema checked the reference's form)."""
        return self.source == SKIPPED

    def current(self, *, force: bool = False) -> str:
        """The value, re-read from its file when the file changed (checked once a second, or
        now with ``force``, e.g. after the upstream refused the old value)."""
        path = self._path
        if path is not None and (force or time.monotonic() - self._checked >= self.RECHECK_S):
            self._checked = time.monotonic()
            try:
                mtime = path.stat().st_mtime
                if mtime != self._mtime:
                    self._value = path.read_text(encoding="utf-8").strip()
                    self._mtime = mtime
            except OSError:
                pass  # keep serving the last good value; rotation tooling may be mid-write
        return self._value

    def __repr__(self) -> str:
        return f"Secret({self.source}, ***)"

    __str__ = __repr__


def resolve_secret(
    raw: Any,
    where: tuple[PathPart, ...],
    doc: Located,
    *,
    environ: Mapping[str, str],
    resolve_path: Callable[[str], Path],
    warnings: list[str],
) -> Secret | None:
    """Resolve one schema-valid secret value found at ``where`` in ``doc``.

    ``None`` when absent; a missing variable or an unreadable or empty file is recorded as a
    problem on ``doc`` (and gives ``None``); a literal string adds to ``warnings``.
    """
    if raw is None:
        return None
    if isinstance(raw, str):
        warnings.append(
            f"{doc.where(where)}: {'.'.join(map(str, where))}: literal secret in the "
            "configuration file; use {env: NAME} or {file: PATH}"
        )
        return Secret(raw, "literal")
    if "env" in raw:
        name = raw["env"]
        if name not in environ:
            doc.problem(where, f"environment variable {name} is not set")
            return None
        return Secret(environ[name], f"env:{name}")
    file_path = resolve_path(raw["file"])
    try:
        value = file_path.read_text(encoding="utf-8").strip()
        mtime = file_path.stat().st_mtime
    except (OSError, UnicodeDecodeError):
        doc.problem(where, f"cannot read secret file {file_path}")
        return None
    if not value:
        doc.problem(where, f"secret file {file_path} is empty")
        return None
    return Secret(value, f"file:{file_path}", mtime)


SECRET: Final = Key(
    ref="secret",
    schema={
        "description": "A secret reference: {env: NAME} or {file: PATH}. A plain string "
        "works but is a warning.",
        "x-message": "must be a secret reference: {env: NAME} or {file: PATH} (a plain "
        "string also works, with a warning)",
        "x-sensitive": True,
        "oneOf": [
            {
                "type": "object",
                "additionalProperties": False,
                "required": ["env"],
                "properties": {"env": {"type": "string", "minLength": 1}},
            },
            {
                "type": "object",
                "additionalProperties": False,
                "required": ["file"],
                "properties": {"file": {"type": "string", "minLength": 1}},
            },
            {"type": "string", "minLength": 1},
        ],
    },
)
"""The declaration of a secret reference (``x-sensitive``: ``check`` never echoes it)."""
SecretRef = Annotated[Secret, SECRET]
"""A key whose value is a secret reference, resolved at load."""
