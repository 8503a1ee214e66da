# syntax=docker/dockerfile:1
# mcp-resource-gateway container image.
#   docker build -t mcp-gateway .
#   (podman/buildah: podman build --format docker -t mcp-gateway .  The default OCI format
#    has no HEALTHCHECK, so podman would drop it.)
#
# The image ships no configuration: mount gateway.yaml and the policies it names at
# /etc/mcp-gateway, and provide secrets as environment variables or files (/run/secrets).
# From a checkout, after editing deploy/gateway.example.yaml (resource, issuer, backend) and
# writing the backend's token to deploy/secrets/backend-token:
#   docker run --rm -p 8080:8080 \
#     -v "$PWD/deploy/gateway.example.yaml:/etc/mcp-gateway/gateway.yaml:ro" \
#     -v "$PWD/policies:/etc/mcp-gateway/policies:ro" \
#     -v "$PWD/deploy/secrets/backend-token:/run/secrets/backend-token:ro" \
#     -e GATEWAY_INTROSPECTION_SECRET=... mcp-gateway
# Validate the same layout first: append `check --skip-secrets --config
# /etc/mcp-gateway/gateway.yaml` to that command line (without -p).

ARG PYTHON_IMAGE=python:3.12-slim

# --- builder: build the wheel and install it with its dependencies into a virtualenv -------
FROM ${PYTHON_IMAGE} AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
RUN python -m venv /opt/venv
# Only what the wheel needs: metadata, the README and LICENSE it embeds, and the package (pure
# Python: no compiler in either stage).
COPY pyproject.toml README.md LICENSE ./
COPY gateway ./gateway
# The venv's own pip builds the wheel: the base needs only python3 + venv (no system pip), so a
# plain Debian base (scripts/image_test.sh builds one with debootstrap) works as well as -slim.
# With the `otel` extra: `tracing:` (OpenTelemetry export) works in the image as configured.
RUN /opt/venv/bin/python -m pip wheel --no-deps --wheel-dir /wheels . \
 && /opt/venv/bin/pip install --only-binary=:all: "$(echo /wheels/*.whl)[otel]" \
 && /opt/venv/bin/pip uninstall --yes pip \
 && /opt/venv/bin/mcp-gateway version

# --- runtime: no compilers, no build tools, no pip; a non-root user --------------------------
FROM ${PYTHON_IMAGE} AS runtime
LABEL org.opencontainers.image.title="mcp-resource-gateway" \
      org.opencontainers.image.description="OAuth-protected MCP resource-server gateway" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    MCP_GATEWAY_HEALTH_URL=http://127.0.0.1:9090/healthz
RUN groupadd --system --gid 10001 mcp \
 && useradd --system --uid 10001 --gid mcp --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin mcp \
 && mkdir -p /etc/mcp-gateway
COPY --from=builder /opt/venv /opt/venv
USER 10001:10001
WORKDIR /etc/mcp-gateway
# 8080: public MCP listener (put it behind the TLS proxy). 9090: ops listener (/healthz,
# /readyz, /metrics); set ops_listen.host: 0.0.0.0 so probes from outside the container reach it.
EXPOSE 8080 9090
# The slim image has no curl; the stdlib client probes the ops listener from inside.
HEALTHCHECK --interval=15s --timeout=3s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import os, sys, urllib.request; sys.exit(0 if urllib.request.urlopen(os.environ['MCP_GATEWAY_HEALTH_URL'], timeout=2).status == 200 else 1)"]
# SIGTERM starts a graceful shutdown (limits.shutdown_delay_s, then limits.drain_timeout_s);
# keep both together below the stop timeout.
STOPSIGNAL SIGTERM
ENTRYPOINT ["mcp-gateway"]
CMD ["serve", "--config", "/etc/mcp-gateway/gateway.yaml"]
