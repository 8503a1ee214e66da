"""The rendered ``WWW-Authenticate`` values of the 401 rows, once per policy baseline.

The 401 challenges depend only on the row (its class-level message) and the policy's baseline
scopes, so each is rendered once per baseline, not per refused request
(:func:`.challenge.challenge_for` renders the others each time).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from gateway.config import Config
from gateway.errors import (
    DpopRequired,
    DpopTokenAsBearer,
    GatewayError,
    InvalidDpopProof,
    InvalidToken,
    NoCredentials,
    UseDpopNonce,
)

from .challenge import challenge_for, dpop_challenges

__all__ = ["ChallengeCache"]

_MAX_CHALLENGES: Final = 32
"""Rendered 401 challenges kept (up to six rows per policy baseline; cleared when full)."""
_CACHED: Final = frozenset(
    {NoCredentials, InvalidToken, InvalidDpopProof, UseDpopNonce, DpopTokenAsBearer, DpopRequired}
)


class ChallengeCache:
    def __init__(
        self,
        config: Config,
        baseline: Callable[[], tuple[str, ...]],
        *,
        dpop_algs: tuple[str, ...] = (),
        bearer: bool = True,
    ) -> None:
        """``dpop_algs``: the proof algorithms when an issuer accepts DPoP-bound tokens (each
        challenge then has a ``DPoP`` one too, RFC 9449 §7.1); ``bearer``: whether any issuer
        accepts bearer tokens (else the ``DPoP`` challenge stands alone)."""
        self._config = config
        self._baseline = baseline
        self._dpop_algs = dpop_algs
        self._bearer = bearer
        self._challenges: dict[tuple[type[GatewayError], tuple[str, ...]], str | None] = {}

    def challenge(self, error: GatewayError) -> str | None:
        """The ``WWW-Authenticate`` value for ``error`` (see :func:`.challenge.challenge_for`
        and :func:`.challenge.dpop_challenges`).

        A 401 row names ``error.scopes`` when the pipeline set them (the baseline spelled for a
        caller whose issuer it knows), else the baseline of ``baseline()``."""
        kind = type(error)
        if kind not in _CACHED:
            return self._render(error, self._baseline())
        baseline = error.scopes or self._baseline()
        key = (kind, baseline)
        rendered = self._challenges.get(key)
        if rendered is None:
            if len(self._challenges) >= _MAX_CHALLENGES:  # baselines of old policies
                self._challenges.clear()
            rendered = self._challenges[key] = self._render(error, baseline)
        return rendered

    def _render(self, error: GatewayError, baseline: tuple[str, ...]) -> str | None:
        prm = self._config.prm_url
        if not self._dpop_algs:
            return challenge_for(error, resource_metadata=prm, baseline=baseline)
        return dpop_challenges(
            error,
            resource_metadata=prm,
            baseline=baseline,
            algs=self._dpop_algs,
            bearer=self._bearer,
        )
