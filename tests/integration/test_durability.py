"""kill -9 under SYNC_FLUSH: every acknowledged message survives, intact, and offsets continue after it."""

from __future__ import annotations

import asyncio
import os
import re

from sievemq.broker.topics import stored_topics
from sievemq.client import api
from sievemq.errors import SieveError
from sievemq.protocol.batch import BatchEntry
from sievemq.protocol.msgid import parse_offset_msg_id
from sievemq.remoting.codes import ResponseCode
from sievemq.remoting.connection import Connection, connect
from tests.integration.conftest import CQ_ENTRIES_PER_FILE, Cluster, OpenConn
from tests.integration.helpers import (
    assert_found_by_key_and_id,
    create_topic,
    dirty_pages,
    max_offset,
    pull_all,
    wait_held,
)
from tests.support import wire

TOPIC = "DurableTopic"
QUEUES = 4
SENDERS = 4
# Small segments: the stream crosses several commit-log files before the kill.
SEGMENT = 64 * 1024


Acked = tuple[str, int, int, bytes, str]  # msgId, queue id, queue offset, body, key


async def _sender(conn: Connection, n: int, acked: list[Acked], stop: asyncio.Event) -> None:
    i = 0
    while not stop.is_set():
        body = f"sender{n}-msg{i:06d}-".encode() + bytes([i % 251]) * (100 + i % 300)
        try:
            r = await wire.send_message(conn, TOPIC, body, queue_id=n % QUEUES, keys=[f"k{n}-{i}"], timeout=5.0)
        except SieveError:
            return  # the broker died under us: this one was never acknowledged
        assert r.code == ResponseCode.SUCCESS, r
        acked.append((r.msg_id, r.queue_id, r.queue_offset, body, f"k{n}-{i}"))
        i += 1


async def test_kill9_under_sync_flush_keeps_every_acknowledged_message(cluster: Cluster, open_conn: OpenConn) -> None:
    ns = cluster.namesrv()
    broker = cluster.broker(ns.addr, "broker-d", flush="SYNC_FLUSH", segment=SEGMENT)
    admin = await open_conn(broker)
    await create_topic(admin, TOPIC, queues=QUEUES)

    conns = [await connect("127.0.0.1", broker.port) for _ in range(SENDERS)]
    acked: list[Acked] = []
    stop = asyncio.Event()
    tasks = [asyncio.create_task(_sender(c, n, acked, stop)) for n, c in enumerate(conns)]
    try:
        # Let the stream run until it has crossed a few segments, then kill the broker mid-stream.
        while len(acked) < 1500:
            await asyncio.sleep(0.01)
            assert not any(t.done() for t in tasks), [t.exception() for t in tasks if t.done()]
        broker.kill9()
        await asyncio.wait_for(asyncio.gather(*tasks), 10.0)
    finally:
        stop.set()
        for c in conns:
            c.close()
    store = cluster.store_dir(broker)
    segments = sorted((store / "commitlog").iterdir())
    assert len(segments) >= 3, f"expected the stream to roll segments, found {[p.name for p in segments]}"
    assert (store / "abort").exists(), "kill -9 leaves the abort mark"

    broker = cluster.restart(broker)
    conn = await open_conn(broker)

    # Every acknowledged message is back: same queue offset, same msgId (commit-log offset), same body.
    stored = {q: {m.queue_offset: m for m in await pull_all(conn, TOPIC, q)} for q in range(QUEUES)}
    missing, wrong = [], []
    for msg_id, qid, qoff, body, _key in acked:
        m = stored[qid].get(qoff)
        if m is None:
            missing.append((qid, qoff, msg_id))
        elif (m.offset_msg_id, m.body) != (msg_id, body) or m.body_crc == 0:
            wrong.append((qid, qoff, msg_id, m.offset_msg_id))
    assert not missing, f"{len(missing)} of {len(acked)} acknowledged messages lost, e.g. {missing[:5]}"
    assert not wrong, f"{len(wrong)} acknowledged messages changed, e.g. {wrong[:5]}"

    # The index and lookups by id were rebuilt too: the last acknowledged messages are found by key and id.
    for msg_id, _qid, _qoff, body, key in acked[-8:]:
        await assert_found_by_key_and_id(conn, TOPIC, msg_id, key, body)

    # Queues have no holes, and new sends continue right after what survived.
    for q in range(QUEUES):
        offsets = sorted(stored[q])
        assert offsets == list(range(len(offsets))), f"queue {q} has holes"
        last_acked = max((o for _, qid, o, _, _ in acked if qid == q), default=-1)
        assert len(offsets) >= last_acked + 1
        assert await max_offset(conn, TOPIC, q) == len(offsets)
        r = await wire.send_message(conn, TOPIC, b"after-crash", queue_id=q)
        assert r.queue_offset == len(offsets)
        _, _, phy = parse_offset_msg_id(r.msg_id)
        assert all(phy > parse_offset_msg_id(m.offset_msg_id)[2] for m in stored[q].values())

    # The restarted store says it recovered from an unclean stop.
    assert re.search(r"store recovery \(unclean stop\)", broker.log()), "no recovery line in the broker log"


async def test_sync_flush_acknowledges_a_send_only_after_it_is_on_disk(cluster: Cluster, open_conn: OpenConn) -> None:
    """Under SYNC_FLUSH the reply waits for the fsync covering the message: right after a send is acknowledged,
    the page-cache pages holding its record are clean (written back), which cachestat(2) shows.

    (kill -9 alone cannot tell, since the page cache outlives the process; a power loss would.)
    """
    # Control: on this filesystem an fdatasync'ed file has no dirty pages, an unsynced one has.
    probe = cluster.tmp / "fs-probe"
    probe.write_bytes(b"p" * 8192)
    assert dirty_pages(probe) > 0, "precondition: fresh writes show as dirty page-cache pages"
    fd = os.open(probe, os.O_RDWR)
    try:
        os.fdatasync(fd)
    finally:
        os.close(fd)
    assert dirty_pages(probe) == 0, "precondition: the tmp filesystem must write back on fdatasync (not tmpfs)"

    ns = cluster.namesrv()
    sync_broker = cluster.broker(ns.addr, "broker-sync", flush="SYNC_FLUSH")
    async_broker = cluster.broker(ns.addr, "broker-async", "--flush-interval-commitlog-ms", "60000")
    results = {}
    for proc in (sync_broker, async_broker):
        conn = await open_conn(proc)
        await create_topic(conn, "FsyncTopic", queues=1)
        segments = cluster.store_dir(proc) / "commitlog"
        dirty = []
        for i in range(10):
            r = await wire.send_message(conn, "FsyncTopic", b"d" * 300 + str(i).encode(), queue_id=0)
            _, _, phy = parse_offset_msg_id(r.msg_id)
            seg = max(p for p in segments.iterdir() if int(p.name) <= phy)
            dirty.append(dirty_pages(seg, phy - int(seg.name), 400))
        results[proc.args[proc.args.index("--broker-name") + 1]] = dirty
    # The async broker (flushing once a minute) shows what "not yet on disk" looks like, so the probe works.
    assert any(results["broker-async"]), f"async-flush pages should be dirty right after a send: {results}"
    assert not any(results["broker-sync"]), (
        f"SYNC_FLUSH acknowledged sends whose pages were still dirty (not fsynced): dirty pages per send {results}"
    )


async def test_consume_queue_file_roll_with_long_polling_and_restarts(cluster: Cluster, open_conn: OpenConn) -> None:
    """A queue longer than one consume-queue file (2000 entries here) reads across the file boundary, a pull held
    exactly at the boundary wakes when the next file starts, and both survive a clean stop and a kill -9."""
    ns = cluster.namesrv()
    broker = cluster.broker(ns.addr, "broker-cq")
    conn = await open_conn(broker)
    await create_topic(conn, "CqRoll", queues=1)
    n = CQ_ENTRIES_PER_FILE
    for start in range(0, n, 300):  # batches that straddle the file boundary
        count = min(300, n - start)
        await wire.send_batch(
            conn,
            "CqRoll",
            [BatchEntry(body=f"r{start + i}".encode(), properties={"TAGS": "T"}) for i in range(count)],
            queue_id=0,
        )
    assert await max_offset(conn, "CqRoll", 0) == n

    puller = await open_conn(broker)
    pull = asyncio.create_task(api.pull_message(puller, "cq-group", "CqRoll", 0, n, suspend_ms=10_000, timeout=15))
    await wait_held(conn, pull)
    await wire.send_message(conn, "CqRoll", f"r{n}".encode(), queue_id=0)
    r = await asyncio.wait_for(pull, 2.0)
    assert r.code == ResponseCode.SUCCESS and [m.body for m in r.messages] == [f"r{n}".encode()]

    expected = [f"r{i}".encode() for i in range(n + 1)]
    assert [m.body for m in await pull_all(conn, "CqRoll", 0)] == expected
    r = await api.pull_message(conn, "cq-group", "CqRoll", 0, n - 5, max_nums=32)
    assert [m.queue_offset for m in r.messages][:6] == list(range(n - 5, n + 1))[: len(r.messages)]

    assert broker.stop() == 0
    broker = cluster.restart(broker)
    conn = await open_conn(broker)
    assert [m.body for m in await pull_all(conn, "CqRoll", 0)] == expected

    broker.kill9()
    broker = cluster.restart(broker)
    conn = await open_conn(broker)
    assert [m.body for m in await pull_all(conn, "CqRoll", 0)] == expected
    assert (await wire.send_message(conn, "CqRoll", b"next", queue_id=0)).queue_offset == n + 1


async def test_a_send_that_creates_its_topic_is_acknowledged_after_the_topic_is_on_disk(
    cluster: Cluster, open_conn: OpenConn
) -> None:
    """An auto-created topic (and a dead-letter topic a send makes) is in ``config/topics.json`` when the send that
    made it is acknowledged: a ``kill -9`` right after the answer keeps the topic and so its message readable.

    (The topic's table was written by a helper thread after the answer; a master killed within that window came
    back holding the message under a topic it did not know: nobody could read it.)
    """
    ns = cluster.namesrv()
    broker = cluster.broker(ns.addr, "broker-t")
    conn = await open_conn(broker)
    topics_file = cluster.store_dir(broker) / "config" / "topics.json"
    created = []
    for i in range(5):
        topic = f"MadeBySend{i}"
        r = await wire.send_message(conn, topic, b"first-" + str(i).encode(), queue_id=0)
        assert r.code == ResponseCode.SUCCESS, r
        assert topic in stored_topics(topics_file.parent), f"{topic} acknowledged before config/ held it"
        created.append(topic)
    broker.kill9()
    broker = cluster.restart(broker)
    conn = await open_conn(broker)
    for i, topic in enumerate(created):
        assert [m.body for m in await pull_all(conn, topic, 0)] == [b"first-" + str(i).encode()]
