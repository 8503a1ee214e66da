"""The shipped deployment files work as written: deploy/nginx.conf and the Dockerfile's example.

``nginx -t`` runs on a copy of deploy/nginx.conf with test certificates and a resolvable upstream
(the real nginx of this machine: Debian stable's 1.22 in CI, see .ci/run). The Dockerfile's
``docker run`` example is replayed as a directory layout and checked with ``mcp-gateway check``.
"""

from __future__ import annotations

import datetime
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.config import DEFAULT_LOGIN_PREFIX

ROOT = Path(__file__).resolve().parents[2]
NGINX_CONF = (ROOT / "deploy" / "nginx.conf").read_text(encoding="utf-8")
NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)


def _self_signed(directory: Path) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "mcp.example.com")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "fullchain.pem", directory / "privkey.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def _nginx_version() -> tuple[int, ...]:
    assert NGINX is not None
    out = subprocess.run([NGINX, "-v"], capture_output=True, text=True, check=False).stderr
    match = re.search(r"nginx/(\d+)\.(\d+)\.(\d+)", out)
    assert match, out
    return tuple(int(part) for part in match.groups())


def _render(tmp_path: Path, text: str) -> Path:
    cert, key = _self_signed(tmp_path)
    rendered = (
        text.replace("server gateway:8080;", "server 127.0.0.1:8080;")
        .replace("/etc/nginx/certs/fullchain.pem", str(cert))
        .replace("/etc/nginx/certs/privkey.pem", str(key))
        .replace("pid /tmp/nginx.pid;", f"pid {tmp_path / 'nginx.pid'};")
    )
    assert rendered.count(str(tmp_path)) >= 3, "the substitutions no longer match the file"
    path = tmp_path / "nginx.conf"
    path.write_text(rendered, encoding="utf-8")
    return path


def _nginx_t(tmp_path: Path, conf: Path) -> subprocess.CompletedProcess[str]:
    assert NGINX is not None
    (tmp_path / "logs").mkdir(exist_ok=True)
    return subprocess.run(
        [
            NGINX,
            "-t",
            "-p",
            str(tmp_path),
            "-e",
            str(tmp_path / "logs" / "error.log"),
            "-c",
            str(conf),
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


@pytest.mark.skipif(NGINX is None, reason="nginx is not installed (.ci/run installs it)")
def test_nginx_conf_loads_on_the_installed_nginx(tmp_path: Path) -> None:
    result = _nginx_t(tmp_path, _render(tmp_path, NGINX_CONF))
    assert result.returncode == 0, result.stderr
    assert "syntax is ok" in result.stderr
    if _nginx_version() < (1, 25, 1):
        assert "[warn]" not in result.stderr, result.stderr


@pytest.mark.skipif(NGINX is None, reason="nginx is not installed (.ci/run installs it)")
def test_the_commented_form_for_nginx_1_25_is_what_that_version_needs(tmp_path: Path) -> None:
    modern = NGINX_CONF.replace("        listen 443 ssl http2;", "        # listen 443 ssl http2;")
    modern = modern.replace("        # listen 443 ssl;\n", "        listen 443 ssl;\n")
    modern = modern.replace("        # http2 on;\n", "        http2 on;\n")
    assert "\n        http2 on;\n" in modern and "\n        listen 443 ssl;\n" in modern
    result = _nginx_t(tmp_path, _render(tmp_path, modern))
    if _nginx_version() >= (1, 25, 1):
        assert result.returncode == 0, result.stderr
        assert "[warn]" not in result.stderr, result.stderr
    else:  # the reason the shipped file uses the other form
        assert result.returncode != 0
        assert 'unknown directive "http2"' in result.stderr


def test_the_access_log_carries_the_request_id_the_gateway_logs_and_no_query_string() -> None:
    (log_format,) = re.findall(r"log_format mcp_json escape=json\s+((?:'[^']*'\s*)+);", NGINX_CONF)
    assert '"request_id":"$request_id"' in log_format
    assert "$request " not in log_format + " " and "$request_uri" not in log_format
    assert "$args" not in log_format and "$query_string" not in log_format
    assert "access_log /dev/stdout mcp_json;" in NGINX_CONF
    mcp = NGINX_CONF.split("location = /mcp {", 1)[1].split("}", 1)[0]
    assert "proxy_set_header X-Request-Id $request_id;" in mcp
    # Server-Sent Events (progress) reach the client unbuffered.
    assert "proxy_buffering off;" in mcp and "proxy_cache off;" in mcp
    assert "proxy_http_version 1.1;" in mcp


def test_nginx_routes_the_login_surfaces_prefix_to_the_gateway() -> None:
    pages = NGINX_CONF.split(f"location {DEFAULT_LOGIN_PREFIX}/ {{", 1)[1].split("}", 1)[0]
    assert "proxy_pass http://mcp_gateway;" in pages
    assert "proxy_set_header X-Request-Id $request_id;" in pages
    assert "proxy_set_header Host $host;" in pages
    # Nothing strips what the CSRF checks read, and nothing caches the pages.
    assert "proxy_set_header Cookie" not in pages and "proxy_set_header Origin" not in pages
    assert "proxy_cache " not in pages.replace("proxy_cache off", "")


def test_the_dockerfile_run_example_mounts_a_layout_that_passes_check(tmp_path: Path) -> None:
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    lines = [line.removeprefix("#").strip() for line in dockerfile.splitlines()]
    start = next(i for i, line in enumerate(lines) if line.startswith("docker run "))
    command = ""
    for line in lines[start:]:
        command += line.rstrip("\\") + " "
        if not line.endswith("\\"):
            break
    argv = shlex.split(command.replace("$PWD", str(ROOT)))
    mounts = [argv[i + 1] for i, arg in enumerate(argv) if arg == "-v"]
    assert argv[-1] == "mcp-gateway" and "GATEWAY_INTROSPECTION_SECRET=..." in argv
    for mount in mounts:
        source, target, mode = mount.split(":")
        assert mode == "ro"
        destination = tmp_path / target.lstrip("/")
        destination.parent.mkdir(parents=True, exist_ok=True)
        if target == "/run/secrets/backend-token":
            # The operator writes this file; the example names where.
            assert source == str(ROOT / "deploy" / "secrets" / "backend-token")
            destination.write_text("token\n")
            continue
        assert Path(source).exists(), f"the example mounts {source}, which the repo lacks"
        if Path(source).is_dir():
            destination.symlink_to(source, target_is_directory=True)
        else:
            # Absolute paths inside the file point into the container: map them to tmp_path.
            text = Path(source).read_text(encoding="utf-8")
            destination.write_text(
                text.replace("/run/secrets/", str(tmp_path / "run" / "secrets") + "/")
            )
    config = tmp_path / "etc" / "mcp-gateway" / "gateway.yaml"
    env = {**os.environ, "GATEWAY_INTROSPECTION_SECRET": "example"}
    result = subprocess.run(
        [sys.executable, "-m", "gateway.commands", "check", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "demo" not in result.stderr


def test_the_dockerfile_says_podman_must_build_with_the_docker_format() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    assert "podman build --format docker" in dockerfile
    assert "\nHEALTHCHECK " in dockerfile
