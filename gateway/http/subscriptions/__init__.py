"""Subscriptions at the front door, both eras: ``subscriptions/listen`` (listen_route.py) and
its stream (listen_stream.py), what of a subscription a caller may have
(subscription_plan.py), the replica's open streams, their bounds, reloads and drain
(subscription_hub.py), and the legacy session that holds ``resources/subscribe``
(legacy_sessions.py) with its GET stream (legacy_stream.py).

Stands on the modules of ``gateway/http/`` itself (the turn, progress, the condition gate,
admission); imports neither ``methods/`` nor ``pipeline/``.
"""
