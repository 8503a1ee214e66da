"""The external decision point (``policy_external:``): an OpenID AuthZEN 1.0 Access Evaluation
client (:mod:`gateway.pdp.authzen`), consulted by the routes through the
:class:`~gateway.seams.DecisionPoint` seam after the local policy allowed. Built by
:mod:`gateway.wiring` only when configured; its one HTTP client is :mod:`gateway.outbound`."""
