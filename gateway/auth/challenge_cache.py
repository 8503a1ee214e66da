"""The rendered ``WWW-Authenticate`` values of the 401 rows, once per policy baseline.

The 401 challenges depend only on the row (its class-level message) and the policy's baseline
scopes, so each is rendered once per baseline, not per refused request
(:func:`.challenge.challenge_for` renders the others each time).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from gateway.config import Config
from gateway.errors import GatewayError, InvalidToken, NoCredentials

from .challenge import challenge_for

__all__ = ["ChallengeCache"]

_MAX_CHALLENGES: Final = 16
"""Rendered 401 challenges kept (two rows per policy baseline; cleared when full)."""


class ChallengeCache:
    def __init__(self, config: Config, baseline: Callable[[], tuple[str, ...]]) -> None:
        self._config = config
        self._baseline = baseline
        self._challenges: dict[tuple[type[GatewayError], tuple[str, ...]], str | None] = {}

    def challenge(self, error: GatewayError) -> str | None:
        """The ``WWW-Authenticate`` value for ``error`` (see :func:`.challenge.challenge_for`).

        A 401 row names ``error.scopes`` when the pipeline set them (the baseline spelled for a
        caller whose issuer it knows), else the baseline of ``baseline()``."""
        kind = type(error)
        if kind is not InvalidToken and kind is not NoCredentials:
            return challenge_for(
                error, resource_metadata=self._config.prm_url, baseline=self._baseline()
            )
        baseline = error.scopes or self._baseline()
        key = (kind, baseline)
        rendered = self._challenges.get(key)
        if rendered is None:
            if len(self._challenges) >= _MAX_CHALLENGES:  # baselines of old policies
                self._challenges.clear()
            rendered = challenge_for(
                error, resource_metadata=self._config.prm_url, baseline=baseline
            )
            self._challenges[key] = rendered
        return rendered
