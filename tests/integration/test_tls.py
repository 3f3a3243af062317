"""TLS on real name server and broker processes (tlsMode, client certificates) with sievemq's client and CLI."""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path
from typing import Any

import pytest

from sievemq import Message, Producer
from sievemq.errors import ConnectionClosedError, SieveError
from sievemq.remoting.codes import RequestCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import connect
from sievemq.remoting.tls import ClientTls
from tests.dashboard.conftest import get
from tests.integration.conftest import Cluster
from tests.integration.helpers import eventually
from tests.integration.test_cli import run_cli
from tests.integration.test_tls_loops import closed_after
from tests.support.certs import Certs, make_certs
from tests.support.consume import consume
from tests.support.procs import Proc, free_port

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("pki"))


def server_flags(certs: Certs, mode: str, auth_client: bool = False) -> list[str]:
    flags = ["--tls-mode", mode, "--tls-server-cert-path", str(certs.server.cert)]
    flags += ["--tls-server-key-path", str(certs.server.key)]
    if auth_client:
        flags += ["--tls-server-auth-client", "true", "--tls-server-trust-cert-path", str(certs.ca.cert)]
    return flags


def start(
    cluster: Cluster, certs: Certs, mode: str, *broker_extra: str, auth_client: bool = False
) -> tuple[Proc, Proc]:
    """A name server and a broker in ``mode``; the broker trusts the test CA for its registrations."""
    ns = cluster.namesrv("ns", *server_flags(certs, mode, auth_client))
    trust = ["--tls-client-trust-cert-path", str(certs.ca.cert)]
    broker = cluster.broker(ns.addr, "broker-a", *server_flags(certs, mode, auth_client), *trust, *broker_extra)
    return ns, broker


def trusting(certs: Certs, **more: Any) -> dict[str, Any]:
    return {"tls": True, "tls_ca_file": str(certs.ca.cert), **more}


async def produce(ns: Proc, topic: str, bodies: list[bytes], **tls: Any) -> None:
    async with Producer(ns.addr, f"P{abs(hash(topic)) % 10_000}", **tls) as p:
        for body in bodies:
            await p.send(Message(topic, body))


async def read_bodies(ns: Proc, topic: str, group: str, count: int, **tls: Any) -> set[bytes]:
    return {m.body for m in await consume(ns.addr, topic, group, count, **tls)}


async def refused_plain(proc: Proc) -> None:
    """A plain client's request gets no answer: the connection is closed."""
    conn = await connect("127.0.0.1", proc.port)
    with pytest.raises(ConnectionClosedError):
        await conn.request(RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), 5.0)


def log_lines(proc: Proc, text: str) -> int:
    return sum(text in line for line in proc.log().splitlines())


async def test_enforcing_serves_tls_clients_only(cluster: Cluster, certs: Certs) -> None:
    ns, broker = start(cluster, certs, "enforcing")  # the broker registers over TLS: tlsEnable is auto
    bodies = [f"secret {i}".encode() for i in range(10)]
    await produce(ns, "TlsOnly", bodies, **trusting(certs))
    assert await read_bodies(ns, "TlsOnly", "tls-group", 10, **trusting(certs)) == set(bodies)

    await refused_plain(ns)
    await refused_plain(broker)
    assert log_lines(broker, "not TLS, and tlsMode is enforcing") == 1

    # A client that does not trust the server's certificate is told so.
    untrusting = ClientTls(ca_file=str(certs.rogue_ca.cert)).context()
    with pytest.raises(ConnectionClosedError, match=r"certificate of 127\.0\.0\.1:\d+ is not trusted.*--tls-ca"):
        await connect("127.0.0.1", broker.port, tls=untrusting)
    with pytest.raises(SieveError, match="not trusted"):
        await produce(ns, "TlsOnly", [b"x"], tls=True, tls_ca_file=str(certs.rogue_ca.cert))

    # Failed handshakes close only their connection, and the log stays short (one line per peer IP per 10 s).
    for _ in range(30):
        await asyncio.to_thread(closed_after, broker.port, b"\x16\x03\x01\x00\x05hello")
    await produce(ns, "TlsOnly", [b"after the flood"], **trusting(certs))
    assert log_lines(broker, "closing connection from") == 1, broker.log()  # the plain one above: same IP


async def test_permissive_serves_tls_and_plain_on_one_port(cluster: Cluster, certs: Certs) -> None:
    ns, broker = start(cluster, certs, "permissive")  # the broker registers over plain TCP: tlsEnable is auto
    secure = [f"tls {i}".encode() for i in range(20)]
    plain = [f"plain {i}".encode() for i in range(20)]
    everything = set(secure) | set(plain)
    results = await asyncio.gather(
        produce(ns, "Mixed", secure, **trusting(certs)),
        produce(ns, "Mixed", plain),
        read_bodies(ns, "Mixed", "tls-readers", 40, **trusting(certs)),
        read_bodies(ns, "Mixed", "plain-readers", 40),
    )
    assert results[2] == everything and results[3] == everything
    assert "closing connection" not in broker.log() + ns.log()


async def test_client_certificates_required(cluster: Cluster, certs: Certs) -> None:
    own = ["--tls-client-cert-path", str(certs.client.cert), "--tls-client-key-path", str(certs.client.key)]
    ns, _broker = start(cluster, certs, "enforcing", *own, auth_client=True)  # registers with its own certificate
    with_cert = trusting(certs, tls_cert_file=str(certs.client.cert), tls_key_file=str(certs.client.key))
    await produce(ns, "Mutual", [b"signed"], **with_cert)
    assert await read_bodies(ns, "Mutual", "mutual-group", 1, **with_cert) == {b"signed"}

    for tls in (trusting(certs), trusting(certs, tls_cert_file=str(certs.rogue_client.cert),
                                          tls_key_file=str(certs.rogue_client.key))):  # fmt: skip
        with pytest.raises(SieveError):  # TLS 1.3: the refusal arrives after the client's side of the handshake
            await produce(ns, "Mutual", [b"unsigned"], **tls)
    await eventually(lambda: log_lines(ns, "TLS handshake failed") >= 1, timeout=10, what="the refusal in the log")


async def test_cli_over_tls(cluster: Cluster, certs: Certs) -> None:
    ns, _broker = start(cluster, certs, "enforcing")
    ca = str(certs.ca.cert)
    rc, out, err = await run_cli("produce", "CliTls", "-n", ns.addr, "--tls", "--tls-ca", ca, "-b", "over tls")
    assert rc == 0 and "SEND_OK" in out, err
    env = {"SIEVEMQ_TLS": "1", "SIEVEMQ_TLS_CA": ca}
    rc, out, err = await run_env(env, "topic", "list", "-n", ns.addr)
    assert rc == 0 and re.search(r"^CliTls\s+broker-a:\d+q\s+1 messages$", out, re.M), out + err
    rc, out, err = await run_cli(
        "consume", "CliTls", "-n", ns.addr, "--tls-ca", ca, "--from", "first", "-c", "1", "--timeout", "20"
    )  # fmt: skip  (--tls-ca alone turns TLS on)
    assert rc == 0 and out.strip().endswith("over tls"), out + err

    rc, out, err = await run_cli("topic", "list", "-n", ns.addr)
    assert rc != 0 and "closed" in err, out + err
    rc, out, err = await run_cli("topic", "list", "-n", ns.addr, "--tls")
    assert rc != 0 and "is not trusted" in err and "--tls-insecure" in err, out + err
    rc, out, err = await run_cli("topic", "list", "-n", ns.addr, "--tls-insecure")
    assert rc == 0 and "CliTls" in out, out + err


async def run_env(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        return await run_cli(*args)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


async def test_a_bad_certificate_stops_the_role(tmp_path: Path, certs: Certs) -> None:
    junk = tmp_path / "junk.pem"
    junk.write_text("nothing to see")
    flags = [
        "--tls-mode",
        "enforcing",
        "--tls-server-cert-path",
        str(junk),
        "--tls-server-key-path",
        str(certs.server.key),
    ]
    rc, out, err = await run_cli("namesrv", "--listen-port", "0", *flags)
    assert rc != 0 and "invalid tlsServerCertPath" in err and "a PEM certificate chain" in err, out + err


async def test_dev_with_tls_prints_how_to_connect(cluster: Cluster) -> None:
    dev = cluster.dev("--tls")
    banner = re.search(r"connect +sievemq (topic list -n (\S+) --tls --tls-ca (\S+))", dev.log())
    assert banner is not None, dev.log()
    command, namesrv, ca = banner.groups()
    async with Producer(namesrv, "dev-tls-producer", tls=True, tls_ca_file=ca) as p:
        await p.send(Message("DevTls", b"hi"))
    rc, out, err = await run_cli(*command.split())
    assert rc == 0 and "DevTls" in out, out + err
    await refused_plain(dev)
    # dev's dashboard reaches its TLS-only name server and broker
    (broker,) = get(f"{dev.extra['http']}/api/cluster").json()["brokers"]
    assert broker["state"] == "serving", broker


def dashboard_proc(cluster: Cluster, ns: Proc, name: str, *flags: str) -> str:
    port = free_port()
    proc = Proc(["dashboard", "--namesrv-addr", ns.addr, "--http-port", str(port), *flags], port,
                cluster.tmp / f"{name}.log", ready_text="sievemq dashboard on")  # fmt: skip
    cluster._start(proc)
    return f"http://127.0.0.1:{port}/api"


async def test_the_dashboard_asks_a_tls_cluster_over_tls(cluster: Cluster, certs: Certs) -> None:
    ns, _broker = start(cluster, certs, "enforcing")
    await produce(ns, "BoardTls", [b"seen by the dashboard"], **trusting(certs))
    secure = dashboard_proc(cluster, ns, "board-tls", "--tls-client-enable", "true",
                            "--tls-client-trust-cert-path", str(certs.ca.cert))  # fmt: skip
    assert [b["state"] for b in get(f"{secure}/cluster").json()["brokers"]] == ["serving"]
    topics = get(f"{secure}/topics").json()["topics"]
    assert {t["topic"]: t["messages"] for t in topics} == {"BoardTls": 1}

    plain = dashboard_proc(cluster, ns, "board-plain")  # the name server closes plain connections: a clear 502
    refused = get(f"{plain}/cluster")
    assert refused.status == 502 and refused.json()["error"]["reason"] == "NAMESRV_UNREACHABLE", refused.body

    key_only = ["--tls-client-enable", "true", "--tls-client-key-path", str(certs.client.key)]
    rc, out, err = await run_cli("dashboard", "--namesrv-addr", ns.addr, "--http-port", "0", *key_only)
    assert rc != 0 and "tlsClientCertPath" in err, out + err
