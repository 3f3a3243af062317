"""Test certificates made on the fly (``sievemq.cli.devcert.issue``, on the ``cryptography`` package): a CA, a server
certificate for 127.0.0.1 signed by it, client certificates, and an unrelated CA that nobody trusts."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sievemq.cli.devcert import Issued, issue

KEY_PASSWORD = "s3cret-pass"
SERVER_HOSTS = ("127.0.0.1", "localhost")


@dataclass(frozen=True)
class Certs:
    """The files of one test's PKI."""

    ca: Issued
    server: Issued
    client: Issued
    """Signed by ``ca``."""
    rogue_ca: Issued
    rogue_client: Issued
    """Signed by ``rogue_ca``: a client certificate no server trusts."""
    rogue_server: Issued
    """Self-signed, for 127.0.0.1: a server certificate no client trusts."""
    encrypted: Issued
    """A server certificate signed by ``ca`` whose key is encrypted with ``KEY_PASSWORD``."""


def make_certs(folder: Path) -> Certs:
    """Write a fresh PKI under ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)

    def at(name: str) -> tuple[Path, Path]:
        return folder / f"{name}.pem", folder / f"{name}.key"

    ca = issue(*at("ca"), "test CA", ca=True)
    rogue_ca = issue(*at("rogue-ca"), "rogue CA", ca=True)
    return Certs(
        ca=ca,
        server=issue(*at("server"), "sievemq test server", hosts=SERVER_HOSTS, issuer=ca),
        client=issue(*at("client"), "sievemq test client", issuer=ca),
        rogue_ca=rogue_ca,
        rogue_client=issue(*at("rogue-client"), "rogue client", issuer=rogue_ca),
        rogue_server=issue(*at("rogue-server"), "rogue server", hosts=SERVER_HOSTS),
        encrypted=issue(*at("encrypted"), "sievemq test server", hosts=SERVER_HOSTS, issuer=ca, password=KEY_PASSWORD),
    )
