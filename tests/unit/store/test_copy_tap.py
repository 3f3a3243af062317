"""The replication taps: a second store fed with the first one's commit-log bytes ends up the same."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pytest

from sievemq.protocol.message import decode_record
from sievemq.store import MessageStore, PutStatus, StoreError

from .conftest import HOST, SEG, make_config, msg


def copy_all(src: MessageStore, dst: MessageStore, rnd: random.Random, *, max_chunk: int = 700) -> None:
    """Stream ``src``'s log into ``dst`` from ``dst``'s end, in chunks of random sizes (cut anywhere)."""
    while dst.max_phy_offset < src.max_phy_offset:
        data = src.read_commitlog(dst.max_phy_offset, rnd.randint(1, max_chunk))
        assert data, "a master with more bytes always has some to send"
        assert dst.append_commitlog(dst.max_phy_offset, data) == dst.max_phy_offset


def pulled(s: MessageStore, topic: str, qid: int) -> list[tuple[int, bytes, str | None]]:
    out = []
    off = s.get_min_offset(topic, qid)
    while True:
        r = s.get_message(topic, qid, off, 32, None)
        if not r.records:
            return out
        out += [(m.queue_offset, m.body, m.tags) for m in (decode_record(x)[0] for x in r.records)]
        off = r.next_begin_offset


async def fill(s: MessageStore, n: int) -> None:
    rnd = random.Random(7)
    for i in range(n):
        body = bytes([i % 251]) * rnd.randint(1, 600)  # ~30 segments of 4 KiB: rolls and blank markers
        r = await s.put_message(msg(f"T{i % 3}", body, i % 2, tags=f"t{i % 5}", keys=f"k{i}", uniq=f"U{i:05d}"))
        assert r.status is PutStatus.PUT_OK


async def test_copy_rebuilds_queues_index_and_wakes_listeners(
    open_store: Callable[..., MessageStore], tmp_path: Path
) -> None:
    master = open_store()
    await fill(master, 300)
    slave = MessageStore(make_config(tmp_path / "slave"), ("10.0.0.2", 10911))
    heard: list[tuple[str, int, int]] = []
    slave.add_dispatch_listener(lambda t, q, o, code, props: heard.append((t, q, o)))
    slave.load()
    try:
        copy_all(master, slave, random.Random(1))
        assert slave.max_phy_offset == master.max_phy_offset and slave.min_phy_offset == master.min_phy_offset
        assert slave.topic_queues() == master.topic_queues()
        for topic, qids in master.topic_queues().items():
            for q in qids:
                assert pulled(slave, topic, q) == pulled(master, topic, q)
                assert slave.read_cq_entries(topic, q, 0, 1000) == master.read_cq_entries(topic, q, 0, 1000)
        assert len(heard) == 300 and heard[0] == ("T0", 0, 0)
        for key in ("k0", "k151", "U00299"):
            topic = "T0" if key == "k0" else "T1" if key == "k151" else "T2"
            assert slave.query_message(topic, key, 5, 0, 1 << 62) == master.query_message(topic, key, 5, 0, 1 << 62)
        # records keep the master's offsets: offsetMsgIds computed on either side name the same bytes
        assert slave.look_message_by_offset(0) == master.look_message_by_offset(0)
    finally:
        slave.abandon()


async def test_partial_record_refuses_puts_until_whole(open_store: Callable[..., MessageStore], tmp_path: Path) -> None:
    master = open_store()
    r = await master.put_message(msg("T", b"x" * 300))
    size = r.msgs[0].store_size
    slave = MessageStore(make_config(tmp_path / "slave"), HOST)
    slave.load()
    try:
        slave.append_commitlog(0, master.read_commitlog(0, 100))
        assert slave.get_max_offset("T", 0) == 0  # nothing dispatched from half a record
        assert (await slave.put_message(msg("T", b"local"))).status is PutStatus.SERVICE_NOT_AVAILABLE
        slave.append_commitlog(100, master.read_commitlog(100, size))
        assert slave.get_max_offset("T", 0) == 1
        assert (await slave.put_message(msg("T", b"local"))).status is PutStatus.PUT_OK
    finally:
        slave.abandon()


async def test_bytes_that_do_not_continue_the_log_are_refused(
    open_store: Callable[..., MessageStore], tmp_path: Path
) -> None:
    master = open_store()
    await master.put_message(msg("T", b"x" * 300))
    slave = MessageStore(make_config(tmp_path / "slave"), HOST)
    slave.load()
    try:
        with pytest.raises(StoreError):
            slave.append_commitlog(5, master.read_commitlog(0, 50))  # an empty log starts at a segment start
        with pytest.raises(StoreError):
            slave.append_commitlog(0, b"\x00\x00\x01\x00garbage-not-a-record")
        assert slave.max_phy_offset == 0  # nothing of it kept
        slave.append_commitlog(0, master.read_commitlog(0, 10))
        with pytest.raises(StoreError):
            slave.append_commitlog(50, master.read_commitlog(50, 10))  # a gap
        assert slave.max_phy_offset == 10
    finally:
        slave.abandon()


async def test_a_slave_starting_at_a_later_segment(open_store: Callable[..., MessageStore], tmp_path: Path) -> None:
    """A fresh copy may start at the master's current segment (older ones are not needed)."""
    master = open_store()
    await fill(master, 60)
    start = master.max_phy_offset - master.max_phy_offset % SEG
    slave = MessageStore(make_config(tmp_path / "slave"), HOST)
    slave.load()
    try:
        with pytest.raises(StoreError):
            slave.append_commitlog(start + 1, b"x")
        slave.append_commitlog(start, master.read_commitlog(start, SEG))
        assert slave.min_phy_offset == start and slave.max_phy_offset == master.max_phy_offset
        got = [m for t, qs in slave.topic_queues().items() for q in qs for m in pulled(slave, t, q)]
        want = [m for t, qs in master.topic_queues().items() for q in qs for m in pulled(master, t, q)]
        assert got and set(got) < set(want)  # the messages of the copied segments, at their queue offsets
    finally:
        slave.abandon()


async def test_copy_survives_a_restart_mid_record(open_store: Callable[..., MessageStore], tmp_path: Path) -> None:
    master = open_store()
    await fill(master, 40)
    cfg = make_config(tmp_path / "slave")
    slave = MessageStore(cfg, HOST)
    slave.load()
    half = master.max_phy_offset // 2 + 3  # almost surely inside a record
    while slave.max_phy_offset < half:
        at = slave.max_phy_offset
        slave.append_commitlog(at, master.read_commitlog(at, half - at))
    slave.flush()
    slave.abandon()  # kill -9: the partial record's bytes are on disk
    slave = MessageStore(cfg, HOST)
    slave.load()
    try:
        assert slave.max_phy_offset <= half  # recovery cut the torn record; the copy resumes from there
        copy_all(master, slave, random.Random(3))
        for topic, qids in master.topic_queues().items():
            for q in qids:
                assert pulled(slave, topic, q) == pulled(master, topic, q)
    finally:
        slave.abandon()


async def test_a_deferred_copy_is_dispatched_later_and_never_skipped(
    open_store: Callable[..., MessageStore], tmp_path: Path
) -> None:
    master = open_store()
    await fill(master, 40)
    slave = MessageStore(make_config(tmp_path / "slave"), HOST)
    slave.load()
    try:
        data = master.read_commitlog(0, 3000)  # records of the first segment
        slave.append_commitlog(0, data, defer=True)
        assert slave.max_phy_offset == len(data)  # the bytes are there (what the slave acknowledges)...
        assert slave.topic_queues() == {}  # ...the queues come with dispatch_copied
        slave.dispatch_copied()
        first = {t: [slave.get_max_offset(t, q) for q in qs] for t, qs in slave.topic_queues().items()}
        assert sum(map(sum, first.values())) > 0
        # a deferred copy followed by another append: the first one's records are dispatched before
        rnd = random.Random(3)
        while slave.max_phy_offset < master.max_phy_offset:
            data = master.read_commitlog(slave.max_phy_offset, rnd.randint(1, 900))
            slave.append_commitlog(slave.max_phy_offset, data, defer=rnd.random() < 0.7)
        slave.dispatch_copied()
        for topic, qids in master.topic_queues().items():
            for q in qids:
                assert slave.read_cq_entries(topic, q, 0, 1000) == master.read_cq_entries(topic, q, 0, 1000)
    finally:
        slave.abandon()
