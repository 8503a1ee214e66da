"""RFC 8252 §8.3 spirit: development servers bind to loopback unless explicitly forced.

DEVELOPMENT ONLY. Shared by the development issuer and the demo backends: the bind check,
and :class:`LoopbackServer`, their one lifecycle (``await start()`` or ``async with``, then
``await stop()``).
"""

from __future__ import annotations

import ipaddress
from dataclasses import KW_ONLY, dataclass
from typing import ClassVar, Final, Self

from aiohttp import web

__all__ = [
    "STOP_GRACE_S",
    "LoopbackServer",
    "McpOnLoopback",
    "bind_site",
    "check_bind_host",
    "is_loopback_host",
]

STOP_GRACE_S: Final = 1.0
"""At stop, how long a request still being handled gets to finish before it is cancelled.
aiohttp's default is 60 s, and its handler of a stream (an MCP ``subscriptions/listen`` or GET
stream) never finishes on its own: a stop with a client still connected would wait all of it."""


def is_loopback_host(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind_host(host: str, allow_non_loopback: bool) -> None:
    """Refuse a non-loopback bind address unless the caller forced it."""
    if not allow_non_loopback and not is_loopback_host(host):
        raise ValueError(
            f"development servers bind to loopback only; {host!r} needs allow_non_loopback=True"
        )


async def bind_site(app: web.Application, host: str, port: int) -> tuple[web.AppRunner, str]:
    """Start ``app`` on ``host:port`` (0 = ephemeral) and return the runner and base URL.

    A handler whose client went away is cancelled (aiohttp's default lets it run on, and the
    runner's cleanup then waits the whole shutdown timeout for it: a stream whose client, a
    gateway, exited held every stop of a development upstream for 60 s); at cleanup, the
    requests still running get :data:`STOP_GRACE_S`."""
    runner = web.AppRunner(
        app,
        access_log=None,
        handle_signals=False,
        handler_cancellation=True,
        shutdown_timeout=STOP_GRACE_S,
    )
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    try:
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    bound_port = int(runner.addresses[0][1])
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return runner, f"http://{shown}:{bound_port}"


class LoopbackServer:
    """A development server's lifecycle: :meth:`start` binds :meth:`_app` on ``host:port``
    (0 = ephemeral), :meth:`stop` closes it; ``async with`` does both."""

    host: str
    port: int
    _runner: web.AppRunner | None = None
    _base_url: str | None = None

    @property
    def base_url(self) -> str:
        """``http://host:port`` as bound (raises before :meth:`start`)."""
        if self._base_url is None:
            raise RuntimeError(f"{type(self).__name__} is not started")
        return self._base_url

    def _app(self) -> web.Application:
        raise NotImplementedError

    async def start(self) -> None:
        self._runner, self._base_url = await bind_site(self._app(), self.host, self.port)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


@dataclass
class McpOnLoopback(LoopbackServer):
    """A development MCP server: every method of one endpoint at :attr:`path`, bound to
    loopback unless ``allow_non_loopback``."""

    host: str = "127.0.0.1"
    port: int = 0
    _: KW_ONLY
    path: str = "/mcp"
    allow_non_loopback: bool = False
    max_body: ClassVar[int]

    def __post_init__(self) -> None:
        check_bind_host(self.host, self.allow_non_loopback)

    @property
    def url(self) -> str:
        """The MCP endpoint URL (base URL + :attr:`path`)."""
        return self.base_url + self.path

    def _app(self) -> web.Application:
        app = web.Application(client_max_size=self.max_body)
        app.router.add_route("*", self.path, self._handle)
        return app

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raise NotImplementedError
