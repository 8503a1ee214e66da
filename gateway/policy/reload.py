"""Hot reload of the policy set: validate in full, then swap one reference (never half a policy).

Triggers are SIGHUP (``gateway/wiring/production.py`` calls :meth:`PolicyReloader.reload`) and cheap
polling (:meth:`PolicyReloader.run`, the one file watcher of :mod:`gateway.filewatch`), which
compares a stat signature of every policy file (mtime, size, inode) and of every configured
directory's listing, and reloads only when it changed (parsing in a worker thread, the swap on the
loop).

A reload parses and validates the whole set first; only a valid set replaces the current one, by
assigning one attribute (atomic under the GIL). A request that already took the old
:class:`PolicySet` from :meth:`PolicyReloader.current` finishes under it. An invalid set keeps the
old policy and reports every problem (``file:line:col: key.path: message``) to ``on_reload``;
the caller logs them and counts the failure. This module does no logging or metrics itself.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Final, Literal

from gateway.errors import ConfigError
from gateway.filewatch import FileWatch, Signature, stat_signature
from gateway.policy.conditions import TOKEN_CONTEXTS, TokenContexts
from gateway.policy.policy_loader import SUFFIXES, load_policy
from gateway.policy.policy_set import PolicySet

__all__ = ["Outcome", "PolicyReloader", "ReloadCallback", "Signature"]

Outcome = Literal["success", "failure", "unchanged"]
ReloadCallback = Callable[[str, PolicySet | None, list[str]], None]
"""``on_reload(outcome, policy, problems)``: ``policy`` is the new set on success, the running set
when unchanged, None on failure (when ``problems`` lists what is wrong)."""

_Loaded = tuple[Outcome, PolicySet | None, list[str]]

_INTERNAL: Final = "policy: internal error while loading the policy set ({name}); kept the old one"


class PolicyReloader:
    """Implements :class:`gateway.seams.PolicySource` over files that may change while serving.

    The constructor loads the set once and raises :class:`ConfigError` when it is invalid (the
    gateway must not start on a half-valid policy); it does not call ``on_reload``.
    ``on_reload`` is called where the swap happens: on the event loop (:meth:`run`) or in the
    caller of :meth:`reload`.
    """

    def __init__(
        self,
        paths: Sequence[Path],
        *,
        issuers: Sequence[str] = (),
        on_reload: ReloadCallback | None = None,
        token_contexts: TokenContexts | None = None,
        guardrails: Collection[str] | None = None,
    ) -> None:
        self.paths = tuple(Path(p) for p in paths)
        self.issuers = tuple(issuers)
        """The configured issuers' urls (:func:`~gateway.policy.policy_loader.load_policy`)."""
        self.guardrails = None if guardrails is None else frozenset(guardrails)
        """The configured guardrail names (a rule naming another cannot be loaded)."""
        self.token_contexts = token_contexts or TokenContexts(TOKEN_CONTEXTS)
        """The principals' CEL contexts, handed to every set loaded: a reload keeps them."""
        self._on_reload = on_reload
        self._lock = threading.Lock()
        """Serialises loads (SIGHUP on the loop thread, polling in a worker thread)."""
        self._watch = FileWatch(self.signature, self._load, self._install)
        self._policy = self._read()

    def _read(self) -> PolicySet:
        return load_policy(
            self.paths,
            issuers=self.issuers,
            token_contexts=self.token_contexts,
            guardrails=self.guardrails,
        )

    def current(self) -> PolicySet:
        """The active set; a plain attribute read, so a concurrent swap is never seen half-done."""
        return self._policy

    def reload(self) -> bool:
        """Load and validate the files now; True when a new policy version was swapped in.

        Outcomes (reported to ``on_reload``): ``success`` (new version active), ``unchanged``
        (valid, same content hash; nothing swapped), ``failure`` (old policy kept).
        """
        return self._install(self._watch.load())

    def _load(self) -> _Loaded:
        with self._lock:
            try:
                policy = self._read()
            except ConfigError as exc:
                return "failure", None, list(exc.problems)
            except Exception as exc:  # SECURITY: a loader bug must not take the old policy down
                return "failure", None, [_INTERNAL.format(name=type(exc).__name__)]
        return "success", policy, []

    def _install(self, loaded: _Loaded) -> bool:
        outcome, policy, problems = loaded
        if outcome == "success" and policy is not None:
            # Compared here, at the swap: two loads of one change (SIGHUP during a poll) report
            # one success and one "unchanged".
            if policy.version == self._policy.version:
                outcome, policy = "unchanged", self._policy
            else:
                self._policy = policy
        self._report(outcome, policy, problems)
        return outcome == "success"

    def changed(self) -> bool:
        """Whether the files differ from what the last load or reload attempt saw."""
        return self._watch.changed()

    async def run(self, poll_s: float) -> None:
        """Poll every ``poll_s`` seconds and reload on change; ``poll_s <= 0`` disables polling.

        Runs until cancelled. Stat calls are cheap and run on the loop; parsing runs in a worker
        thread so a large policy does not stall requests. An exception raised by ``on_reload``
        does not stop polling (the swap, if any, has already happened).
        """
        await self._watch.run(poll_s)

    def signature(self) -> Signature:
        """Stat every configured path, and for directories every policy file in them."""
        watched: list[Path] = []
        for path in self.paths:
            watched.append(path)
            if path.is_dir():
                try:
                    children = sorted(path.iterdir())
                except OSError:
                    continue
                watched.extend(
                    child
                    for child in children
                    if child.suffix in SUFFIXES and not child.name.startswith(".")
                )
        return stat_signature(watched)

    def _report(self, outcome: Outcome, policy: PolicySet | None, problems: list[str]) -> None:
        if self._on_reload is not None:
            self._on_reload(outcome, policy, problems)
