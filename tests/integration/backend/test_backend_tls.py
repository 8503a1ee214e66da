"""Mutual TLS toward the upstream (RFC 8705 §2): private CA plus a client certificate."""

from __future__ import annotations

import datetime
import ipaddress
import ssl
import time
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from gateway.backend.credentials.tls import build_ssl_context
from gateway.config import TlsConfig
from gateway.errors import ConfigError
from gateway.seams import ToolCall
from tests.integration.backend.helpers import context, make_config, principal
from tests.support.upstreams import ModernUpstream


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


Issuer = tuple[x509.Name, ec.EllipticCurvePrivateKey]


def _cert(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: Issuer | None,
    *,
    ca: bool = False,
    server: bool = False,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    issuer_name, issuer_key = issuer if issuer is not None else (_name(subject), key)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
    elif server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        ).add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
    else:
        builder = builder.add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False
        )
    return builder.sign(issuer_key, hashes.SHA256())


def _write(path: Path, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey | None) -> None:
    path.with_suffix(".crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    if key is not None:
        path.with_suffix(".key").write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )


@pytest.fixture
def pki(tmp_path: Path) -> Path:
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _cert("test-ca", ca_key, None, ca=True)
    _write(tmp_path / "ca", ca, None)
    for name, server in (("server", True), ("client", False)):
        key = ec.generate_private_key(ec.SECP256R1())
        _write(tmp_path / name, _cert(name, key, (ca.subject, ca_key), server=server), key)
    return tmp_path


async def _mtls_upstream(pki: Path, aiohttp_server) -> tuple[ModernUpstream, str]:
    """An upstream that requires a client certificate from the test CA, and its URL."""
    server_ssl = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=pki / "ca.crt")
    server_ssl.load_cert_chain(pki / "server.crt", pki / "server.key")
    server_ssl.verify_mode = ssl.CERT_REQUIRED
    upstream = ModernUpstream()
    server = await aiohttp_server(upstream.app(), ssl=server_ssl)
    return upstream, f"https://127.0.0.1:{server.port}/mcp"


async def test_the_gateway_presents_its_client_certificate_to_an_mtls_upstream(
    pki: Path, aiohttp_server, backend_factory
) -> None:
    _, url = await _mtls_upstream(pki, aiohttp_server)
    tls = TlsConfig(
        ca_file=str(pki / "ca.crt"),
        client_cert=str(pki / "client.crt"),
        client_key=str(pki / "client.key"),
    )
    backend = await backend_factory(make_config(url, tls=tls))
    assert backend.ready
    tool = backend.catalog().get("echo")
    assert tool is not None
    call = ToolCall(tool=tool, arguments={}, era="modern", protocol_version="2026-07-28")
    result = await backend.call_tool(call, principal(), context(), time.monotonic() + 5)
    assert result["isError"] is False


async def test_without_the_client_certificate_the_mtls_upstream_is_unreachable(
    pki: Path, aiohttp_server, backend_factory
) -> None:
    upstream, url = await _mtls_upstream(pki, aiohttp_server)
    backend = await backend_factory(make_config(url, tls=TlsConfig(ca_file=str(pki / "ca.crt"))))
    assert not backend.ready
    assert upstream.requests == []


def test_an_unreadable_certificate_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "bad.crt").write_text("not a certificate")
    with pytest.raises(ConfigError):
        build_ssl_context(TlsConfig(ca_file=str(tmp_path / "bad.crt")))
    assert build_ssl_context(TlsConfig()) is None
