#!/usr/bin/env python3
"""The gateway's benchmark (``make bench``): CPU per call at the defaults, beside a bare backend.

The setup of issue 18, on a 2-core machine:

- the **bare backend**: an aiohttp MCP server (no auth, no logging) answering ``tools/call
  echo``; the gateway proxies to it, and it is measured alone in the same run;
- the **gateway** as ``mcp-gateway serve`` at the documented **defaults** (JSON access line per
  request and an audit event per ``tools/call``, both on stdout, redirected to a file; only the
  pre-auth and principal rate limits off so one token can drive the load), and the **tuned**
  case beside it (audit off, stdout to /dev/null);
- the measured process pinned alone to core 0 (``taskset``); ``wrk -t2`` on core 1 with the
  backend and the issuers;
- a 2026-07-28 ``tools/call echo`` with a cached token; CPU per call = the process's
  utime+stime from /proc/<pid>/stat over the run / the requests served.

Phases (``--only`` picks some): ``main`` (c64, medians of ``--rounds`` alternating rounds of
``--duration`` s: bare, defaults, tuned), ``floor`` (aiohttp's server and the lean client
forwarding to the backend with nothing else: what the design costs at least), ``c1`` (added
p50 at one connection), ``legacy`` (2025-06-18), ``401`` (a refused token; introspections
counted), ``features`` (JWT with a warm cache, two backends, signed caller assertions, a
DPoP-bound JWT with a fresh ES256 or EdDSA proof per request: one more signature verification;
``when:`` conditions on the tool; an ``override:`` on the tool; a catalog lock under ``hold``;
the external decision point,
cached and not; a guardrail on the tool that passes (its processor's own time is not the
gateway's), and one configured that no rule names; a
``prompts/get`` and a ``resources/read`` beside a
``tools/call``; a ``tasks/get`` of a working task (the tasks extension: its handle opened and
checked, the poll relayed); signed audit checkpoints; tracing off and on at ratio 1.0; a call
of a ``user_oauth`` backend with a person's stored token beside the same Redis store's
service-credential call: scripts/bench_user_oauth.py),
``sweep`` (1,000 catalog tools, 1,000 policy rules), ``workers`` (``--workers 2`` against 1,
unpinned: every process shares both cores). At the defaults the whole run takes about 11
minutes (``--quick``: about 3).

Usage::

    .venv/bin/python scripts/bench.py                 # = make bench
    .venv/bin/python scripts/bench.py --only main --rounds 1 --profile /tmp/prof
    .venv/bin/python scripts/bench.py --only features --variants conditions --side-rounds 4

The in-process microbenchmarks (protocol decoding, JWT verification, caller assertions) are
``scripts/bench_micro.py``. Figures: docs/performance.md.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from bench_lua import advance_proofs, write_lua, write_task_lua
from bench_procs import (
    PYTHON,
    ROOT,
    Load,
    Proc,
    free_port,
    get_json,
    pin,
    run_wrk,
    start_backend,
    start_floor,
    start_gateway,
    start_peer,
)
from bench_user_oauth import UserOAuthBench
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from joserfc import jws
from joserfc.jwk import ECKey, OKPKey

from gateway.config import SealKey
from gateway.protocol.task_handle import TaskClaims, TaskHandles

PHASES = ("main", "floor", "c1", "legacy", "401", "features", "sweep", "workers")
DPOP_ALGS = ("ES256", "EdDSA")
DPOP_MAX_RPS = 4000
"""Requests per second a DPoP variant's proofs are made for (more than one pinned core serves
with a proof to check); twice as many are made (wrk's threads take alternate ones), so no proof
is sent twice: a replay would be answered 401, a cheaper path, and show as errors."""
TARGET_CORE, LOAD_CORE = 0, 1
FIRST_WARM_S = 6.0
"""A process's first load is preceded by this much warm-up: a fresh gateway's CPU per call
falls for its first 5 s or so of load (401 path, 2 s windows from start: 64, 65, 58, 56, 56 µs,
then flat), and an operator's replicas run for days."""
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "wrk", "version": "1"},
}


def base64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def call_body(name: str = "echo", *, modern: bool = True) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": {"text": "hello"}}
    if modern:
        params["_meta"] = META
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}


def surface_body(method: str, params: dict[str, Any]) -> dict[str, Any]:
    """A 2026-07-28 ``prompts/get`` or ``resources/read`` (the bench backend's greet prompt and
    its note)."""
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": META}}


def modern_headers(
    token: str | None, name: str = "echo", method: str = "tools/call"
) -> dict[str, str]:
    headers = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method, "Mcp-Name": name}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return headers


class Bench:
    def __init__(self, args: argparse.Namespace, work: Path) -> None:
        self.args = args
        self.work = work
        self.port = free_port()
        self.resource = f"http://127.0.0.1:{free_port()}/mcp"  # one resource for every gateway
        self.dpop_keys: dict[str, ECKey | OKPKey] = {
            "ES256": ECKey.generate_key("P-256", private=True),
            "EdDSA": OKPKey.generate_key("Ed25519", private=True),
        }
        self.peer, self.info = start_peer(
            self.resource, LOAD_CORE, [k.thumbprint() for k in self.dpop_keys.values()]
        )
        self.backend_port = free_port()
        self.backend = start_backend(self.backend_port, LOAD_CORE)
        self.backend_url = f"http://127.0.0.1:{self.backend_port}/mcp"
        (work / "gw-secret").write_text("bench-gw-secret")
        (work / "svc-token").write_text("bench-service-token")
        (work / "policy.yaml").write_text(policy(1))
        self.results: dict[str, list[Load]] = {}
        self.lua = {
            "modern": write_lua(
                work / "modern.lua", call_body(), modern_headers(self.info["token"])
            ),
            "bare": write_lua(work / "bare.lua", call_body(), modern_headers(None)),
        }

    # --- configuration -----------------------------------------------------------------------

    def config(self, **overrides: Any) -> dict[str, Any]:
        """gateway.yaml at the defaults of docs/configuration.md, as an operator writes it."""
        config: dict[str, Any] = {
            "resource": self.resource,
            "listen": {"host": "127.0.0.1", "port": free_port()},
            "ops_listen": {"host": "127.0.0.1", "port": free_port()},
            "issuer": {
                "url": self.info["issuer"],
                "client_id": "mcp-gateway",
                "client_secret": {"file": str(self.work / "gw-secret")},
                "allow_insecure_http": True,
            },
            "backend": {
                "url": self.backend_url,
                "allow_insecure_http": True,
                "credential": {"type": "bearer", "token": {"file": str(self.work / "svc-token")}},
            },
            "policy": str(self.work / "policy.yaml"),
            # The only change from the defaults: one token drives all the load.
            "limits": {"principal_rate": None, "pre_auth_rate": None},
        }
        for key, value in overrides.items():
            if value is None:
                config.pop(key, None)
            else:
                config[key] = value
        return config

    def gateway(
        self,
        name: str,
        *,
        tuned: bool = False,
        source: str | None = None,
        **overrides: Any,
    ) -> Proc:
        """A gateway pinned to the target core; ``source``: another checkout's ``gateway``."""
        config = self.config(**overrides)
        if tuned:
            config["audit"] = {"sink": "off"}
        log = None if tuned else self.work / f"{name}.log"
        env = {"PYTHONPATH": source} if source is not None else None
        return start_gateway(name, config, self.work, core=TARGET_CORE, stdout=log, extra_env=env)

    # --- measuring -----------------------------------------------------------------------------

    def load(
        self,
        key: str,
        proc: Proc,
        url: str,
        lua: Path,
        *,
        connections: int = 64,
        duration: float | None = None,
        warm: float = 2.0,
    ) -> Load:
        """Pin ``proc`` alone to the target core, warm up, measure; the rest on the load core."""
        pin(proc.pids, TARGET_CORE)
        duration = self.args.duration if duration is None else duration
        if warm:
            if not proc.warmed:
                warm = max(warm, FIRST_WARM_S)
                proc.warmed = True
            run = run_wrk(
                url, lua, connections=connections, duration=warm, measured=[], core=LOAD_CORE
            )
            advance_proofs(lua, run.requests, connections)
        result = run_wrk(
            url, lua, connections=connections, duration=duration, measured=proc.pids, core=LOAD_CORE
        )
        advance_proofs(lua, result.requests, connections)
        self.results.setdefault(key, []).append(result)
        print(f"  {key:<28} {describe(result)}", flush=True)
        return result

    def with_backend_on_target(self, run: Callable[[], Load]) -> Load:
        """The bare backend measured alone on the target core, then moved back."""
        pin(self.backend.pids, TARGET_CORE)
        try:
            return run()
        finally:
            pin(self.backend.pids, LOAD_CORE)

    def median(self, key: str, attr: str = "cpu_per_call_us") -> float:
        return float(statistics.median(getattr(r, attr) for r in self.results[key]))

    # --- phases --------------------------------------------------------------------------------

    def phase_main(self) -> None:
        print(f"main: c64, {self.args.rounds} alternating rounds of {self.args.duration:g} s")
        defaults = self.gateway("defaults")
        if self.args.ab:  # before/after: the other checkout at the defaults instead of tuned
            tuned = self.gateway("other", source=self.args.ab)
        else:
            tuned = self.gateway("tuned", tuned=True)
        pin(tuned.pids, LOAD_CORE)
        try:
            for index in range(self.args.rounds):
                order = ["bare", "defaults", "tuned"]
                if index % 2:
                    order.reverse()
                for which in order:
                    if which == "bare":
                        self.with_backend_on_target(
                            lambda: self.load(
                                "bare", self.backend, self.backend_url, self.lua["bare"]
                            )
                        )
                    else:
                        proc = defaults if which == "defaults" else tuned
                        other = tuned if which == "defaults" else defaults
                        pin(other.pids, LOAD_CORE)
                        key = "other" if which == "tuned" and self.args.ab else which
                        self.load(key, proc, proc.url, self.lua["modern"])
                        pin(proc.pids, LOAD_CORE)
                    if self.args.profile and which == "defaults" and index == 0:
                        self.profile(defaults)
        finally:
            defaults.stop()
            tuned.stop()

    def profile(self, proc: Proc, lua: Path | None = None, connections: int = 64) -> None:
        """py-spy (native frames) over one more measured run of ``proc`` (``lua``: the load)."""
        out = Path(self.args.profile)
        out.mkdir(parents=True, exist_ok=True)
        spy_bin = str(Path(PYTHON).parent / "py-spy")
        spy = subprocess.Popen(  # noqa: S603
            [
                spy_bin,
                "record",
                "--native",
                "--format",
                "raw",
                "-r",
                "250",
                "-o",
                str(out / f"{proc.name}.txt"),
                "--pid",
                str(proc.popen.pid),
                "-d",
                str(int(self.args.duration)),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        pin([spy.pid], LOAD_CORE)
        time.sleep(0.5)
        self.load(
            "profiled", proc, proc.url, lua or self.lua["modern"], warm=0, connections=connections
        )
        spy.wait(timeout=60)
        print(f"  profile written to {out / (proc.name + '.txt')}")

    def phase_floor(self) -> None:
        """The design's floor beside the bare backend and the defaults, alternating."""
        print("floor: aiohttp's server + the lean client, nothing else; beside bare and defaults")
        floor = start_floor(free_port(), self.backend_url, LOAD_CORE)
        defaults = self.gateway("defaults-floor")
        pin(defaults.pids, LOAD_CORE)
        try:
            for index in range(self.args.side_rounds):
                order = ["bare", "floor", "defaults"]
                for which in order if index % 2 == 0 else reversed(order):
                    if which == "bare":
                        self.with_backend_on_target(
                            lambda: self.load(
                                "bare (floor phase)",
                                self.backend,
                                self.backend_url,
                                self.lua["bare"],
                                duration=self.args.side_duration,
                            )
                        )
                        continue
                    proc, lua = (floor, "bare") if which == "floor" else (defaults, "modern")
                    key = "floor" if which == "floor" else "defaults (floor phase)"
                    self.load(key, proc, proc.url, self.lua[lua], duration=self.args.side_duration)
                    pin(proc.pids, LOAD_CORE)
        finally:
            floor.stop()
            defaults.stop()

    def phase_c1(self) -> None:
        print("c1: one connection, added p50 over calling the backend directly")
        defaults = self.gateway("defaults-c1")
        duration = max(5.0, self.args.duration / 3)
        try:
            for _ in range(self.args.rounds):
                self.with_backend_on_target(
                    lambda: self.load(
                        "bare c1",
                        self.backend,
                        self.backend_url,
                        self.lua["bare"],
                        connections=1,
                        duration=duration,
                        warm=1,
                    )
                )
                self.load(
                    "defaults c1",
                    defaults,
                    defaults.url,
                    self.lua["modern"],
                    connections=1,
                    duration=duration,
                    warm=1,
                )
            if self.args.profile:
                self.profile(defaults, connections=1)
        finally:
            defaults.stop()

    def phase_legacy(self) -> None:
        print("legacy: 2025-06-18 tools/call against 2026-07-28, alternating")
        lua = write_lua(
            self.work / "legacy.lua",
            call_body(modern=False),
            {"MCP-Protocol-Version": "2025-06-18", "Authorization": f"Bearer {self.info['token']}"},
        )
        gateway = self.gateway("defaults-legacy")
        try:
            for index in range(self.args.side_rounds):
                pairs = [("modern", self.lua["modern"]), ("legacy", lua)]
                for key, script in pairs if index % 2 == 0 else reversed(pairs):
                    self.load(
                        f"{key} (legacy phase)",
                        gateway,
                        gateway.url,
                        script,
                        duration=self.args.side_duration,
                    )
        finally:
            gateway.stop()

    def phase_401(self) -> None:
        print("401: a token the issuer refuses, repeated; introspections counted")
        bad = "bench-refused-" + "x" * 40
        lua = write_lua(self.work / "refused.lua", call_body(), modern_headers(bad))
        none = write_lua(self.work / "none.lua", call_body(), modern_headers(None))
        for key, script, issuer in [
            ("401 no token", none, {}),
            ("401 refused token", lua, {}),  # negative_ttl_s: 5, the default
            ("401 refused, no negative cache", lua, {"cache": {"negative_ttl_s": 0}}),
        ]:
            gateway = self.gateway("defaults-401", issuer={**self.config()["issuer"], **issuer})
            try:
                before = get_json(self.info["calls"])["introspections"]
                self.load(key, gateway, gateway.url, script, duration=self.args.side_duration)
                calls = get_json(self.info["calls"])["introspections"] - before
                statuses = status_counts(gateway.ops)
                print(f"    introspections: {calls}; answers by status: {statuses}")
                if self.args.profile and key == "401 refused token":
                    self.profile(gateway, script)
            finally:
                gateway.stop()

    def phase_features(self) -> None:
        print("features: each against the defaults, alternating")
        key = self.work / "assertion.pem"
        write_ed25519(key)
        (self.work / "policy-two.yaml").write_text(policy(1, extra=["b__echo"]))
        (self.work / "policy-when.yaml").write_text(policy(1, when=CONDITIONS))
        (self.work / "policy-override.yaml").write_text(policy(1, override=OVERRIDE))
        (self.work / "policy-guarded.yaml").write_text(policy(1, guardrails=["bench"]))
        (self.work / "policy-held.yaml").write_text(policy(1, held=["held__echo"]))
        jwt_issuer = {"url": self.info["jwt_issuer"], "tokens": "jwt", "allow_insecure_http": True}
        two = {
            "a": {**self.config()["backend"], "prefix": ""},
            "b": {**self.config()["backend"], "prefix": "b__"},
        }
        jwt_lua = write_lua(self.work / "jwt.lua", call_body(), modern_headers(self.info["jwt"]))
        token = self.info["token"]
        pdp = {"url": self.info["pdp"], "allow_insecure_http": True}
        guardrails = {"bench": {"url": self.info["guardrail"], "allow_insecure_http": True}}
        prompt_lua = write_lua(
            self.work / "prompt.lua",
            surface_body("prompts/get", {"name": "greet", "arguments": {"name": "wrk"}}),
            modern_headers(token, "greet", "prompts/get"),
        )
        read_lua = write_lua(
            self.work / "read.lua",
            surface_body("resources/read", {"uri": "bench://notes/1"}),
            modern_headers(token, "bench://notes/1", "resources/read"),
        )
        checkpoint_key = self.work / "audit-key.pem"
        write_ed25519(checkpoint_key)
        checkpoints = {
            "sink": "stdout",
            "checkpoint": {"key": {"file": str(checkpoint_key)}, "every": 1000},
        }
        # The catalog lock under hold: pinned by the command an operator runs, against the
        # bench backend (compared at each catalog fetch; per request the refresher's catalog()
        # compares the policy object's identity, nothing more).
        lock = self.work / "catalog.lock.yaml"
        pin_config = self.work / "catalog-pin.yaml"
        pin_config.write_text(json.dumps(self.config()))
        subprocess.run(  # noqa: S603
            [
                PYTHON,
                "-m",
                "gateway.commands",
                "catalog",
                "pin",
                "--config",
                str(pin_config),
                "--output",
                str(lock),
            ],
            check=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.DEVNULL,
        )
        variants: list[tuple[str, dict[str, Any], Path]] = [
            ("jwt, warm cache", {"issuer": jwt_issuer}, jwt_lua),
            ("catalog lock, hold", {"catalog": {"lock": str(lock)}}, self.lua["modern"]),
            (
                "two backends",
                {"backend": None, "backends": two, "policy": str(self.work / "policy-two.yaml")},
                self.lua["modern"],
            ),
            (
                "conditions on the tool",
                {"policy": str(self.work / "policy-when.yaml")},
                self.lua["modern"],
            ),
            (
                "override on the tool",
                {"policy": str(self.work / "policy-override.yaml")},
                self.lua["modern"],
            ),
            # policy_external: the same question every call, so a cache hit (its canonical
            # request and hash); with ttl_s: 0 one AuthZEN round trip per call.
            ("external decision point, cached", {"policy_external": pdp}, self.lua["modern"]),
            (
                "external decision point, ttl_s 0",
                {"policy_external": {**pdp, "cache": {"ttl_s": 0}}},
                self.lua["modern"],
            ),
            # guardrails: a processor (the peer, on the load core: its own time is not the
            # gateway's) that passes everything, asked twice per call (the arguments, the
            # result); configured but named by no rule, it must cost nothing.
            (
                "guardrail on the tool, pass",
                {"guardrails": guardrails, "policy": str(self.work / "policy-guarded.yaml")},
                self.lua["modern"],
            ),
            ("guardrail configured, unused", {"guardrails": guardrails}, self.lua["modern"]),
            # approval: on another tool (held__echo): the echo call's decision carries none,
            # so the route tests one None; it must cost nothing.
            (
                "approval on another tool, unused",
                {"policy": str(self.work / "policy-held.yaml")},
                self.lua["modern"],
            ),
            (
                "signed assertion",
                {
                    "backend": {
                        **self.config()["backend"],
                        "identity": {"assertion": {"key": {"file": str(key)}}},
                    }
                },
                self.lua["modern"],
            ),
            # The rest of the surface: a prompts/get and a resources/read (each with its audit
            # event), beside a tools/call at the defaults.
            ("prompts/get greet", {}, prompt_lua),
            ("resources/read a note", {}, read_lua),
            # The tasks extension: a tasks/get of a working task (the caller's own handle,
            # opened, its owner and the policy checked, relayed with the backend's id). The
            # handles rotate: a caller's polls of one task have a budget of their own.
            ("tasks/get a working task", self.tasks_config(), self.task_lua()),
            # The audit chain is always on (it is in the defaults); checkpoints sign every 1000.
            ("audit checkpoints every 1000", {"audit": checkpoints}, self.lua["modern"]),
            # tracing: off is the defaults again (an A/A pair: its cost must be noise); on
            # records every request (ratio 1.0) and exports to the peer's OTLP/HTTP sink.
            ("tracing off", {}, self.lua["modern"]),
            (
                "tracing on, ratio 1.0",
                {"tracing": {"otlp": {"endpoint": self.info["otlp"]}, "sample_ratio": 1.0}},
                self.lua["modern"],
            ),
        ]
        self.side_by_side([v for v in variants if self.wanted(v[0])])
        # user_oauth: a call with a person's stored upstream token beside the same store's
        # service-credential call (scripts/bench_user_oauth.py: its own redis-server).
        users = UserOAuthBench(
            self.work,
            resource=self.resource,
            issuer=self.info["issuer"],
            backend=self.config()["backend"],
        )
        picked = [(n, o, self.lua["modern"]) for n, o in users.variants() if self.wanted(n)]
        if picked:
            users.start()
            try:
                self.side_by_side(picked)
            finally:
                users.stop()
        # DPoP: the same JWT, bound to a key, each request with its own proof. The proofs are
        # made just before their variant runs (their iat must stay within the window).
        dpop_issuer = {**jwt_issuer, "dpop": {"mode": "required", "iat_window_s": 600}}
        for alg in (alg for alg in DPOP_ALGS if self.wanted(f"dpop {alg}")):
            lua = self.dpop_lua(alg)
            self.side_by_side([(f"dpop {alg}", {"issuer": dpop_issuer}, lua)])

    def tasks_config(self) -> dict[str, Any]:
        """``tasks:`` on (with the seal key :meth:`task_lua` mints under), echo a task tool."""
        (self.work / "policy-tasks.yaml").write_text(policy(1, tasks=True))
        return {
            "input_requests": {
                "seal_keys": [{"id": "bench", "key": {"file": str(self.work / "seal-key")}}]
            },
            "tasks": {"min_poll_interval_ms": 100},
            "policy": str(self.work / "policy-tasks.yaml"),
        }

    def task_lua(self) -> Path:
        """A wrk script polling 1,000 handles of the bench token's task in turn (minted with
        the gateway's own codec and key, as a gateway would have at the task's creation)."""
        key = os.urandom(32)
        (self.work / "seal-key").write_text(base64.b64encode(key).decode())
        handles = TaskHandles((SealKey("bench", key),), "bench", resource=self.resource)
        now = int(time.time())
        claims = TaskClaims(
            backend="default",
            upstream_id="bench-task",
            issuer=self.info["issuer"],
            subject="bench",
            client_id="demo-cli",
            tool="echo",
            issued_at=now,
            expires_at=now + 86_400,
        )
        minted = [handles.seal(claims) for _ in range(1000)]
        meta = {
            **META,
            "io.modelcontextprotocol/clientCapabilities": {
                "extensions": {"io.modelcontextprotocol/tasks": {}}
            },
        }
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tasks/get",
            "params": {"taskId": "%s", "_meta": meta},
        }
        headers = modern_headers(self.info["token"], "", "tasks/get")
        del headers["Mcp-Name"]  # set per request, with the handle
        return write_task_lua(self.work / "tasks.lua", body, headers, minted)

    def wanted(self, variant: str) -> bool:
        """Whether ``--variants`` (substrings of the names; none = all) picks this variant."""
        picks = [pick for pick in self.args.variants.split(",") if pick]
        return not picks or any(pick in variant for pick in picks)

    def dpop_lua(self, alg: str) -> Path:
        """A wrk script sending the JWT bound to the ``alg`` key with a fresh proof each time
        (enough for every request of the variant's runs at :data:`DPOP_MAX_RPS`)."""
        key = self.dpop_keys[alg]
        token = self.info["dpop"][key.thumbprint()]
        seconds = FIRST_WARM_S + self.args.side_duration
        seconds += (self.args.side_rounds - 1) * (2.0 + self.args.side_duration)
        count = 2 * int(DPOP_MAX_RPS * (seconds + 2))
        ath = base64url(hashlib.sha256(token.encode()).digest())
        header = {"typ": "dpop+jwt", "alg": alg, "jwk": key.as_dict(private=False)}
        started = time.monotonic()
        path = self.work / f"proofs-{alg}.txt"
        with path.open("w") as out, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # joserfc: RFC 9864 deprecates the name "EdDSA"
            now = int(time.time())
            for index in range(count):
                claims = {
                    "jti": f"{index:x}-{os.urandom(6).hex()}",
                    "htm": "POST",
                    "htu": self.resource,
                    "iat": now,
                    "ath": ath,
                }
                out.write(jws.serialize_compact(header, json.dumps(claims), key, [alg]) + "\n")
        print(f"  {count:,} {alg} proofs made in {time.monotonic() - started:.1f} s", flush=True)
        headers = {**modern_headers(None), "Authorization": f"DPoP {token}"}
        return write_lua(self.work / f"dpop-{alg}.lua", call_body(), headers, proofs=path)

    def phase_sweep(self) -> None:
        print("sweep: 1,000 catalog tools, 1,000 policy rules")
        (self.work / "policy-1000.yaml").write_text(policy(1000))
        (self.work / "policy-all.yaml").write_text(policy(1, extra=["tool_*"]))
        backend = {**self.config()["backend"], "url": self.backend_url + "1000"}
        variants: list[tuple[str, dict[str, Any], Path]] = [
            (
                "1000 tools",
                {"backend": backend, "policy": str(self.work / "policy-all.yaml")},
                self.lua["modern"],
            ),
            ("1000 rules", {"policy": str(self.work / "policy-1000.yaml")}, self.lua["modern"]),
        ]
        self.side_by_side(variants)

    def side_by_side(self, variants: list[tuple[str, dict[str, Any], Path]]) -> None:
        """Each variant, then the defaults again, so each has a reference measured beside it."""
        if not variants:  # --variants left none: no reference gateway to start
            return
        reference = self.gateway("defaults-ref")
        pin(reference.pids, LOAD_CORE)
        try:
            for name, overrides, lua in variants:
                gateway = self.gateway(
                    name.replace(" ", "-").replace(",", "").replace("/", "-"), **overrides
                )
                try:
                    for index in range(self.args.side_rounds):
                        pair = [
                            (name, gateway, lua),
                            (f"defaults (beside {name})", reference, self.lua["modern"]),
                        ]
                        for key, proc, script in pair if index % 2 == 0 else reversed(pair):
                            self.load(key, proc, proc.url, script, duration=self.args.side_duration)
                            pin(proc.pids, LOAD_CORE)
                finally:
                    gateway.stop()
        finally:
            reference.stop()

    def phase_workers(self) -> None:
        print(
            "workers: --workers 2 against --workers 1, c64, unpinned (every process shares "
            "both cores)"
        )
        for index in range(self.args.side_rounds):
            for workers in (1, 2) if index % 2 == 0 else (2, 1):
                config = self.config()
                proc = start_gateway(
                    f"workers-{workers}",
                    config,
                    self.work,
                    core=None,
                    stdout=self.work / f"workers-{workers}.log",
                    workers=workers,
                )
                try:
                    pin([*self.backend.pids, *self.peer.pids], None)
                    result = run_wrk_all_cores(
                        proc.url, self.lua["modern"], proc, self.args.side_duration
                    )
                    self.results.setdefault(f"--workers {workers}", []).append(result)
                    print(f"  --workers {workers:<18} {describe(result)}", flush=True)
                finally:
                    proc.stop()
                    pin(self.backend.pids, LOAD_CORE)
                    pin(self.peer.pids, LOAD_CORE)

    def stop(self) -> None:
        self.backend.stop()
        self.peer.stop()


def run_wrk_all_cores(url: str, lua: Path, proc: Proc, duration: float) -> Load:
    """wrk on both cores (``taskset -c 0,1``): the workers phase shares every core."""
    run_wrk(url, lua, connections=64, duration=2, measured=[], core=None)
    return run_wrk(url, lua, connections=64, duration=duration, measured=proc.pids, core=None)


# Two realistic `when:` conditions on the benchmarked tool (a token fact and an argument), both
# true for the bench token and call: what issue 25's budget (at most 15 µs per call) is about.
CONDITIONS = ['subject == "bench" && "mcp:access" in scopes', "arguments.text.size() <= 64"]


# A policy override on the benchmarked tool (title, description, two annotations): applied when
# the catalogs are merged, so its cost per call must be noise (docs/policy.md#overrides).
OVERRIDE = {
    "title": "Echo (reviewed)",
    "description": "Repeats the text.",
    "annotations": {"readOnlyHint": True, "openWorldHint": False},
}


def policy(
    rules: int,
    *,
    extra: list[str] | None = None,
    when: list[str] | None = None,
    override: dict[str, Any] | None = None,
    tasks: bool = False,
    guardrails: list[str] | None = None,
    held: list[str] | None = None,
) -> str:
    """The echo rule plus ``rules - 1`` others (half exact names, half globs) that never match;
    ``when``: conditions on the echo rule; ``override``: its ``override:``; ``tasks``: its
    ``tasks: true``; ``guardrails``: its processors; ``held``: tools whose rules hold each call
    for a person's approval (never called by the bench)."""
    body: dict[str, Any] = {"scopes": []}
    if tasks:
        body["tasks"] = True
    if guardrails is not None:
        body["guardrails"] = guardrails
    if when is not None:
        body["when"] = when
    if override is not None:
        body["override"] = override
    echo = json.dumps(body)  # JSON is YAML: the echo rule in flow style
    lines = ["version: 1", "baseline_scopes: [mcp:access]", "tools:", f"  echo: {echo}"]
    for i in range(1, rules):
        name = f"other_{i:04d}" if i % 2 else f"other_{i:04d}_*"
        lines.append(f'  "{name}": {{scopes: [other:{i}]}}')
    lines += [f'  "{name}": {{scopes: []}}' for name in extra or []]
    lines += [f'  "{name}": {{scopes: [], approval: {{by: self}}}}' for name in held or []]
    # The bench backend's prompt and note, for the features phase's surface variants.
    lines += [
        "prompts:",
        "  greet: {scopes: []}",
        "resources:",
        '  "bench://notes/*": {scopes: []}',
    ]
    return "\n".join(lines) + "\n"


def write_ed25519(path: Path) -> None:
    pem = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    path.write_bytes(pem)


def status_counts(ops: str) -> Mapping[str, float]:
    with urllib.request.urlopen(ops + "/metrics", timeout=5) as response:  # noqa: S310
        text = response.read().decode()
    counts: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("mcp_gateway_requests_total{"):
            status = line.split('status="', 1)[1].split('"', 1)[0]
            counts[status] = counts.get(status, 0.0) + float(line.rsplit(" ", 1)[1])
    return counts


def describe(load: Load) -> str:
    errors = f", {load.errors} errors" if load.errors else ""
    return (
        f"{load.rps:>8,.0f} req/s  {load.cpu_per_call_us:>6.0f} µs CPU/call  "
        f"p50 {load.p50_ms:.2f} ms  p99 {load.p99_ms:.2f} ms  "
        f"(wrk {load.wrk_cpu_s:.1f} s, others {load.other_s:.1f} s CPU){errors}"
    )


def summary(bench: Bench) -> None:
    r, m = bench.results, bench.median
    print("\nsummary (medians)")
    if "bare" in r:
        bare = m("bare")
        print(f"  bare backend: {m('bare', 'rps'):,.0f} req/s, {bare:.0f} µs CPU per request")
        for key in ("defaults", "tuned", "other"):
            if key in r:
                print(
                    f"  gateway {key}: {m(key, 'rps'):,.0f} req/s, {m(key):.0f} µs CPU per call "
                    f"= {m(key) / bare:.2f}x the bare backend; p50 {m(key, 'p50_ms'):.2f} ms, "
                    f"p99 {m(key, 'p99_ms'):.2f} ms"
                )
    if "floor" in r:
        bare, floor, full = m("bare (floor phase)"), m("floor"), m("defaults (floor phase)")
        print(
            f"  floor: {floor:.0f} µs CPU per call = {floor / bare:.2f}x the bare backend "
            f"({bare:.0f} µs); the defaults beside it {full:.0f} µs = {full / bare:.2f}x"
        )
    if "bare c1" in r:
        added = m("defaults c1", "p50_ms") - m("bare c1", "p50_ms")
        print(
            f"  c1 p50: bare {m('bare c1', 'p50_ms'):.3f} ms, gateway "
            f"{m('defaults c1', 'p50_ms'):.3f} ms: added {added:.3f} ms"
        )
    if "legacy (legacy phase)" in r:
        ratio = m("legacy (legacy phase)") / m("modern (legacy phase)")
        print(f"  legacy / modern CPU per call: {ratio:.2f}")
    for key in [key for key in r if f"defaults (beside {key})" in r]:  # every side-by-side
        if key in r:
            ref = m(f"defaults (beside {key})")
            print(
                f"  {key}: {m(key):.0f} µs CPU per call ({m(key) - ref:+.0f} µs against the "
                f"defaults measured beside it, {ref:.0f} µs)"
            )
    if "--workers 1" in r and "--workers 2" in r:
        one, two = m("--workers 1", "rps"), m("--workers 2", "rps")
        print(f"  --workers 2: {two:,.0f} req/s against {one:,.0f}: {two / one:.2f}x")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=15, help="seconds per main round")
    parser.add_argument("--rounds", type=int, default=3, help="alternating main rounds")
    parser.add_argument(
        "--side-duration", type=float, default=8, help="seconds per run of the other phases"
    )
    parser.add_argument("--side-rounds", type=int, default=2)
    parser.add_argument("--only", default=",".join(PHASES), help=f"comma list of {PHASES}")
    parser.add_argument(
        "--variants",
        default="",
        help="features: only the variants whose names contain one of these "
        "comma-separated strings (e.g. 'conditions,tracing off')",
    )
    parser.add_argument(
        "--quick", action="store_true", help="one main round of 6 s, side runs of 4 s (a smoke run)"
    )
    parser.add_argument(
        "--profile", metavar="DIR", help="py-spy the defaults gateway (main, c1, 401)"
    )
    parser.add_argument(
        "--ab",
        metavar="DIR",
        help="main: measure the checkout in DIR at the defaults instead of the "
        "tuned case (before/after figures in one run)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the work folder (logs)")
    args = parser.parse_args()
    if args.quick:
        args.duration, args.rounds, args.side_duration, args.side_rounds = 6, 1, 4, 1
    if shutil.which("wrk") is None or shutil.which("taskset") is None:
        raise SystemExit("wrk and taskset are required: apt-get install -y wrk util-linux")
    phases = [p for p in args.only.split(",") if p]
    unknown = set(phases) - set(PHASES)
    if unknown:
        raise SystemExit(f"unknown phases: {sorted(unknown)}")
    work = Path(tempfile.mkdtemp(prefix="mcp-gw-bench-"))
    started = time.monotonic()
    load = Path("/proc/loadavg").read_text().split()[:3]
    print(f"load average before: {' '.join(load)}; work folder {work}")
    bench = Bench(args, work)
    try:
        for phase in phases:
            getattr(bench, "phase_" + phase)()
    finally:
        bench.stop()
        summary(bench)
        print(f"total {time.monotonic() - started:.0f} s")
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
