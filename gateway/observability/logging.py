"""structlog configuration: JSON lines on stdout (default) or console output for humans.

Configured once, at startup, by :func:`configure`. Request-scoped fields (request_id, trace_id)
are bound with ``structlog.contextvars`` by the pipeline, so every line of a request carries them.
"""

from __future__ import annotations

import logging
import sys
from typing import Literal

import structlog

__all__ = ["configure", "get_logger"]

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
           "error": logging.ERROR}  # fmt: skip


def configure(
    fmt: Literal["json", "console"] = "json",
    level: Literal["debug", "info", "warning", "error"] = "info",
) -> None:
    """Set up structlog (and route stdlib logging, e.g. aiohttp's, through the same renderer)."""
    shared: list[structlog.types.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=sys.stdout.isatty())
    )
    structlog.configure(
        processors=[*shared, structlog.processors.format_exc_info, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS[level]),
        logger_factory=structlog.PrintLoggerFactory(sys.stdout),
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
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


def get_logger(name: str) -> structlog.typing.FilteringBoundLogger:
    return structlog.get_logger(name)  # type: ignore[no-any-return]
