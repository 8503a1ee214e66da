"""Streams the gateway keeps open at an upstream: its own, for list changes
(change_listener.py), and a caller's ``subscriptions/listen`` at one backend
(caller_listen.py). Imports backend/upstream/.
"""
