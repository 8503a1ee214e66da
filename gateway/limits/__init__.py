"""Rate limiting and concurrency caps.

Foundation-level layer: imports only :mod:`gateway.seams` and :mod:`gateway.errors`, so auth/,
policy/ users and the HTTP pipeline can all use it. ``memory.py`` serves one replica; a Redis
implementation of :class:`gateway.seams.RateLimiter` shares counters across replicas.
"""
