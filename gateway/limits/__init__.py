"""Rate limiting and concurrency caps.

Foundation-level layer (``tests/test_layers.py``), so auth/ and the HTTP pipeline can both use
it. ``memory.py`` serves one replica; ``redis.py`` shares counters and leases across replicas
through :mod:`gateway.state.store` (this layer imports state/, never the other way round);
``fallback.py`` applies ``state.on_store_error``. :mod:`gateway.wiring` picks and wraps them.
"""
