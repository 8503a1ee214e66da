"""Ports for servers a test starts as processes on a port fixed in advance (and restarts).

The choice is the demo's (:func:`gateway.demo.ports.free_port`): below the ephemeral range,
which every outgoing connection on the machine draws from too, so a busy machine cannot take
the port before the server binds it (EADDRINUSE), and never the same port twice per process.
"""

from __future__ import annotations

from gateway.demo.ports import free_port

__all__ = ["free_port"]
