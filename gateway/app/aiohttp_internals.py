"""Every aiohttp internal the listeners build on, checked before any of them is imported.

:mod:`gateway.app.listener`, :mod:`gateway.app.server` and :mod:`gateway.app.fast_path` reach
into aiohttp's server (the request handler's queue and flags, the runner's server factory, the
request's and response's private state, the header serialiser): they were written against
aiohttp's 3.14 line, which ``pyproject.toml`` pins (``aiohttp>=3.14,<3.15``). aiohttp does not
keep those names stable between minor releases, so :func:`check` runs when ``gateway.app`` is
imported and refuses to go on, naming every missing name, rather than let a listener fail on
the first request (an ``AttributeError`` inside aiohttp's request loop answers nothing useful).

:data:`INTERNALS` is the one list: a test (tests/unit/test_aiohttp_internals.py) parses the three
modules and fails when they use a private aiohttp name that is not in it, so a new use of an
internal is a deliberate, guarded decision. Names without a leading underscore are here too
when they live in modules aiohttp does not document (``helpers``, ``http_writer``, ...).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from typing import Final

import aiohttp

__all__ = ["AIOHTTP_LINE", "AIOHTTP_PIN", "INTERNALS", "check", "missing"]

AIOHTTP_LINE: Final = "3.14"
"""The minor line the listeners were written against."""
AIOHTTP_PIN: Final = "aiohttp>=3.14,<3.15"
"""The requirement in pyproject.toml (a test keeps the two in step)."""

INTERNALS: Final[tuple[tuple[str, frozenset[str]], ...]] = (
    # listener.py: the connection's request queue, its flags and its hooks.
    (
        "aiohttp.web_protocol.RequestHandler",
        frozenset(
            {
                "_messages",
                "_request_count",
                "_waiter",
                "_request_in_progress",
                "_upgraded",
                "_force_close",
                "_close",
                "_loop",
                "finish_response",
                "handle_error",
                "log_access",
                "log_exception",
            }
        ),
    ),
    ("aiohttp.web_protocol", frozenset({"_ErrInfo", "ERROR"})),
    ("aiohttp.web_protocol._ErrInfo", frozenset({"status", "exc", "message"})),
    ("aiohttp.streams", frozenset({"EMPTY_PAYLOAD"})),
    ("aiohttp.streams.StreamReader", frozenset({"is_eof"})),
    # server.py: the low-level server's factory and the runner's server hook.
    ("aiohttp.web_server.Server", frozenset({"_loop", "_kwargs", "pre_shutdown", "connections"})),
    ("aiohttp.web_runner.AppRunner", frozenset({"_app", "_kwargs", "_make_server"})),
    # server.py at a stop: the site's listening sockets, a request's keep-alive cleared.
    ("aiohttp.web_runner.BaseSite", frozenset({"_server"})),
    ("aiohttp.http_parser.RawRequestMessage", frozenset({"_replace"})),
    # fast_path.py: routing past the router, and the one-write answer.
    ("aiohttp.web_request.Request", frozenset({"_match_info", "_prepare_hook"})),
    ("aiohttp.web_request.BaseRequest", frozenset({"_finish", "_payload_writer"})),
    (
        "aiohttp.web_response.Response",
        frozenset(
            {
                "_body",
                "_headers",
                "_compression",
                "_chunked",
                "_cookies",
                "_keep_alive",
                "_eof_sent",
                "_body_length",
            }
        ),
    ),
    ("aiohttp.web_urldispatcher.UrlMappingMatchInfo", frozenset({"add_app", "freeze"})),
    ("aiohttp.web_urldispatcher.PlainResource", frozenset({"canonical"})),
    ("aiohttp.http_writer", frozenset({"_serialize_headers"})),
    ("aiohttp.helpers", frozenset({"rfc822_formatted_time"})),
    ("aiohttp.http", frozenset({"SERVER_SOFTWARE"})),
)
"""(owner, names): a module or a class in one (dotted path), and what the listeners use of it."""

_ABSENT: Final = object()


def _resolve(path: str) -> object:
    """The module or class at ``path``, or ``_ABSENT``."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            found = getattr(found, attribute, _ABSENT)
            if found is _ABSENT:
                return _ABSENT
        return found
    return _ABSENT


def _constructed(owner: type, name: str) -> bool:
    # An instance attribute: declared in aiohttp's ATTRS (requests) or set by a constructor.
    if name in getattr(owner, "ATTRS", ()):
        return True
    for cls in owner.__mro__:
        init = cls.__dict__.get("__init__")
        code = getattr(init, "__code__", None)
        if code is not None and name in code.co_names:
            return True
    return False


def _present(owner: object, name: str) -> bool:
    if hasattr(owner, name):  # module names, methods, class attributes, slots
        return True
    if isinstance(owner, type):
        annotations = getattr(owner, "__annotations__", {})
        return name in annotations or _constructed(owner, name)
    return False


def missing(internals: Iterable[tuple[str, frozenset[str]]] = INTERNALS) -> list[str]:
    """``owner.name`` for every listed internal the installed aiohttp lacks, sorted."""
    gone: list[str] = []
    for path, names in internals:
        owner = _resolve(path)
        gone.extend(
            f"{path}.{name}" for name in names if owner is _ABSENT or not _present(owner, name)
        )
    return sorted(gone)


def check(internals: Iterable[tuple[str, frozenset[str]]] = INTERNALS) -> None:
    """Raise :class:`RuntimeError` naming every missing internal (nothing missing: no-op)."""
    gone = missing(internals)
    if gone:
        raise RuntimeError(
            f"gateway.app needs aiohttp {AIOHTTP_LINE}.x internals that aiohttp "
            f"{aiohttp.__version__} lacks: {', '.join(gone)}; install the pinned version "
            f"(pip install '{AIOHTTP_PIN}')"
        )


check()
