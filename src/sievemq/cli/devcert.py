"""Certificates for development: a self-signed one for ``sievemq dev --tls``, and small CAs for tests.

Needs the ``cryptography`` package (``pip install 'sievemq[tls]'``); nothing else in sievemq does. Keys are
ECDSA P-256, written unencrypted with mode 0600 (or encrypted with a password, to test that path).
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sievemq.errors import ConfigError

DEV_CERT = "dev-cert.pem"
DEV_KEY = "dev-key.pem"
DEFAULT_HOSTS = ("localhost", "127.0.0.1", "::1")


def _crypto() -> Any:
    try:
        from cryptography import x509
    except ImportError:
        raise ConfigError(
            "generating a certificate needs the cryptography package: pip install 'sievemq[tls]' (or give your "
            "own with --tls-cert and --tls-key)"
        ) from None
    return x509


@dataclass(frozen=True)
class Issued:
    """A certificate and its key, as PEM files."""

    cert: Path
    key: Path


def issue(
    cert: Path,
    key: Path,
    name: str,
    *,
    hosts: tuple[str, ...] = (),
    issuer: Issued | None = None,
    ca: bool = False,
    days: float = 365.0,
    password: str = "",
) -> Issued:
    """Write a certificate for ``name`` valid for ``hosts`` (DNS names or IPs), signed by ``issuer`` (self-signed
    without), and its key. ``ca``: a CA certificate that can sign others."""
    x509 = _crypto()
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    private = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    signer: Any = private
    issuer_name = subject
    if issuer is not None:
        signer = serialization.load_pem_private_key(issuer.key.read_bytes(), None)
        issuer_name = x509.load_pem_x509_certificate(issuer.cert.read_bytes()).subject
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer_name)
        .public_key(private.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if not ca:
        eku = [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
        builder = builder.add_extension(x509.ExtendedKeyUsage(eku), critical=False)
    if hosts:
        builder = builder.add_extension(x509.SubjectAlternativeName([_san(x509, h) for h in hosts]), critical=False)
    certificate = builder.sign(signer, hashes.SHA256())
    encryption = serialization.BestAvailableEncryption(password.encode()) if password else serialization.NoEncryption()
    key_pem = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)
    cert.parent.mkdir(parents=True, exist_ok=True)
    key.parent.mkdir(parents=True, exist_ok=True)
    cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(key_pem)
    return Issued(cert, key)


def _san(x509: Any, host: str) -> Any:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def dev_certificate(folder: Path, hosts: tuple[str, ...]) -> Issued:
    """The self-signed certificate of ``sievemq dev --tls`` in ``folder``: kept while it is valid for a day more
    and names every host, else written anew (so clients that trust it keep working across restarts)."""
    cert, key = folder / DEV_CERT, folder / DEV_KEY
    wanted = tuple(dict.fromkeys((*DEFAULT_HOSTS, *hosts)))
    if cert.is_file() and key.is_file() and _still_good(cert, wanted):
        return Issued(cert, key)
    return issue(cert, key, "sievemq dev", hosts=wanted)


def _still_good(cert: Path, hosts: tuple[str, ...]) -> bool:
    x509 = _crypto()
    try:
        certificate = x509.load_pem_x509_certificate(cert.read_bytes())
        names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (ValueError, x509.ExtensionNotFound):
        return False
    have = {str(v) for v in names.get_values_for_type(x509.DNSName)}
    have |= {str(v) for v in names.get_values_for_type(x509.IPAddress)}
    soon = datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=1)
    return certificate.not_valid_after_utc > soon and all(str(_normal(h)) in have for h in hosts)


def _normal(host: str) -> str:
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return host


@dataclass(frozen=True)
class DevTls:
    """The TLS of ``sievemq dev``: the settings of both roles and how clients connect."""

    mode: str
    cert: Path
    key: Path
    generated: bool

    def namesrv(self) -> dict[str, Any]:
        """The name server's TLS settings."""
        return {"tls_mode": self.mode, "tls_server_cert_path": str(self.cert), "tls_server_key_path": str(self.key)}

    def broker(self) -> dict[str, Any]:
        """The broker's: the same, and how it registers with the name server of the same process (over TLS when
        enforcing: tlsEnable auto). A certificate of one's own may not name the host: that loopback connection
        then does not check it."""
        return {
            **self.namesrv(),
            "tls_client_trust_cert_path": str(self.cert),
            "tls_client_auth_server": self.generated,
        }

    def proxy(self) -> dict[str, Any]:
        """The gRPC proxy's: TLS only on its port (gRPC has no permissive mode), with the same certificate, and TLS
        to the name server and broker of the same process."""
        return {
            **self.namesrv(),
            "tls_mode": "enforcing",
            "tls_client_enable": True,
            "tls_client_trust_cert_path": str(self.cert),
            "tls_client_auth_server": self.generated,
        }

    def dashboard(self) -> dict[str, Any]:
        """The dashboard's: TLS to the name server and broker of the same process (its HTTP port stays plain, on
        loopback by default)."""
        return {
            "tls_client_enable": True,
            "tls_client_trust_cert_path": str(self.cert),
            "tls_client_auth_server": self.generated,
        }

    def connect_lines(self, namesrv_addr: str) -> list[str]:
        """How to connect, for the banner."""
        ca = f" --tls-ca {self.cert}" if self.generated else ""
        plain = "TLS and plain TCP" if self.mode == "permissive" else "TLS only"
        kind = "self-signed, made for dev" if self.generated else "given"
        return [
            f"  TLS          {self.mode} ({plain}), certificate {self.cert} ({kind})",
            f"  connect      sievemq topic list -n {namesrv_addr} --tls{ca}",
            f"               Producer({namesrv_addr!r}, tls=True"
            + (f", tls_ca_file={str(self.cert)!r})" if self.generated else ")"),
        ]


def dev_tls(data: Path, hosts: tuple[str, ...], mode: str, cert: str | None, key: str | None) -> DevTls:
    """``sievemq dev``'s TLS: the given certificate and key, else one made in ``data/tls``."""
    if cert or key:
        if not (cert and key):
            raise ConfigError("--tls-cert and --tls-key go together")
        return DevTls(mode, Path(cert), Path(key), generated=False)
    made = dev_certificate(data / "tls", hosts)
    return DevTls(mode, made.cert, made.key, generated=True)
