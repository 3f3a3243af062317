"""Fixtures for the integration tests: real sievemq processes on 127.0.0.1 (tests/support/procs.py).

Every process a test starts goes through a ``Cluster``; the fixture always stops them (SIGTERM, then SIGKILL),
and when a test fails (in setup, call or teardown) the log of every process it started is attached to the
failure report.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import pytest

from sievemq.remoting.connection import Connection, RequestHandler, connect
from tests.support.procs import Proc, attach_process_logs, broker_proc, dev_proc, namesrv_proc, proxy_proc

# Small files keep the tests fast and make segment rolls happen.
COMMITLOG_SEGMENT = 256 * 1024
CQ_ENTRIES_PER_FILE = 2000
LOG_TAIL_CHARS = 20_000

_CLUSTER_KEY = pytest.StashKey["Cluster"]()


class Cluster:
    """The processes of one test; each one started through here is stopped at teardown."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.procs: list[Proc] = []

    def _start(self, proc: Proc) -> Proc:
        self.procs.append(proc)
        proc.start()
        return proc

    def namesrv(self, name: str = "ns", *extra: str) -> Proc:
        """Start a name server (``extra``: more flags)."""
        return self._start(namesrv_proc(self.tmp, name, *extra))

    def broker(
        self,
        namesrv_addr: str,
        name: str = "broker-a",
        *extra: str,
        flush: str = "ASYNC_FLUSH",
        port: int | None = None,
        segment: int = COMMITLOG_SEGMENT,
        env: dict[str, str] | None = None,
    ) -> Proc:
        """Start a broker with small commit-log segments and consume-queue files (``env``: added to its environment)."""
        args = [
            "--mapped-file-size-commitlog",
            str(segment),
            "--mapped-file-size-consume-queue-entries",
            str(CQ_ENTRIES_PER_FILE),
            *extra,
        ]
        proc = broker_proc(self.tmp, namesrv_addr, name, *args, flush=flush, port=port)
        proc.env.update(env or {})
        return self._start(proc)

    def proxy(self, namesrv_addr: str, name: str = "proxy", *extra: str) -> Proc:
        """Start ``sievemq proxy`` (gRPC for 5.x clients) in front of ``namesrv_addr`` (``extra``: more flags)."""
        return self._start(proxy_proc(self.tmp, namesrv_addr, name, *extra))

    def dev(self, *extra: str) -> Proc:
        """Start ``sievemq dev`` (data in ``tmp/dev-data``)."""
        return self._start(dev_proc(self.tmp, *extra))

    def restart(self, proc: Proc) -> Proc:
        """Start the same command again (same port, store and log file) after it stopped or was killed."""
        assert proc.popen is not None and proc.popen.poll() is not None, "restart() needs a stopped process"
        again = Proc(list(proc.args), proc.port, proc.log_path, extra=dict(proc.extra))
        return self._start(again)

    def store_dir(self, broker: Proc) -> Path:
        """The broker's ``--store-path-root-dir``."""
        return Path(broker.args[broker.args.index("--store-path-root-dir") + 1])

    def close(self) -> None:
        """Stop every process still running (newest first); kill what does not stop."""
        for proc in reversed(self.procs):
            try:
                proc.stop(timeout=10.0)
            except Exception:
                proc.kill9()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Attach the logs of the test's processes to a failed setup/call/teardown report."""
    rep = yield
    cluster = item.stash.get(_CLUSTER_KEY, None)
    if rep.failed and cluster is not None:
        attach_process_logs(rep, cluster.procs, LOG_TAIL_CHARS)
    return rep


@pytest.fixture
def cluster(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """A place to start processes; all of them are stopped when the test ends, whatever happened."""
    c = Cluster(tmp_path)
    request.node.stash[_CLUSTER_KEY] = c
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def ns(cluster: Cluster) -> Proc:
    """One running name server."""
    return cluster.namesrv()


@pytest.fixture
def broker(cluster: Cluster, ns: Proc) -> Proc:
    """One running broker (broker-a, async flush) registered with ``ns``."""
    return cluster.broker(ns.addr)


OpenConn = Callable[..., Awaitable[Connection]]


@pytest.fixture
async def acl(cluster: Cluster, tmp_path: Path) -> tuple[Proc, Proc, Path]:
    """A name server and a broker with ``aclEnable`` on and the topics of ``acl_cluster.py``; also the file."""
    from tests.integration.acl_cluster import start_acl_cluster

    return await start_acl_cluster(cluster, tmp_path)


@pytest.fixture
async def open_conn() -> AsyncIterator[OpenConn]:
    """``await open_conn(proc_or_port, handler=None)``: a client Connection closed at the end of the test."""
    conns: list[Connection] = []

    async def _open(target: Proc | int, handler: RequestHandler | None = None) -> Connection:
        port = target.port if isinstance(target, Proc) else int(target)
        conn = await connect("127.0.0.1", port, handler=handler)
        conns.append(conn)
        return conn

    yield _open
    for c in conns:
        c.close()
