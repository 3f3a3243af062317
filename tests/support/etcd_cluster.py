"""A real etcd cluster for tests: N members (3 by default) as processes of Debian's ``etcd`` (3.4).

Each member runs on a ``Host`` of its own (``tests/support/netns.py``: a network namespace, the member listening on
the host's address with etcd's usual ports 2379/2380) or, without hosts, on 127.0.0.1 with free ports of this
pytest-xdist worker's range (``procs.free_port``). Data directories and logs live under the given folder; a
member's log survives its restarts (appended), so a failed test can attach them (``attach_logs``).

The cluster is probed over etcd's HTTP/JSON gateway (``/v3/maintenance/status``, ``/v3/kv/range``) with plain
``urllib``: every method is synchronous and returns within its timeout. An async test that keeps other tasks running
meanwhile calls the waiting ones through ``asyncio.to_thread``.
"""

from __future__ import annotations

import base64
import concurrent.futures
import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support.netns import Host, NoNamespaces, hosts
from tests.support.procs import free_port

__all__ = [
    "CLIENT_PORT",
    "PEER_PORT",
    "EtcdCluster",
    "EtcdMember",
    "EtcdUnavailable",
    "attach_logs",
    "etcd",
    "etcd_cluster",
    "etcd_hosts",
]

CLIENT_PORT, PEER_PORT = 2379, 2380
"""The ports of a member on a host of its own (every namespace has its own ports)."""
_PROBE_KEY = base64.b64encode(b"__sievemq_etcd_probe__").decode()
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))
"""The probes talk to the members directly, whatever ``http_proxy`` says."""


class EtcdUnavailable(RuntimeError):
    """etcd is not installed here (the reason is the message)."""


@dataclass
class EtcdMember:
    """One member: ``name`` (``m0``..), where it listens, its data directory and log; ``popen`` while it runs."""

    name: str
    ip: str
    client_port: int
    peer_port: int
    data_dir: Path
    log_path: Path
    prefix: list[str] = field(default_factory=list)
    popen: subprocess.Popen[bytes] | None = None
    member_id: str | None = None
    """etcd's id of the member (decimal, as the JSON gateway prints it), known once it answered a status."""
    paused: bool = False

    @property
    def endpoint(self) -> str:
        """``ip:port`` of its client URL."""
        return f"{self.ip}:{self.client_port}"

    @property
    def client_url(self) -> str:
        return f"http://{self.ip}:{self.client_port}"

    @property
    def peer_url(self) -> str:
        return f"http://{self.ip}:{self.peer_port}"

    @property
    def running(self) -> bool:
        """Its process exists (it may be paused)."""
        return self.popen is not None and self.popen.poll() is None

    def log(self) -> str:
        """What it logged so far (every run of it)."""
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""


class EtcdCluster:
    """N etcd members, started by ``start()`` and all stopped by ``close()`` (also as a context manager).

    Members are numbered 0..N-1 in every method, in the order of ``hosts`` when given.
    """

    def __init__(
        self,
        tmp: Path,
        n: int = 3,
        hosts: Sequence[Host] | None = None,
        *,
        heartbeat_ms: int = 100,
        election_ms: int = 1000,
        extra: Sequence[str] = (),
    ) -> None:
        if shutil.which("etcd") is None:
            raise EtcdUnavailable("etcd is not installed (Debian's etcd-server; scripts/test.sh installs it as root)")
        if hosts is not None and len(hosts) < n:
            raise ValueError(f"{n} members need {n} hosts, got {len(hosts)}")
        self.tmp = tmp
        self.heartbeat_ms = heartbeat_ms
        self.election_ms = election_ms
        self.extra = list(extra)
        self.token = f"sievemq-{os.getpid()}-{time.monotonic_ns()}"
        self.members: list[EtcdMember] = []
        for i in range(n):
            name = f"m{i}"
            if hosts is not None:
                ip, cport, pport, prefix = hosts[i].ip, CLIENT_PORT, PEER_PORT, hosts[i].prefix()
            else:
                cport = free_port()  # the port after it is free too: the peer port
                ip, pport, prefix = "127.0.0.1", cport + 1, []
            self.members.append(
                EtcdMember(name, ip, cport, pport, tmp / f"etcd-{name}", tmp / f"etcd-{name}.log", prefix)
            )

    # --- what tests read ---

    @property
    def endpoints(self) -> list[str]:
        """``ip:port`` of every member's client URL, in member order."""
        return [m.endpoint for m in self.members]

    @property
    def urls(self) -> list[str]:
        """``http://ip:port`` of every member's client URL, in member order."""
        return [m.client_url for m in self.members]

    def logs(self) -> list[Path]:
        """Every member's log file, in member order."""
        return [m.log_path for m in self.members]

    def attach_logs(self, report: Any, limit: int = 12_000) -> None:
        """Add the tail of each member's log to a (failed) pytest report."""
        for m in self.members:
            text = m.log()
            if len(text) > limit:
                text = "...\n" + text[-limit:]
            report.sections.append((f"etcd log {m.log_path.name}", text))

    # --- processes ---

    def start(self, timeout: float = 60.0) -> EtcdCluster:
        """Start every member and wait until the cluster has a leader and every member serves a linearizable read."""
        for i in range(len(self.members)):
            self._spawn(i)
        self.wait_healthy(len(self.members), timeout)
        return self

    def _spawn(self, i: int) -> None:
        m = self.members[i]
        assert not m.running, f"etcd member {i} is already running"
        initial = ",".join(f"{o.name}={o.peer_url}" for o in self.members)
        args = [
            "etcd",
            "--name", m.name,
            "--data-dir", str(m.data_dir),
            "--listen-client-urls", m.client_url,
            "--advertise-client-urls", m.client_url,
            "--listen-peer-urls", m.peer_url,
            "--initial-advertise-peer-urls", m.peer_url,
            "--initial-cluster", initial,
            "--initial-cluster-state", "new",  # ignored once the data directory holds the member (a restart)
            "--initial-cluster-token", self.token,
            "--heartbeat-interval", str(self.heartbeat_ms),
            "--election-timeout", str(self.election_ms),
            "--pre-vote",  # (etcd 3.5's default) a member back from a partition does not unseat the leader
            "--logger", "zap",
            "--log-outputs", "stderr",
            *self.extra,
        ]  # fmt: skip
        env = {k: v for k, v in os.environ.items() if not k.startswith("ETCD")}
        self.tmp.mkdir(parents=True, exist_ok=True)
        with open(m.log_path, "ab") as log:
            log.write(f"--- {time.strftime('%H:%M:%S')} {' '.join(args)}\n".encode())
            log.flush()
            m.popen = subprocess.Popen(
                [*m.prefix, *args], stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        m.paused = False

    def kill(self, i: int) -> None:
        """SIGKILL member ``i`` (an unclean stop) and reap it."""
        m = self.members[i]
        if m.popen is not None and m.popen.poll() is None:
            m.popen.send_signal(signal.SIGKILL)
            m.popen.wait()
        m.paused = False

    def restart(self, i: int, wait: bool = True, timeout: float = 30.0) -> None:
        """Start member ``i`` again on its data directory (killing it first if it runs); with ``wait``, until it
        serves a linearizable read (it rejoined the cluster and sees a leader)."""
        self.kill(i)
        self._spawn(i)
        if wait:
            self._until(lambda: self.read_ok(i), timeout, f"etcd member {i} serving again after its restart")

    def pause(self, i: int) -> None:
        """SIGSTOP member ``i`` (a process that hangs: its connections stay open, nothing answers)."""
        m = self.members[i]
        assert m.popen is not None and m.running, f"etcd member {i} is not running"
        m.popen.send_signal(signal.SIGSTOP)
        m.paused = True
        stat = Path(f"/proc/{m.popen.pid}/stat")  # the signal is delivered later: wait until the member is stopped
        self._until(lambda: stat.read_text().rpartition(")")[2].split()[0] in ("T", "t"), 10.0,
                    f"etcd member {i} stopped")  # fmt: skip

    def resume(self, i: int) -> None:
        """SIGCONT member ``i``."""
        m = self.members[i]
        if m.popen is not None and m.running:
            m.popen.send_signal(signal.SIGCONT)
        m.paused = False

    def close(self) -> None:
        """Stop every member this cluster started (SIGCONT, then SIGKILL: a test cluster keeps nothing)."""
        for m in self.members:
            if m.popen is not None and m.popen.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    m.popen.send_signal(signal.SIGCONT)
                    m.popen.send_signal(signal.SIGKILL)
        for m in self.members:
            if m.popen is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    m.popen.wait(10)
            m.paused = False

    def __enter__(self) -> EtcdCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- probes (over the JSON gateway) ---

    def _post(self, i: int, path: str, body: dict[str, Any], timeout: float) -> dict[str, Any] | None:
        m = self.members[i]
        if not m.running or m.paused:
            return None
        req = urllib.request.Request(
            f"{m.client_url}{path}", json.dumps(body).encode(), {"Content-Type": "application/json"}
        )
        try:
            with _NO_PROXY.open(req, timeout=timeout) as r:
                out: dict[str, Any] = json.loads(r.read())
        except (OSError, urllib.error.URLError, ValueError):  # refused, timed out, an error answer (HTTP 5xx)
            return None
        return out

    def status(self, i: int, timeout: float = 2.0) -> dict[str, Any] | None:
        """Member ``i``'s own status (``leader``, ``raftTerm``, ``header.member_id``, ...), None when it does not
        answer (stopped, paused, or not within ``timeout``). Answers even without a quorum."""
        st = self._post(i, "/v3/maintenance/status", {}, timeout)
        if st is not None:
            self.members[i].member_id = st.get("header", {}).get("member_id")
        return st

    def read_ok(self, i: int, timeout: float = 3.0) -> bool:
        """True when a linearizable read through member ``i`` completes within ``timeout`` (it needs a quorum)."""
        return self._post(i, "/v3/kv/range", {"key": _PROBE_KEY}, timeout) is not None

    def leader(self) -> int | None:
        """The member that a majority of all members names as their leader (each asked for its status), else None.

        A member cut off from the others may still name itself or an old leader: it alone is no majority."""
        n = len(self.members)
        with concurrent.futures.ThreadPoolExecutor(n) as pool:
            statuses = list(pool.map(self.status, range(n)))
        votes: dict[str, int] = {}
        for st in statuses:
            lead = (st or {}).get("leader", "0")
            if lead != "0":
                votes[lead] = votes.get(lead, 0) + 1
        for lead, count in votes.items():
            if count > n // 2:
                for i, m in enumerate(self.members):
                    if m.member_id == lead:
                        return i
        return None

    def wait_leader(self, timeout: float = 30.0, not_: int | None = None) -> int:
        """Wait until a majority names one leader (other than member ``not_``, when given); its index."""

        def probe() -> int | None:
            lead = self.leader()
            return None if lead is None or lead == not_ else lead

        other = f" other than member {not_}" if not_ is not None else ""
        found: int = self._until(probe, timeout, f"an etcd leader{other}")
        return found

    def healthy(self) -> list[int]:
        """The members that serve a linearizable read right now."""
        n = len(self.members)
        with concurrent.futures.ThreadPoolExecutor(n) as pool:
            ok = list(pool.map(self.read_ok, range(n)))
        return [i for i in range(n) if ok[i]]

    def wait_healthy(self, min_members: int | None = None, timeout: float = 30.0) -> int:
        """Wait until a majority names one leader and at least ``min_members`` members (default: a majority) serve a
        linearizable read; the leader's index."""
        want = len(self.members) // 2 + 1 if min_members is None else min_members
        state: dict[str, Any] = {}

        def probe() -> int | None:
            state["healthy members"] = healthy = self.healthy()
            state["leader"] = lead = self.leader()
            return lead if lead is not None and len(healthy) >= want else None

        found: int = self._until(probe, timeout, f"an etcd leader and {want} members serving", state)
        return found

    def _until(self, probe: Any, timeout: float, what: str, state: dict[str, Any] | None = None) -> Any:
        """Call ``probe()`` until it returns something other than None or False; an AssertionError naming
        ``what`` (and ``state``, what the probe saw last) after ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            got = probe()
            if got is not None and got is not False:
                return got
            if time.monotonic() > deadline:
                exited = [i for i, m in enumerate(self.members) if m.popen is not None and m.popen.poll() is not None]
                raise AssertionError(f"{what} not reached within {timeout}s (last: {state or {}}, exited: {exited})")
            time.sleep(0.1)


@contextlib.contextmanager
def etcd_cluster(tmp: Path, n: int = 3, hosts: Sequence[Host] | None = None, **kw: Any) -> Iterator[EtcdCluster]:
    """A started ``EtcdCluster``; every member is killed on exit, whatever happened."""
    cluster = EtcdCluster(tmp, n, hosts, **kw)
    try:
        yield cluster.start()
    finally:
        cluster.close()


CLUSTERS = pytest.StashKey[list[EtcdCluster]]()


def attach_logs(item: pytest.Item, report: pytest.TestReport) -> None:
    """Attach the etcd logs of the test's clusters (the ``etcd`` fixture's) to its failed report."""
    if report.failed:
        for cluster in item.stash.get(CLUSTERS, []):
            cluster.attach_logs(report)


@pytest.fixture
def etcd_hosts() -> Iterator[list[Host] | None]:
    """Three hosts of their own (network namespaces) where the machine allows, else None (127.0.0.1);
    ``SIEVEMQ_TEST_NETNS=0`` asks for None."""
    if os.environ.get("SIEVEMQ_TEST_NETNS") == "0":
        yield None
        return
    with contextlib.ExitStack() as stack:
        net: list[Host] | None = None
        with contextlib.suppress(NoNamespaces):
            net = stack.enter_context(hosts(3))
        yield net


@pytest.fixture
def etcd(tmp_path: Path, etcd_hosts: list[Host] | None, request: pytest.FixtureRequest) -> Iterator[EtcdCluster]:
    """A started 3-member cluster, one member on each of ``etcd_hosts`` (or on 127.0.0.1); always stopped."""
    cluster = EtcdCluster(tmp_path / "etcd", 3, etcd_hosts)
    request.node.stash.setdefault(CLUSTERS, []).append(cluster)  # its logs, should even the start fail
    try:
        yield cluster.start()
    finally:
        cluster.close()
