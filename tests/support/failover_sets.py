"""Broker sets under automatic failover for tests: a 3-member etcd cluster and brokers that elect their master in it.

With network namespaces (root and iproute2) every etcd member and every broker runs on a host of its own
(``tests/support/netns.py``), the name server on the bridge in the test's own namespace, so a test can cut chosen
links (``tests/support/partitions.py``); elsewhere everything runs on 127.0.0.1 and tests that need a partition
skip. The set's state is read straight from etcd (``state()``), as an operator would with ``etcdctl``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import aetcd
import orjson
import pytest

from sievemq.ha.etcd_set import set_prefix
from sievemq.ha.set_state import ReplicaInfo, SetState
from tests.support.etcd_cluster import EtcdCluster
from tests.support.netns import Host, NoNamespaces, hosts
from tests.support.procs import Proc, attach_process_logs, broker_proc, free_port
from tests.support.replica_sets import until

__all__ = ["FailoverSet", "fset"]

BROKER_PORT = 10911
ROOT = "/sievemq-test"
FAST = (
    "--sync-flush-timeout-ms", "1500",
    "--ha-max-time-slave-not-catchup", "3000",
    "--register-broker-interval-seconds", "1",
)  # fmt: skip
"""Timings that make a lost replica show within seconds; the lease (``controllerLeaseSeconds``) keeps its default."""


class FailoverSet:
    """A name server, an etcd cluster and the brokers of ``broker-a`` (ids 1, 2, 3...), each on a host of its own
    where namespaces work."""

    def __init__(self, tmp: Path, net: list[Host] | None, etcd: EtcdCluster) -> None:
        self.tmp = tmp
        self.net = net
        self.etcd = etcd
        self.procs: dict[int, Proc] = {}
        self.hosts: dict[int, Host | None] = {}
        # the name server on a host of its own (the 7th), so that a test can cut clients (this process, on the
        # bridge) off a broker while the broker still reaches the name server
        ns_host = net[6].ip if net else "127.0.0.1"
        port = 9876 if net else free_port()
        self.ns = Proc(["namesrv", "--listen-host", ns_host, "--listen-port", str(port), "--broker-expire-seconds",
                        "6", "--scan-interval-seconds", "1", "--etcd-endpoints", ";".join(etcd.endpoints),
                        "--etcd-root", ROOT], port, tmp / "namesrv.log", host=ns_host,
                       prefix=net[6].prefix() if net else [])  # fmt: skip
        """The name server, RocketMQ's controller too (``mqadmin getSyncStateSet -a``...), from the same etcd."""
        self.ns.start()
        self.prefix = set_prefix(ROOT, "DefaultCluster", "broker-a").encode()

    @property
    def namesrv(self) -> str:
        """The name server's address."""
        return self.ns.addr

    @property
    def clients_ip(self) -> str:
        """Where this test process (the clients) reaches the hosts from: the bridge's address."""
        assert self.net is not None, "this test needs network namespaces"
        return f"10.231.{self.net[0].ip.split('.')[2]}.254"

    @property
    def namespaces(self) -> bool:
        """True when every process runs on a host of its own."""
        return self.net is not None

    def broker(self, bid: int, *extra: str, role: str = "SYNC_MASTER") -> Proc:
        """Broker ``bid`` of broker-a (not started; the same id later is the same store and host)."""
        if bid not in self.hosts:
            self.hosts[bid] = self.net[3 + len(self.hosts)] if self.net else None
        host = self.hosts[bid]
        args = ("--controller-mode", "etcd", "--etcd-endpoints", ";".join(self.etcd.endpoints), "--etcd-root", ROOT,
                "--broker-id", str(bid), "--broker-role", role, *FAST, *extra)  # fmt: skip
        label = f"broker-{bid}"
        if host is None:
            p = broker_proc(self.tmp, self.namesrv, "broker-a", *args, label=label)
        else:
            p = broker_proc(self.tmp, self.namesrv, "broker-a", *args, label=label, port=BROKER_PORT,
                            ha_port=BROKER_PORT + 1, host=host.ip, prefix=host.prefix())  # fmt: skip
        p.ready_text = None  # it listens once etcd gave it a role
        self.procs[bid] = p
        return p

    def host(self, bid: int) -> Host:
        """The host broker ``bid`` runs on (namespaces only)."""
        host = self.hosts.get(bid)
        assert host is not None, "this test needs network namespaces"
        return host

    def addr(self, bid: int) -> str:
        """Broker ``bid``'s remoting address."""
        return self.procs[bid].addr

    # ------------------------------------------------------------------------------------------ etcd
    async def _read(self) -> tuple[SetState | None, dict[int, ReplicaInfo]]:
        last: Exception | None = None
        for endpoint in self.etcd.endpoints:
            host, _, port = endpoint.rpartition(":")
            try:
                async with aetcd.Client(host=host, port=int(port), timeout=2) as c:
                    rows = await asyncio.wait_for(c.get_prefix(self.prefix), 3.0)
            except Exception as e:  # a member killed or cut off by the test: ask the next
                last = e
                continue
            state, alive = None, {}
            for kv in rows:
                key = bytes(kv.key)
                if key == self.prefix + b"state":
                    state = SetState.from_json(bytes(kv.value))
                elif key.startswith(self.prefix + b"brokers/"):
                    info = ReplicaInfo.from_json(bytes(kv.value))
                    alive[info.broker_id] = info
            return state, alive
        raise ConnectionError(f"no etcd member answered: {last}")

    async def request_handover(self, bid: int) -> None:
        """Ask the master to hand the set over to broker ``bid`` (what ``mqadmin electMaster`` does)."""
        host, _, port = self.etcd.endpoints[0].rpartition(":")
        async with aetcd.Client(host=host, port=int(port), timeout=3) as c:
            await c.put(self.prefix + b"handover", orjson.dumps({"brokerId": bid, "requestedAt": 0}))

    async def state(self) -> SetState | None:
        """The set's state in etcd now."""
        return (await self._read())[0]

    async def current(self) -> SetState:
        """The set's state in etcd now (it has one: a broker started)."""
        st = await self.state()
        assert st is not None, "the set has no state in etcd"
        return st

    async def alive(self) -> dict[int, ReplicaInfo]:
        """The brokers whose liveness key is in etcd now."""
        return (await self._read())[1]

    async def wait_state(self, ok: Callable[[SetState], bool], what: str, timeout: float = 60.0) -> SetState:
        """Poll etcd until the state satisfies ``ok``."""

        async def probe() -> SetState | None:
            s = await self.state()
            return s if s is not None and ok(s) else None

        return await until(probe, timeout, what)

    async def wait_in_sync(self, *ids: int, timeout: float = 60.0) -> SetState:
        """Until every broker of ``ids`` is in the SyncStateSet."""
        return await self.wait_state(lambda s: set(ids) <= s.sync_state_set, f"brokers {ids} in sync", timeout)

    def close(self) -> None:
        """Stop every process (SIGCONT first: a test may have stopped one)."""
        for p in [*self.procs.values(), self.ns]:
            if p.popen is not None and p.popen.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    p.popen.send_signal(18)  # SIGCONT
                p.stop(timeout=15.0)

    def all_procs(self) -> list[Proc]:
        """The name server and the brokers (for their logs)."""
        return [self.ns, *self.procs.values()]


SETS = pytest.StashKey[FailoverSet]()


@pytest.fixture
def fset(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[FailoverSet]:
    """An etcd cluster of 3 and a name server; brokers are added by the test; on 7 hosts where namespaces work."""
    with contextlib.ExitStack() as stack:
        net: list[Host] | None = None
        if os.environ.get("SIEVEMQ_TEST_NETNS") != "0":
            with contextlib.suppress(NoNamespaces):
                net = stack.enter_context(hosts(7))
        cluster = EtcdCluster(tmp_path / "etcd", 3, net[:3] if net else None)
        stack.callback(cluster.close)
        cluster.start()
        sets = FailoverSet(tmp_path, net, cluster)
        stack.callback(sets.close)
        request.node.stash[SETS] = sets
        yield sets


def attach_logs(item: pytest.Item, report: pytest.TestReport) -> None:
    """Attach the processes' logs of the test's ``fset`` to its failed report."""
    sets = item.stash.get(SETS, None)
    if report.failed and sets is not None:
        attach_process_logs(report, sets.all_procs(), 12_000)
        sets.etcd.attach_logs(report)
