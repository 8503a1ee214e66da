"""State shared by every replica: the Redis connection, revocations, the shared token cache.

Foundation-level layer (``tests/test_layers.py``): imports the foundation except
:mod:`gateway.limits`, whose Redis limiters build on this layer's store (so the two never import
each other; :mod:`gateway.wiring` puts them together). The modules, by job:

* :mod:`~gateway.state.store`: :class:`~gateway.state.store.RedisStore`, the one Redis client
  (deadline on every call, back-off after a failure, reconnects by itself, pub/sub listener);
* :mod:`~gateway.state.revocation`: the revocation list (local, or shared through Redis), by
  the key :mod:`~gateway.state.revocation_key` gives a token (what the issuer signed);
* :mod:`~gateway.state.token_cache`: introspection results shared between replicas.

The rate limiters that use Redis live in :mod:`gateway.limits.redis`.
"""
