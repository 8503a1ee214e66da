"""The only place the gateway makes outbound HTTP requests.

Every call has a deadline, never follows redirects, reads the response body with a size cap
(raising :class:`ResponseTooLarge` as soon as the cap is passed, not after buffering), and uses a
connection pool per destination kind, created at startup and closed at shutdown: a pooled
:class:`aiohttp.ClientSession`, or for a ``lean`` destination (the backends: the hot path) the
HTTP/1.1 client of :mod:`gateway.outbound.http1`, which costs a quarter of aiohttp's CPU per
request. Ruff's ``TID251`` bans ``aiohttp.ClientSession`` everywhere else.

The client and its destinations: :mod:`.client`; responses: :mod:`.responses`; failures:
:mod:`.failures` (each also the matching stdlib type where it fits: ``except TimeoutError``
works). The lean client: :mod:`.http1` and :mod:`.http1_codec`; OAuth client authentication:
:mod:`.client_auth`. Nothing is re-exported here (one import path per thing).
"""
