"""RFC 8252 §8.3 spirit: development servers bind to loopback unless explicitly forced.

DEVELOPMENT ONLY. Shared by the development issuer and the demo backend.
"""

from __future__ import annotations

import ipaddress

from aiohttp import web

__all__ = ["bind_site", "check_bind_host", "is_loopback_host"]


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
    """Start ``app`` on ``host:port`` (0 = ephemeral) and return the runner and base URL."""
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
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
