"""Fixtures for the filter server tests: real name server, broker and filter server processes on 127.0.0.1.

The operator's filter module (``shop.filters``) is written into a temporary folder that the filter server gets
as ``--filter-paths``; every process a test starts is stopped at teardown, and its log is attached to a failure.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Generator, Iterator
from pathlib import Path

import pytest

from sievemq.remoting.connection import Connection, connect
from tests.support.procs import Proc, attach_process_logs, broker_proc, free_port, namesrv_proc

LOG_TAIL_CHARS = 20_000
SECRET = "s3cret-shared-with-clients"
ACCOUNT = "shop-team"

SHOP_FILTERS = '''
"""The operator's filter functions (a trusted module installed on the filter server host)."""
import json


def big_eu_orders(msg):
    order = json.loads(msg.body)
    return order["region"] == "eu" and order["amount"] > 100


def tagged_b(msg):
    return msg.tags == "B"


def loop_forever(msg):
    while True:
        pass


def hog_memory(msg):
    hoard = []
    while True:
        hoard.append(bytearray(16 * 1024 * 1024))


def raises(msg):
    raise KeyError("region")


def shows_everything(msg):
    return (msg.topic, msg.tags, msg.keys, msg.properties, msg.body, msg.born_timestamp, msg.store_timestamp,
            msg.queue_id, msg.queue_offset, msg.msg_id) is not None


_private = big_eu_orders
'''

_KEY = pytest.StashKey["FilterCluster"]()


class FilterCluster:
    """The processes of one test."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.procs: list[Proc] = []
        self.filters_dir = tmp / "filters"
        (self.filters_dir / "shop").mkdir(parents=True, exist_ok=True)
        (self.filters_dir / "shop" / "__init__.py").write_text("")
        (self.filters_dir / "shop" / "filters.py").write_text(SHOP_FILTERS)

    def _start(self, proc: Proc) -> Proc:
        self.procs.append(proc)
        return proc.start()

    def namesrv(self) -> Proc:
        """Start a name server."""
        return self._start(namesrv_proc(self.tmp))

    def broker(self, namesrv_addr: str, *extra: str) -> Proc:
        """Start broker-a with small store files."""
        args = ["--mapped-file-size-consume-queue-entries", "2000", *extra]
        return self._start(broker_proc(self.tmp, namesrv_addr, "broker-a", *args))

    def filtersrv(self, broker: Proc, *extra: str, name: str = "filtersrv") -> Proc:
        """Start a filter server for ``broker`` that allows ``shop.filters`` (folder ``tmp/filters``)."""
        port = free_port()
        args = [
            "filtersrv",
            "--broker", broker.addr,
            "--listen-port", str(port),
            "--filter-modules", "shop.filters",
            "--filter-paths", str(self.filters_dir),
            "--register-interval-seconds", "1",
            "--worker-memory-mb", "256",
            *extra,
        ]  # fmt: skip
        return self._start(Proc(args, port, self.tmp / f"{name}.log"))

    def close(self) -> None:
        """Stop every process (newest first)."""
        for proc in reversed(self.procs):
            try:
                proc.stop(timeout=10.0)
            except Exception:
                proc.kill9()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Attach the logs of the test's processes to a failed report."""
    rep = yield
    fc = item.stash.get(_KEY, None)
    if rep.failed and fc is not None:
        attach_process_logs(rep, fc.procs, LOG_TAIL_CHARS)
    return rep


@pytest.fixture
def fc(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[FilterCluster]:
    """A place to start processes; all are stopped when the test ends."""
    c = FilterCluster(tmp_path)
    request.node.stash[_KEY] = c
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
async def conns() -> AsyncIterator[list[Connection]]:
    """Connections to close at the end of the test (append to it)."""
    opened: list[Connection] = []
    yield opened
    for c in opened:
        c.close()


async def open_conn(conns: list[Connection], proc: Proc) -> Connection:
    """A client connection to ``proc``, closed at teardown."""
    conn = await connect("127.0.0.1", proc.port)
    conns.append(conn)
    return conn
