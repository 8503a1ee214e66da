"""The policy files as the production gateway serves them: hot-reloaded (the reloader's hooks
first, then the report), the warnings of a loaded set logged at startup and after each reload,
SIGHUP reloading the policy and the catalog lock, and the rules compared with the catalog
whenever either changes. Built by :func:`gateway.wiring.production.build_services`."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable
from typing import Final

from gateway.backend.catalog.lock_watch import CatalogLock
from gateway.backend.federation import FederatedBackend
from gateway.config import Config
from gateway.config.loader import backend_prefixes
from gateway.observability.events import policy_reload_reporter
from gateway.observability.logging import get_logger
from gateway.observability.metrics import Metrics
from gateway.policy.conditions import TOKEN_CONTEXTS, TokenContexts
from gateway.policy.policy_set import PolicySet
from gateway.policy.reload import PolicyReloader
from gateway.policy.warnings import policy_warnings, unmatched_rules, unruled_tools

__all__ = ["CATALOG_FIT_POLL_S", "policy_source", "reload_on_sighup", "watch_catalog_fit"]

log = get_logger("gateway.wiring")

CATALOG_FIT_POLL_S: Final = 1.0
"""How often the catalog and policy versions are compared (two attribute reads)."""


async def watch_catalog_fit(policy: PolicyReloader, backend: FederatedBackend) -> None:
    """Warn when a rule matches no catalog tool, and (once per tool) when a catalog tool has
    no rule and is therefore hidden; re-checked whenever the catalog or the policy changes.
    Only once every backend has its catalog: a rule for a backend still starting is fine. A
    tool the catalog lock holds back is no mistake of the policy: its rule is not reported
    (the hold is: ``catalog.item_held``)."""
    seen: tuple[str, str] | None = None
    hidden_logged: set[str] = set()
    while True:
        if backend.all_ready:
            catalog, current = backend.catalog(), policy.current()
            versions = (catalog.version, current.version)
            if versions != seen:
                seen = versions
                names = [tool.name for tool in catalog]
                for warning in unmatched_rules(current, [*names, *backend.held_tools()]):
                    log.warning("policy.rule_matches_no_tool", detail=warning)
                for tool in unruled_tools(current, names):
                    if tool not in hidden_logged:
                        hidden_logged.add(tool)
                        log.warning("policy.tool_without_rule_hidden", tool=tool)
        await asyncio.sleep(CATALOG_FIT_POLL_S)


def policy_source(
    config: Config, metrics: Metrics, swapped: list[Callable[[PolicySet], None]]
) -> PolicyReloader:
    """The policy files, hot-reloaded. A rule no configured backend can ever match is logged
    (``policy.rule_unreachable``) at startup and after every reload that changes the set, and so
    is a ``subjects``/``clients`` entry whose issuer is ambiguous or not configured
    (``policy.entry_issuer``)."""
    report = policy_reload_reporter(metrics)
    prefixes = backend_prefixes(config.backends)

    def warn(current: PolicySet) -> None:
        for event, warning in policy_warnings(current, prefixes):
            log.warning(event, detail=warning)

    def on_reload(outcome: str, current: PolicySet | None, problems: list[str]) -> None:
        if outcome == "success" and current is not None:
            for hook in swapped:  # first: the federation merges under the new overrides
                hook(current)
        report(outcome, current, problems)
        if outcome == "success" and current is not None:
            warn(current)

    reloader = PolicyReloader(
        config.policy_paths,
        issuers=config.issuer_urls,
        guardrails=[processor.name for processor in config.guardrails],
        on_reload=on_reload,
        # The principals' CEL contexts: one owner, bounded, kept across reloads.
        token_contexts=TokenContexts(TOKEN_CONTEXTS),
    )
    warn(reloader.current())
    return reloader


async def reload_on_sighup(policy: PolicyReloader, pins: CatalogLock | None = None) -> None:
    """SIGHUP reloads the policy set and the catalog lock (each validated in full, swapped
    atomically; an invalid one keeps the previous)."""
    loop = asyncio.get_running_loop()
    tasks: set[asyncio.Task[bool]] = set()

    def reload() -> None:
        loop.run_in_executor(None, policy.reload)
        if pins is not None:
            task = loop.create_task(pins.reload())
            tasks.add(task)
            task.add_done_callback(tasks.discard)

    try:
        loop.add_signal_handler(signal.SIGHUP, reload)
    except (NotImplementedError, RuntimeError, ValueError):
        return  # not the main thread (tests) or no signals on this platform
    try:
        await asyncio.Event().wait()
    finally:
        with contextlib.suppress(Exception):
            loop.remove_signal_handler(signal.SIGHUP)
