#!/usr/bin/env bash
# Build the Dockerfile and check the container the way an operator runs it:
#   non-root (uid 10001), read-only root filesystem, all capabilities dropped, /healthz 200,
#   shared state in Redis when redis-server is on the host, the image's HEALTHCHECK passes, the official MCP SDK lists tools through it, and SIGTERM
#   drains: a call in flight when the signal arrives still gets its answer, /readyz turns 503,
#   new connections are refused, and the process exits 0 before the drain timeout.
#
# Usage: scripts/image_test.sh [--rebuild-base] [--keep]
#   ENGINE=podman|docker   container engine (default: podman, else docker)
#   IMAGE_TEST_BASE=IMAGE  base image for the Dockerfile's PYTHON_IMAGE argument (skips the pull)
#   DEBIAN_MIRROR=URL      mirror for the debootstrap fallback (default http://deb.debian.org/debian)
#
# Where the registry base image (python:3.12-slim) cannot be pulled, a Debian bookworm base with
# python3 + venv is built with debootstrap, imported as localhost/mcp-gateway-base:bookworm and
# passed through PYTHON_IMAGE (cached: reused on later runs unless --rebuild-base). The peers
# (development issuer and demo backend) run on the host (scripts/image_test_peers.py); the
# container uses host networking and reaches them on 127.0.0.1. Not part of CI (needs an engine
# and root); run it by hand. Exit status 0 means every check passed.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
START=$(date +%s)

REBUILD_BASE=0
KEEP=0
for arg in "$@"; do
  case "$arg" in
    --rebuild-base) REBUILD_BASE=1 ;;
    --keep) KEEP=1 ;;
    *) echo "usage: $0 [--rebuild-base] [--keep]" >&2; exit 2 ;;
  esac
done

ENGINE=${ENGINE:-$(command -v podman >/dev/null 2>&1 && echo podman || echo docker)}
command -v "$ENGINE" >/dev/null 2>&1 || { echo "image-test: no podman or docker" >&2; exit 2; }
PYTHON=${PYTHON:-$ROOT/.venv/bin/python}
[ -x "$PYTHON" ] || { echo "image-test: $PYTHON missing; run 'make check' first" >&2; exit 2; }
TAG=localhost/mcp-gateway:image-test
LOCAL_BASE=localhost/mcp-gateway-base:bookworm
NAME=mcp-gateway-image-test-$$
WORK=$(mktemp -d /tmp/mcp-gateway-image-test.XXXXXX)
PEERS_PID=
REDIS_PID=
PASSED=()

log() { printf 'image-test: %s\n' "$*"; }
pass() { PASSED+=("$1"); log "PASS $1"; }
fail() { log "FAIL $1"; exit 1; }

cleanup() {
  status=$?
  if [ "$status" -ne 0 ] && "$ENGINE" container exists "$NAME" 2>/dev/null; then
    log "container log (last 30 lines):"; "$ENGINE" logs "$NAME" 2>&1 | tail -30 || true
  fi
  "$ENGINE" rm -f "$NAME" >/dev/null 2>&1 || true
  if [ -n "$PEERS_PID" ]; then kill "$PEERS_PID" 2>/dev/null || true; wait "$PEERS_PID" 2>/dev/null || true; fi
  if [ -n "$REDIS_PID" ]; then kill "$REDIS_PID" 2>/dev/null || true; wait "$REDIS_PID" 2>/dev/null || true; fi
  [ "$KEEP" = 1 ] || rm -rf "$WORK"
  exit "$status"
}
trap cleanup EXIT

# --- 1. the base image -------------------------------------------------------------------
build_local_base() {
  command -v debootstrap >/dev/null 2>&1 || fail "debootstrap missing (apt-get install -y debootstrap)"
  local rootfs=$WORK/rootfs
  log "building a Debian bookworm base with debootstrap (a few minutes)"
  debootstrap --variant=minbase --include=python3,python3-venv,python-is-python3,passwd,ca-certificates \
    bookworm "$rootfs" "${DEBIAN_MIRROR:-http://deb.debian.org/debian}" >"$WORK/debootstrap.log" 2>&1 \
    || { tail -20 "$WORK/debootstrap.log"; fail "debootstrap"; }
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb
  tar -C "$rootfs" -c . | "$ENGINE" import --change 'CMD ["/bin/bash"]' - "$LOCAL_BASE" >/dev/null
  rm -rf "$rootfs"
}

if [ -n "${IMAGE_TEST_BASE:-}" ]; then
  BASE=$IMAGE_TEST_BASE
elif timeout 60 "$ENGINE" pull -q python:3.12-slim >/dev/null 2>&1; then
  BASE=python:3.12-slim
else
  log "python:3.12-slim cannot be pulled; using a local debootstrap base"
  if [ "$REBUILD_BASE" = 1 ] || ! "$ENGINE" image exists "$LOCAL_BASE" 2>/dev/null; then
    build_local_base
  fi
  BASE=$LOCAL_BASE
fi
log "base image: $BASE"

# Some hosts need help to start containers at all: crun refuses cgroup v1/v2 hybrid mounts (runc
# copes), and sandboxes may forbid raising RLIMIT_NPROC to the engine's default.
ENGINE_OPTS=()
RUN_OPTS=()
probe() { "$ENGINE" "${ENGINE_OPTS[@]}" run --rm "${RUN_OPTS[@]}" "$BASE" true >/dev/null 2>&1; }
if ! probe; then
  RUN_OPTS=(--ulimit "nofile=$(ulimit -n):$(ulimit -Hn)" --ulimit nproc=4096:4096)
  if ! probe && [ "$ENGINE" = podman ] && command -v runc >/dev/null 2>&1; then
    ENGINE_OPTS=(--runtime runc)
  fi
  probe || fail "the engine cannot start a container on this host (try: apt-get install -y runc)"
  log "engine options for this host: ${ENGINE_OPTS[*]} ${RUN_OPTS[*]}"
fi
E() { "$ENGINE" "${ENGINE_OPTS[@]}" "$@"; }

# --- 2. build ----------------------------------------------------------------------------
BUILD_ARGS=(--build-arg "PYTHON_IMAGE=$BASE" -t "$TAG" "${RUN_OPTS[@]}")
# The OCI image format has no HEALTHCHECK; the docker format keeps it.
[ "$ENGINE" = podman ] && BUILD_ARGS+=(--format docker)
CA_BUNDLE=${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}
if [ "$ENGINE" = podman ] && [ -f "$CA_BUNDLE" ]; then
  # Build-time only (not baked into the image): let pip inside the build trust the same CAs as
  # this host, which matters behind a TLS-intercepting egress proxy.
  printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' >"$WORK/pip.conf"
  BUILD_ARGS+=(--volume "$CA_BUNDLE:/etc/ssl/certs/ca-certificates.crt:ro"
               --volume "$WORK/pip.conf:/etc/pip.conf:ro")
fi
log "building $TAG"
E build "${BUILD_ARGS[@]}" . >"$WORK/build.log" 2>&1 || { tail -30 "$WORK/build.log"; fail "build"; }
pass "image builds from the Dockerfile (PYTHON_IMAGE=$BASE)"

# --- 3. peers on the host, the container with production settings ------------------------
mkdir -p "$WORK/etc"
PEERS_ARGS=(--dir "$WORK/etc" --slow-s 3 --drain-s 8)
if command -v redis-server >/dev/null 2>&1; then
  # Shared state too: the image must reach Redis with nothing but configuration.
  REDIS_PORT=$("$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --save "" --appendonly no --dir "$WORK" \
    --logfile "$WORK/redis.log" --daemonize no >/dev/null 2>&1 &
  REDIS_PID=$!
  PEERS_ARGS+=(--redis-url "redis://127.0.0.1:$REDIS_PORT/0")
fi
"$PYTHON" scripts/image_test_peers.py "${PEERS_ARGS[@]}" >"$WORK/peers.json" 2>"$WORK/peers.log" &
PEERS_PID=$!
for _ in $(seq 100); do [ -s "$WORK/peers.json" ] && break; sleep 0.1; done
[ -s "$WORK/peers.json" ] || { cat "$WORK/peers.log"; fail "peers did not start"; }
field() { "$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$WORK/peers.json" "$1"; }
MCP_URL=$(field mcp_url); OPS_URL=$(field ops_url); TOKEN=$(field token)

READ_ONLY=(--read-only)
# podman mounts writable tmpfs on /tmp and /run under --read-only unless told not to; Kubernetes'
# readOnlyRootFilesystem does not, so neither does this test.
[ "$ENGINE" = podman ] && READ_ONLY+=(--read-only-tmpfs=false)
E run -d "${RUN_OPTS[@]}" --name "$NAME" --network host "${READ_ONLY[@]}" --cap-drop ALL \
  --security-opt no-new-privileges -v "$WORK/etc:/etc/mcp-gateway:ro" \
  -e "MCP_GATEWAY_HEALTH_URL=$OPS_URL/healthz" "$TAG" >/dev/null
http_status() { curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$1" || true; }
for _ in $(seq 150); do [ "$(http_status "$OPS_URL/readyz")" = 200 ] && break; sleep 0.1; done
[ "$(http_status "$OPS_URL/readyz")" = 200 ] || fail "/readyz never became 200"

# --- 4. checks ---------------------------------------------------------------------------
[ "$(E exec "$NAME" id -u)" = 10001 ] && [ "$(E exec "$NAME" id -g)" = 10001 ] \
  || fail "runs as uid/gid 10001"
pass "runs as uid 10001 / gid 10001 (non-root)"
[ "$(E inspect -f '{{.HostConfig.ReadonlyRootfs}}' "$NAME")" = true ] || fail "read-only flag"
if E exec "$NAME" python -c 'open("/opt/venv/probe", "w")' 2>/dev/null \
   || E exec "$NAME" python -c 'open("/tmp/probe", "w")' 2>/dev/null; then
  fail "the root filesystem is writable"
fi
pass "read-only root filesystem (writes to /opt/venv and /tmp fail), capabilities dropped"
[ "$(http_status "$OPS_URL/healthz")" = 200 ] || fail "/healthz"
pass "/healthz 200, /readyz 200"
if [ -n "$REDIS_PID" ]; then
  store_reachable() {
    curl -s --max-time 2 "$OPS_URL/readyz" | "$PYTHON" -c 'import json, sys
state = json.load(sys.stdin)["state"]
sys.exit(0 if state["backend"] == "redis" and state["reachable"] is True else 1)'
  }
  for _ in $(seq 20); do store_reachable && break; sleep 0.1; done
  store_reachable || fail "the container does not reach Redis (state.backend: redis)"
  pass "state.backend: redis works from the image (/readyz reports the store reachable)"
fi
if [ "$ENGINE" = podman ]; then
  E healthcheck run "$NAME" >/dev/null || fail "the image's HEALTHCHECK"
  pass "the image's HEALTHCHECK command passes"
fi

TOKEN="$TOKEN" MCP_URL="$MCP_URL" "$PYTHON" - <<'EOF' || fail "client lists tools"
import asyncio, os
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

async def main() -> None:
    headers = {"Authorization": f"Bearer {os.environ['TOKEN']}"}
    async with create_mcp_http_client(headers=headers) as http, Client(
        streamable_http_client(os.environ["MCP_URL"], http_client=http)
    ) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        # The token has mcp:access notes:read: the demo policy lists what it may call and hides
        # what needs notes:write or admin (the demo backend's tool set grows; this is the rule).
        assert {"echo", "notes_list", "time_now"} <= names, names
        assert not names & {"notes_add", "notes_compose", "admin_reset"}, names
        result = await client.call_tool("echo", {"text": "through the container"})
        assert result.content[0].text == "through the container", result

asyncio.run(main())
EOF
pass "the mcp SDK lists the tools the policy grants (none needing notes:write or admin) and calls echo through the container"

# SIGTERM with a call in flight: the call is answered, readiness drops, the process exits 0.
TOKEN="$TOKEN" MCP_URL="$MCP_URL" "$PYTHON" - >"$WORK/slow.out" 2>&1 <<'EOF' &
import json, os, urllib.request
meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}}
body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "slow"}, "_meta": meta}}
request = urllib.request.Request(os.environ["MCP_URL"], data=json.dumps(body).encode(), headers={
    "Authorization": "Bearer " + os.environ["TOKEN"], "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28",
    "Mcp-Method": "tools/call", "Mcp-Name": "echo"})
with urllib.request.urlopen(request, timeout=20) as response:
    print(response.status, json.loads(response.read())["result"]["content"][0]["text"])
EOF
SLOW_PID=$!
sleep 1
SIGNALLED=$(date +%s.%N)
E kill --signal TERM "$NAME" >/dev/null
sleep 0.5
READY_WHILE_DRAINING=$(http_status "$OPS_URL/readyz")
wait "$SLOW_PID" || { cat "$WORK/slow.out"; fail "the in-flight call failed during the drain"; }
grep -q '^200 slow$' "$WORK/slow.out" || { cat "$WORK/slow.out"; fail "in-flight answer"; }
EXIT_CODE=$(E wait "$NAME")
STOPPED=$(date +%s.%N)
[ "$READY_WHILE_DRAINING" = 503 ] || fail "/readyz during the drain was $READY_WHILE_DRAINING, not 503"
[ "$EXIT_CODE" = 0 ] || fail "exit code after SIGTERM was $EXIT_CODE"
E logs "$NAME" 2>&1 | grep -q 'gateway.stopped' || fail "no gateway.stopped log line"
DRAIN=$("$PYTHON" -c "print(round($STOPPED - $SIGNALLED, 1))")
pass "SIGTERM drains: the in-flight call answered 200, /readyz 503 while draining, exit 0 after ${DRAIN}s (drain_timeout_s 8)"

log "all ${#PASSED[@]} checks passed in $(( $(date +%s) - START ))s ($ENGINE, base $BASE)"
