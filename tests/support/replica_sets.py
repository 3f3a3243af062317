"""Master/slave sets of real brokers for tests, on hosts of their own where the machine allows.

With root and ``ip``, every broker runs in its own network namespace (``tests/support/netns.py``): a host with
its own address, whose network a test can cut or slow down. The name server runs in the test's own namespace on
the bridge, where every host and the test reach it. Elsewhere the brokers are processes on 127.0.0.1, and the test
run's header says so (``SIEVEMQ_TEST_NETNS=0`` asks for that); tests that need a real network fault then skip,
saying why.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sievemq.admin.api import AdminClient
from sievemq.client import api
from sievemq.protocol.message import MessageExt
from sievemq.protocol.msgid import parse_offset_msg_id
from sievemq.remoting.codes import ResponseCode
from sievemq.remoting.connection import connect
from tests.support.netns import Host, NoNamespaces, hosts
from tests.support.procs import Proc, attach_process_logs, broker_proc, free_port

BROKER_PORT = 10911
"""Inside a namespace every host has its own ports: the brokers take RocketMQ's usual ones."""
FAST = (
    "--ha-send-heartbeat-interval", "500",
    "--ha-housekeeping-interval", "3000",
    "--sync-flush-timeout-ms", "1500",
    "--register-broker-interval-seconds", "1",
)  # fmt: skip
"""Replication timings scaled down so that faults show within seconds."""
_MODE: list[str] = []


def _namespaces_off() -> bool:
    return os.environ.get("SIEVEMQ_TEST_NETNS") == "0"


def _probe_mode() -> str:
    if _namespaces_off():
        return "127.0.0.1 (SIEVEMQ_TEST_NETNS=0)"
    try:
        with hosts(1):
            return "network namespaces"
    except NoNamespaces as e:
        return f"127.0.0.1 (no network namespaces: {e})"


def mode() -> str:
    """Where ``rsets`` runs its brokers (for the test run's header)."""
    if not _MODE:
        _MODE.append(_probe_mode())
    return _MODE[0]


class ReplicaSets:
    """A name server and brokers, each on its own host when ``net`` hosts exist; everything stops at the end."""

    def __init__(self, tmp: Path, net: list[Host] | None) -> None:
        self.tmp = tmp
        self.net = net
        self.procs: list[Proc] = []
        self.where: dict[str, Host | None] = {}
        ns_host = f"10.231.{net[0].ip.split('.')[2]}.254" if net else "127.0.0.1"
        port = free_port()
        self.ns = Proc(["namesrv", "--listen-host", ns_host, "--listen-port", str(port), "--broker-expire-seconds",
                        "6", "--scan-interval-seconds", "1"], port, tmp / "namesrv.log", host=ns_host)  # fmt: skip
        self.procs.append(self.ns.start())
        self._free = list(net or [])

    @property
    def namesrv(self) -> str:
        """The name server's address."""
        return self.ns.addr

    @property
    def namespaces(self) -> bool:
        """True when the brokers run on hosts of their own."""
        return self.net is not None

    def broker(self, label: str, role: str, broker_id: int = 0, *extra: str, name: str = "broker-a") -> Proc:
        """A broker (not started); the same ``label`` later is the same store (and the same host)."""
        if label not in self.where:
            self.where[label] = self._free.pop(0) if self.net else None
        host = self.where[label]
        role_args = ("--broker-role", role, "--broker-id", str(broker_id))
        if host is None:
            p = broker_proc(self.tmp, self.namesrv, name, *role_args, *FAST, *extra, label=label)
        else:
            p = broker_proc(self.tmp, self.namesrv, name, *role_args, *FAST, *extra, label=label, port=BROKER_PORT,
                            ha_port=BROKER_PORT + 1, host=host.ip, prefix=host.prefix())  # fmt: skip
        self.procs.append(p)
        return p

    def host(self, label: str) -> Host:
        """The host a broker runs on (namespaces only)."""
        host = self.where.get(label)
        assert host is not None, "this test needs network namespaces"
        return host

    def close(self) -> None:
        """Stop every process (SIGCONT first: a test may have stopped one)."""
        for p in reversed(self.procs):
            if p.popen is not None and p.popen.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    p.popen.send_signal(18)  # SIGCONT
                p.stop(timeout=10.0)


@pytest.fixture
def rsets(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[ReplicaSets]:
    """Hosts (4, where namespaces work) and a name server; always removed."""
    with contextlib.ExitStack() as stack:
        net: list[Host] | None = None
        if not _namespaces_off():
            with contextlib.suppress(NoNamespaces):
                net = stack.enter_context(hosts(4))
        sets = ReplicaSets(tmp_path, net)
        request.node.stash[SETS] = sets
        try:
            yield sets
        finally:
            sets.close()


SETS = pytest.StashKey[ReplicaSets]()


def attach_logs(item: pytest.Item, report: pytest.TestReport) -> None:
    """Attach the processes' logs of the test's ``rsets`` to its failed report."""
    sets = item.stash.get(SETS, None)
    if report.failed and sets is not None:
        attach_process_logs(report, sets.procs, 12_000)


async def set_status(namesrv: str, name: str = "broker-a") -> dict[int, dict[str, Any]]:
    """``sievemq cluster status`` rows of one broker set, by broker id."""
    async with AdminClient(namesrv) as admin:
        return {r["brokerId"]: r for r in await admin.cluster_status() if r["brokerName"] == name}


async def until(probe: Any, timeout: float = 20.0, what: str = "condition") -> Any:
    """Await ``probe()`` until it returns something truthy."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            last = await probe()
        except Exception as e:  # a broker restarting, a route not there yet
            last = e
        else:
            if last:
                return last
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout}s; last: {last!r}")
        await asyncio.sleep(0.1)


async def in_step(namesrv: str, name: str = "broker-a", timeout: float = 20.0) -> dict[int, dict[str, Any]]:
    """Wait until the set's slave follows its master and holds all of it; the status rows."""

    async def probe() -> dict[int, dict[str, Any]] | None:
        rows = await set_status(namesrv, name)
        m, s = rows.get(0), rows.get(1)
        if not (m and s and m.get("slaves") and s.get("state") == "following"):
            return None
        return rows if s["commitLogMaxOffset"] == m["commitLogMaxOffset"] else None

    return dict(await until(probe, timeout, f"slave of {name} in step with its master"))


def commitlog_offset(offset_msg_id: str) -> int:
    """The commit-log offset an offsetMsgId names."""
    return parse_offset_msg_id(offset_msg_id)[2]


async def read_all(addr: str, topic: str, queues: int = 4, group: str = "replication-reader") -> list[MessageExt]:
    """Every message of ``topic`` stored on the broker at ``addr`` (pulled queue by queue from offset 0).

    A queue read ends at its end (PULL_NOT_FOUND, or SUCCESS with nothing); any other answer is an AssertionError
    naming the queue, offset, code and remark, so a test never mistakes a refusal for an empty queue.
    """
    conn = await connect(*split_addr(addr))
    out: list[MessageExt] = []
    try:
        for q in range(queues):
            offset = 0
            while True:
                r = await api.pull_message(conn, group, topic, q, offset, max_nums=256, timeout=10.0)
                if r.code == ResponseCode.SUCCESS and r.messages:
                    out.extend(r.messages)
                    offset = r.next_begin_offset
                    continue
                assert r.code in (ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND), (
                    f"reading {topic} queue {q} on {addr} stopped at offset {offset}: [{r.code}] {r.remark}"
                )
                break
    finally:
        conn.close()
    return out


def split_addr(addr: str) -> tuple[str, int]:
    host, _, port = addr.rpartition(":")
    return host, int(port)
