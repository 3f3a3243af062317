"""A broker with a low ``ulimit -n`` takes and serves messages for more queues than it may have files open
(docs/many-topics.md): queues past its budget are closed and opened again, start-up after kill -9 opens them one
after the other, and a clean stop's summary lets the next start open none.

Before: every consume-queue file stayed memory-mapped (two descriptors and a map each) and was allocated whole
(6 MB), so this broker failed with EMFILE after ~150 queues, and 1,200 small queues took 7 GB of disk.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import orjson

from sievemq.protocol.route import TopicConfig
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.connection import Connection
from tests.integration.conftest import Cluster, OpenConn
from tests.integration.helpers import call, max_offset, pull_all
from tests.support import wire
from tests.support.procs import Proc, broker_proc

NOFILE = 300
"""The broker's soft RLIMIT_NOFILE: its budget is a quarter of it (75 files)."""
TOPICS = 300
QUEUES = 4


def open_fds(proc: Proc) -> int:
    assert proc.popen is not None
    return len(os.listdir(f"/proc/{proc.popen.pid}/fd"))


def cq_blocks(store: Path) -> int:
    total = 0
    for d, _, files in os.walk(store / "consumequeue"):
        total += sum(os.stat(os.path.join(d, f)).st_blocks * 512 for f in files)
    return total


def start(cluster: Cluster, ns: Proc, again: Proc | None = None) -> Proc:
    if again is not None:
        proc = Proc(list(again.args), again.port, again.log_path, ready_text=again.ready_text, nofile=NOFILE)
    else:
        proc = broker_proc(cluster.tmp, ns.addr, "broker-m", "--mapped-file-size-consume-queue-entries", "300000")
        proc.nofile = NOFILE
    cluster.procs.append(proc)
    return proc.start()


async def send_all(conn: Connection, tag: str) -> None:
    sem = asyncio.Semaphore(32)

    async def one(t: int, q: int) -> None:
        async with sem:
            r = await wire.send_message(conn, f"Many{t:04d}", f"{tag}-{t}-{q}".encode(), queue_id=q)
            assert r.code == ResponseCode.SUCCESS and r.queue_id == q, r

    await asyncio.gather(*(one(t, q) for t in range(TOPICS) for q in range(QUEUES)))


async def read_all(conn: Connection, per_queue: list[str]) -> None:
    for t in range(TOPICS):
        for q in range(QUEUES):
            got = [m.body.decode() for m in await pull_all(conn, f"Many{t:04d}", q)]
            assert got == [f"{tag}-{t}-{q}" for tag in per_queue], (t, q, got)


async def test_more_queues_than_open_files_are_served_across_restarts(cluster: Cluster, open_conn: OpenConn) -> None:
    ns = cluster.namesrv()
    broker = start(cluster, ns)
    conn = await open_conn(broker)
    configs = [TopicConfig(f"Many{t:04d}", QUEUES, QUEUES).to_json() for t in range(TOPICS)]
    resp = await call(conn, RequestCode.UPDATE_AND_CREATE_TOPIC_LIST, body=orjson.dumps({"topicConfigList": configs}))
    assert resp.code == ResponseCode.SUCCESS, resp

    await send_all(conn, "a")  # 1,200 queues: four times what the broker may hold open
    assert open_fds(broker) < NOFILE
    await read_all(conn, ["a"])
    store = cluster.store_dir(broker)
    assert cq_blocks(store) <= TOPICS * QUEUES * 4096, "a small queue takes a page of disk, not 6 MB"

    broker.kill9()
    broker = start(cluster, ns, broker)
    conn = await open_conn(broker)
    await read_all(conn, ["a"])
    await send_all(conn, "b")
    assert open_fds(broker) < NOFILE
    await read_all(conn, ["a", "b"])

    assert broker.stop() == 0
    assert (store / "consumequeue" / ".summary").is_file(), "a clean stop summarises the queues"
    broker = start(cluster, ns, broker)
    conn = await open_conn(broker)
    assert not (store / "consumequeue" / ".summary").exists(), "the next start read it and deleted it"
    assert await max_offset(conn, "Many0299", 3) == 2
    await read_all(conn, ["a", "b"])
    assert open_fds(broker) < NOFILE
    assert "EMFILE" not in broker.log() and "Too many open files" not in broker.log()
