"""structlog configuration: JSON lines on stdout (default) or console output for humans.

Configured once, at startup, by :func:`configure`. Request-scoped fields (request_id, trace_id)
are bound with ``structlog.contextvars`` by the observer (``GatewayObserver.request_started``),
so every line of a request carries them.

Every line, the gateway's own and stdlib ones (aiohttp), passes :func:`redact_secrets` right
before rendering: a safety net behind the rule that no code logs a token (architecture
invariant 4). It masks the values of secret-named keys and any ``Bearer <credential>`` text.
"""

from __future__ import annotations

import logging
import re
import time
import warnings
from collections.abc import Mapping
from typing import Any, Final, Literal, TextIO

import structlog
from structlog.typing import EventDict, WrappedLogger

from gateway.observability.lines import compact_text, json_line, line_of, stdout_writer

__all__ = [
    "REDACTED",
    "configure",
    "emit_info",
    "get_logger",
    "is_secret_key",
    "redact_secrets",
]

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}

REDACTED: Final = "[REDACTED]"
"""What a masked value is replaced with."""

_SECRET_KEYS: Final = frozenset(
    {
        "authorization",
        "proxy_authorization",
        "token",
        "cookie",
        "set_cookie",
        "password",
        "passwd",
        "secret",
        "api_key",
        "apikey",
        "x_api_key",
        "private_key",
        "client_assertion",
        "assertion",
        "credential",
        "credentials",
        "session",
        "mcp_session_id",
    }
)
"""Normalized key names (lowercase, ``-`` as ``_``) whose values are always masked."""

_SECRET_SUFFIXES: Final = (
    "_token",
    "_secret",
    "_password",
    "_authorization",
    "_cookie",
    "_api_key",
    "_private_key",
    "_assertion",
)
"""Suffixes that make a key secret too: ``access_token``, ``refresh_token``, ``id_token``,
``client_secret``, ``upstream_authorization``, ... (``token_fp`` is a fingerprint and stays)."""

# RFC 6750 §2.1: credentials = "Bearer" 1*SP b64token. The scheme is case-insensitive
# (RFC 9110 §11.1); the whole credential up to the next separator is masked. What cannot start a
# b64token ("(", "[", ...) is no credential: "not Bearer (refresh or ID token)" stays as written.
# The English words the gateway's own messages put after "bearer" ("not a bearer access token")
# are prose, not credentials: a whole word from _PROSE (followed by a separator or the end) is
# left alone, so "Bearer token-abc" or "Bearer access.x" are still masked.
_PROSE: Final = "access|token|tokens|credential|credentials|scheme|challenge|authentication"
_BEARER: Final = re.compile(
    rf"(?i)\bbearer[ \t]+(?!(?:{_PROSE})(?:[\s\"',;]|$))(?=[A-Za-z0-9\-._~+/])[^\s\"',;]+"
)
_BEARER_MASK: Final = "Bearer " + REDACTED

_MAX_DEPTH: Final = 4
_verdicts: dict[str, bool] = {}
"""Memo of :func:`is_secret_key` (keys are code-defined; bounded at 4096 entries)."""


def is_secret_key(key: str) -> bool:
    """Whether values logged under ``key`` must be masked (case and ``-``/``_`` insensitive)."""
    verdict = _verdicts.get(key)
    if verdict is None:
        norm = key.lower().replace("-", "_")
        verdict = norm in _SECRET_KEYS or norm.endswith(_SECRET_SUFFIXES)
        if len(_verdicts) < 4096:
            _verdicts[key] = verdict
    return verdict


def _mask_text(value: str) -> str:
    # Cheap precheck first: nearly every value on the hot path has no "earer" in it.
    if "earer" in value or "EARER" in value:
        return _BEARER.sub(_BEARER_MASK, value)
    return value


def _clean(value: Any, depth: int) -> Any:
    if isinstance(value, str):
        return _mask_text(value)
    if depth >= _MAX_DEPTH:
        return value
    if isinstance(value, Mapping):
        return {
            k: (
                REDACTED
                if isinstance(k, str) and is_secret_key(k) and v is not None
                else _clean(v, depth + 1)
            )
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [_clean(item, depth + 1) for item in value]
    return value


def redact_secrets(logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
    """structlog processor: mask secret-named keys and ``Bearer`` credentials, recursively.

    Defense in depth only: the gateway never passes a token to a logger on purpose. Nested
    mappings and sequences are cleaned to depth 4; the memo keeps the per-key cost to one dict
    lookup on the hot path.
    """
    verdicts = _verdicts
    for key, value in event_dict.items():
        if value is None:
            continue
        # Inlined memo lookup: this loop runs over every field of every line (hot path).
        secret = verdicts.get(key)
        if secret is None:
            secret = is_secret_key(key)
        if secret:
            event_dict[key] = REDACTED
            continue
        kind = value.__class__
        if kind is str:
            if "earer" in value or "EARER" in value:
                event_dict[key] = _BEARER.sub(_BEARER_MASK, value)
        elif kind is int or kind is float or kind is bool:
            continue
        elif isinstance(value, str):
            if "earer" in value or "EARER" in value:
                event_dict[key] = _BEARER.sub(_BEARER_MASK, value)
        elif isinstance(value, Mapping | list | tuple):
            event_dict[key] = _clean(value, 1)
    return event_dict


def configure(
    fmt: Literal["json", "console"] = "json",
    level: Literal["debug", "info", "warning", "error"] = "info",
    *,
    stream: TextIO | None = None,
    static: Mapping[str, Any] | None = None,
) -> None:
    """Set up structlog (and route stdlib logging, e.g. aiohttp's, through the same renderer).

    ``stream`` defaults to standard output (twelve-factor: the platform ships stdout), looked
    up at each write, through the process's batching :class:`~.lines.LineWriter`. ``static``
    fields go on every line (a worker of ``serve --workers N`` names itself: ``worker``).
    """
    out: TextIO = stdout_writer() if stream is None else stream  # type: ignore[assignment]
    shared: list[structlog.types.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    if static:
        shared.insert(0, _static_fields(dict(static)))
    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=out.isatty())
    )
    processors: list[structlog.types.Processor] = [
        *shared,
        structlog.processors.format_exc_info,
        redact_secrets,
        renderer,
    ]
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS[level]),
        # One write per line (the text and its newline together): print() writes them apart,
        # and under PYTHONUNBUFFERED (the image sets it) each is its own system call, so the
        # workers of `serve --workers N` sharing one stdout could interleave their lines.
        logger_factory=structlog.WriteLoggerFactory(out),
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(out)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                redact_secrets,
                renderer,
            ],
            foreign_pre_chain=shared,
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(max(_LEVELS[level], logging.INFO))
    # aiohttp's own access log duplicates ours and would print request lines at INFO.
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    # Python warnings (joserfc's SecurityWarning for a weak key, a DeprecationWarning) would go
    # raw to stderr, outside the log; the filters (once per location by default) still apply.
    warnings.showwarning = _log_warning
    _direct[:] = (
        [_Direct(processors, renderer, out, dict(static or {}))]
        if fmt == "json" and _LEVELS[level] <= logging.INFO
        else []
    )


class _Direct:
    """What :func:`configure` set up, for lines rendered without structlog's processor chain."""

    __slots__ = ("out", "processors", "renderer", "static")

    def __init__(
        self, processors: list[Any], renderer: Any, out: TextIO, static: dict[str, Any]
    ) -> None:
        self.processors = processors
        self.renderer = renderer
        self.out = out
        self.static = static


_direct: list[_Direct] = []
"""The direct-rendering state of the last :func:`configure` (empty: not JSON, or above INFO)."""


class _Stamp:
    """``TimeStamper(fmt="iso", utc=True)``'s format; the seconds part is formatted once a
    second."""

    __slots__ = ("prefix", "second")

    def __init__(self) -> None:
        self.second = -1
        self.prefix = ""

    def __call__(self, now: float) -> str:
        second = int(now)
        if second != self.second:
            self.prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
            self.second = second
        return f"{self.prefix}.{int((now - second) * 1_000_000):06d}Z"


_timestamp = _Stamp()


def emit_info(
    logger: structlog.typing.FilteringBoundLogger,
    event: str,
    fields: dict[str, Any],
    *,
    context: bool = False,
) -> None:
    """Log ``event`` at INFO with ``fields`` (consumed): a hot-path line, such as the access line.

    With the JSON configuration of :func:`configure` in force the line is rendered here, not
    through structlog's generic chain: the same fields and redaction (:func:`redact_secrets`),
    the static fields, ``event``, ``level`` and ``timestamp`` (``context``: and the bound
    request_id/trace_id, like any structlog line), compact JSON (:func:`~.lines.json_line`: line
    breaks and controls escaped), one write to the configured stream. Otherwise (console format,
    a level above INFO, structlog reconfigured, e.g. by ``structlog.testing.capture_logs``) it
    goes through ``logger`` like any line.
    """
    direct = _direct[0] if _direct else None
    if (
        direct is None
        or structlog.get_config()["processors"] is not direct.processors
        or direct.processors[-1] is not direct.renderer
    ):
        logger.info(event, **fields)
        return
    if context:
        structlog.contextvars.merge_contextvars(None, "info", fields)
    fields["event"] = event
    fields["level"] = "info"
    fields["timestamp"] = _timestamp(time.time())
    for key, value in direct.static.items():
        fields.setdefault(key, value)
    direct.out.write(_redacted_line(fields) + "\n")


_PLAIN_KEYS: Final = 256
_plain_keys: dict[tuple[str, ...], bool] = {}
"""Whether none of these (top-level) keys is secret, by the keys of a line (code-defined sets:
bounded at :data:`_PLAIN_KEYS` entries)."""


def _redacted_line(fields: dict[str, Any]) -> str:
    """``json_line(redact_secrets(fields))``, without the walk over every field when the
    rendered line shows that the walk would change nothing: no key of the line is secret
    (:data:`_plain_keys`), no value is a container (the line has one ``{`` and no ``[``: a
    nested mapping or sequence always writes one, and only their keys could be secret), and
    no string holds ``earer`` or ``EARER`` (orjson escapes no letter, so a string that holds
    one writes it as is). Anything else, or a value orjson does not take, is redacted first."""
    keys = tuple(fields)
    plain = _plain_keys.get(keys)
    if plain is None:
        plain = not any(is_secret_key(key) for key in keys)
        if len(_plain_keys) < _PLAIN_KEYS:
            _plain_keys[keys] = plain
    if plain:
        line = compact_text(fields)
        if (
            line is not None
            and "earer" not in line
            and "EARER" not in line
            and "[" not in line
            and line.count("{") == 1
        ):
            return line_of(line)
    redact_secrets(None, "info", fields)
    return json_line(fields)


def _log_warning(  # noqa: PLR0917 - the signature of warnings.showwarning
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    """``warnings.showwarning`` while logging is configured: one ``python.warning`` line."""
    get_logger("py.warnings").warning(
        "python.warning",
        category=category.__name__,
        detail=str(message),
        source=f"{filename}:{lineno}",
    )


def _static_fields(fields: dict[str, Any]) -> structlog.types.Processor:
    def add(logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
        for key, value in fields.items():
            event_dict.setdefault(key, value)
        return event_dict

    return add


def get_logger(name: str) -> structlog.typing.FilteringBoundLogger:
    """A lazy logger: safe at module level, it picks up :func:`configure` on first use."""
    return structlog.get_logger(name)  # type: ignore[no-any-return]
