"""The HTTP port of standalone roles: given, derived from the listen port by default, off with 0, and a clear error
that stops the role when it is taken (docs/metrics.md §1)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from sievemq.remoting.connection import connect
from tests.integration.conftest import Cluster
from tests.integration.helpers import eventually
from tests.support import wire
from tests.support.metric_names import naming_problems
from tests.support.metrics import Scrape, fetch, scrape
from tests.support.procs import Proc, dev_proc, free_port, proxy_proc


async def _logged(proc: Proc, text: str) -> None:
    """Wait until the process printed ``text`` (a role prints its metrics URL once its HTTP port serves)."""
    await eventually(lambda: text in proc.log(), timeout=10, what=f"{text!r} in {proc.log_path.name}")


def _port_pair() -> tuple[int, int]:
    """A free port whose next port is free too (the name server's derived HTTP port is listenPort + 1)."""
    port = free_port()  # checks port + 1 as well
    return port, port + 1


async def test_name_server_and_broker_serve_their_own_metrics(cluster: Cluster) -> None:
    ns_http, br_http = free_port(), free_port()
    ns = cluster.namesrv("ns", "--http-listen-port", str(ns_http))
    broker = cluster.broker(ns.addr, "broker-a", "--http-listen-port", str(br_http))
    await _logged(ns, f"metrics on http://127.0.0.1:{ns_http}/metrics")
    await _logged(broker, f"metrics on http://127.0.0.1:{br_http}/metrics")

    async def registered() -> Scrape | None:
        s = await scrape(f"http://127.0.0.1:{ns_http}")
        return s if s.value("sievemq_namesrv_brokers") == 1 else None

    s = await eventually(registered, timeout=10, what="the broker counted by the name server")
    assert s.find("sievemq_build_info")[0].labels["roles"] == "namesrv"
    assert not s.find("sievemq_messages_in_total"), "a name server has no broker metrics"
    assert naming_problems(s.text) == []

    conn = await connect("127.0.0.1", broker.port)
    try:
        await wire.send_message(conn, "Alone", b"x", queue_id=0)
        b = await scrape(f"http://127.0.0.1:{br_http}")
        assert b.find("sievemq_build_info")[0].labels["roles"] == "broker"
        assert b.value("sievemq_messages_in_total", topic="Alone") == 1
        assert b.value("sievemq_connections", role="broker") >= 1
        assert not b.find("sievemq_namesrv_brokers"), "a broker has no name-server metrics"
        assert b.value("sievemq_replication_slaves") == 0
        assert naming_problems(b.text) == []
    finally:
        conn.close()


async def test_the_default_http_port_follows_the_listen_port_and_zero_turns_it_off(cluster: Cluster) -> None:
    port, derived = _port_pair()
    env = {"SIEVEMQ_HTTP_LISTEN_PORT": "-1"}  # the default, which the tests' processes are started without
    ns = cluster._start(Proc(["namesrv", "--listen-port", str(port)], port, cluster.tmp / "ns.log", env=env))
    await _logged(ns, f"metrics on http://127.0.0.1:{derived}/metrics")
    s = await scrape(f"http://127.0.0.1:{derived}")
    assert s.value("sievemq_namesrv_brokers") == 0

    off = cluster.namesrv("ns-off", "--http-listen-port", "0")
    await _logged(off, "sievemq name server listening on")  # printed after the HTTP port would have started
    assert "metrics on" not in off.log()


@pytest.mark.parametrize("role", ["namesrv", "broker"])
def test_a_taken_http_port_stops_a_standalone_role_with_the_reason(cluster: Cluster, role: str) -> None:
    port = free_port()
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", port))
        holder.listen()
        args = ["--listen-port", str(free_port()), "--http-listen-port", str(port)]
        if role == "broker":
            args += ["--namesrv-addr", "", "--store-path-root-dir", str(cluster.tmp / "store"), "--ha-listen-port",
                     str(free_port())]  # fmt: skip
        out = subprocess.run([sys.executable, "-m", "sievemq.cli", role, *args], capture_output=True, text=True,
                             timeout=60)  # fmt: skip
    assert out.returncode != 0, out.stdout
    why = (f"cannot listen for HTTP (/metrics, /healthz) on 127.0.0.1:{port}: the port is taken; set httpListenPort "
           "(--http-listen-port) to a free port, or 0 to turn the HTTP port off")  # fmt: skip
    assert why in out.stderr, out.stderr
    if role == "broker":
        assert not (cluster.tmp / "store" / "abort").exists(), "the broker stopped cleanly before exiting"


async def test_proxy_counts_calls_on_its_own_port(cluster: Cluster) -> None:
    ns = cluster.namesrv()
    http = free_port()
    proxy = proxy_proc(cluster.tmp, ns.addr)
    proxy.args += ["--http-listen-port", str(http)]
    cluster._start(proxy)
    await _logged(proxy, f"metrics on http://127.0.0.1:{http}/metrics")
    s = await scrape(f"http://127.0.0.1:{http}")
    assert s.find("sievemq_build_info")[0].labels["roles"] == "proxy"
    assert s.value("sievemq_proxy_consumers") == 0
    assert naming_problems(s.text) == []
    status, _, text = fetch(f"http://127.0.0.1:{http}/healthz")
    assert status == 200 and '"roles":["proxy"]' in text, text


def listening_ports(pid: int) -> set[int]:
    """The TCP ports process ``pid`` listens on (its sockets in LISTEN state, from /proc)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                cols = line.split()
                if cols[3] == "0A" and cols[9] in inodes:  # 0A: TCP_LISTEN
                    ports.add(int(cols[1].rsplit(":", 1)[1], 16))
    return ports


def _fresh(cluster: Cluster, name: str) -> Path:
    """A folder of its own for one more dev (its own log and data)."""
    (cluster.tmp / name).mkdir()
    return cluster.tmp / name


def test_dev_http_port_zero_turns_it_off_and_http_listen_port_sets_it_when_the_flag_is_absent(cluster: Cluster) -> None:
    """``sievemq dev --http-port 0``: no HTTP port and no URL in the banner, whatever ``httpListenPort`` says.
    Without the flag, ``httpListenPort`` of the ``--config`` TOML (or ``SIEVEMQ_HTTP_LISTEN_PORT``) is dev's one
    HTTP port, and ``0`` there turns it off too."""
    toml_port, env_port = free_port(), free_port()
    toml = cluster.tmp / "broker.toml"
    toml.write_text(f"httpListenPort = {toml_port}\n")
    proc = dev_proc(cluster.tmp, "--config", str(toml), http=False)
    proc.env["SIEVEMQ_HTTP_LISTEN_PORT"] = str(env_port)
    dev = cluster._start(proc)
    assert dev.popen is not None
    log = dev.log()
    assert "/metrics" not in log and "  dashboard " not in log, log
    ports = listening_ports(dev.popen.pid)
    grpc_port = int(str(dev.extra["grpc"]).rsplit(":", 1)[1])
    roles = {dev.port, int(str(dev.extra["namesrv_port"])), grpc_port}
    assert roles <= ports, f"the roles' ports {roles} are among those found listening {ports}"
    ha = {dev.port + 1, dev.port - 2}  # the broker's HA port and VIP channel
    assert ports - roles - ha == set(), f"dev listens on {ports - roles - ha} besides its roles' ports"
    assert dev.stop() == 0

    for where in ("toml", "env"):
        port = free_port()
        if where == "toml":
            toml.write_text(f"httpListenPort = {port}\n")
            proc = dev_proc(_fresh(cluster, where), "--config", str(toml), http=None)
            proc.env["SIEVEMQ_HTTP_LISTEN_PORT"] = None  # type: ignore[assignment]  # the TOML's, not the tests' 0
        else:
            proc = dev_proc(_fresh(cluster, where), http=None)
            proc.env["SIEVEMQ_HTTP_LISTEN_PORT"] = str(port)
        dev = cluster._start(proc)
        assert f"http://127.0.0.1:{port}/metrics" in dev.log(), (where, dev.log())
        assert dev.popen is not None and port in listening_ports(dev.popen.pid), where
        assert dev.stop() == 0

    toml.write_text("httpListenPort = 0\n")
    proc = dev_proc(_fresh(cluster, "toml-0"), "--config", str(toml), http=None)
    proc.env["SIEVEMQ_HTTP_LISTEN_PORT"] = None  # type: ignore[assignment]
    dev = cluster._start(proc)
    assert "/metrics" not in dev.log() and dev.popen is not None
    grpc_port = int(str(dev.extra["grpc"]).rsplit(":", 1)[1])
    roles = {dev.port, int(str(dev.extra["namesrv_port"])), grpc_port}
    assert listening_ports(dev.popen.pid) - roles - {dev.port + 1, dev.port - 2} == set()
