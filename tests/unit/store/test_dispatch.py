"""Dispatch on its own: a queue table and an index in a folder, messages dispatched by hand (no store, no loop)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sievemq.filter.tags import tag_code
from sievemq.protocol.message import MessageExt, encode_record, read_record_summary
from sievemq.protocol.sysflag import TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE
from sievemq.store import SCHEDULE_TOPIC, CqExtUnit, parse_levels
from sievemq.store.consume_queue import ConsumeQueue
from sievemq.store.consume_queue_ext import is_ext_address
from sievemq.store.dispatch import BitmapCalculator, Dispatcher
from sievemq.store.index_file import IndexService
from sievemq.store.queues import QueueTable

LEVELS = parse_levels("1s 5s 10s")


class Rig:
    def __init__(self, root: Path) -> None:
        self.queues = QueueTable(root / "consumequeue", root / "consumequeue_ext", 16, 4096)
        self.index = IndexService(root / "index", 16, 64)
        self.written: list[ConsumeQueue] = []
        self.d = Dispatcher(self.queues, self.index, delay_levels=LEVELS, bitmap_length=2,
                            on_queue_written=self.written.append)  # fmt: skip
        self.heard: list[tuple[str, int, int, int]] = []
        self.d.add_listener(lambda t, q, o, code, props: self.heard.append((t, q, o, code)))

    def close(self) -> None:
        self.queues.close()
        self.index.close()


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    r = Rig(tmp_path)
    yield r
    r.close()


def message(topic: str = "T", qid: int = 0, qoff: int = 0, phy: int = 0, *, tags: str | None = "A",
            sys_flag: int = 0, **props: str) -> MessageExt:  # fmt: skip
    p = dict(props)
    if tags is not None:
        p["TAGS"] = tags
    return MessageExt(topic, b"x", properties=p, queue_id=qid, queue_offset=qoff, commit_log_offset=phy,
                      sys_flag=sys_flag, store_timestamp=5000)  # fmt: skip


def entries(rig: Rig, topic: str = "T", qid: int = 0) -> list[tuple[int, int, int]]:
    cq = rig.queues.find(topic, qid)
    assert cq is not None
    return [e for i in range(cq.max_offset) if (e := cq.entry(i)) is not None]


def test_entry_keys_and_listener(rig: Rig) -> None:
    rig.d.dispatch(message(KEYS="k1  k2", UNIQ_KEY="U1"), 0, 100)
    rig.d.dispatch(message(qoff=1, tags=None), 100, 50)
    rig.d.batch_done()  # the keys of a put are indexed at its end
    assert entries(rig) == [(0, 100, tag_code("A")), (100, 50, 0)]
    assert rig.heard == [("T", 0, 0, tag_code("A")), ("T", 0, 1, 0)]
    assert [len(rig.written), rig.written[0] is rig.queues.find("T", 0)] == [2, True]
    for key in ("k1", "k2", "U1"):
        assert rig.index.lookup(f"T#{key}", 10, 0, 1 << 62) == [0]
    assert rig.index.lookup("T#", 10, 0, 1 << 62) == []  # the double space makes no empty key


def test_schedule_topic_slot_is_the_delivery_time(rig: Rig) -> None:
    rig.d.dispatch(message(SCHEDULE_TOPIC, qid=1), 0, 100)  # queue 1 = level 2 = 5 s
    assert entries(rig, SCHEDULE_TOPIC, 1) == [(0, 100, 5000 + 5000)]


@pytest.mark.parametrize("flag", [TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE])
def test_prepared_and_rolled_back_get_no_entry_but_keys(rig: Rig, flag: int) -> None:
    rig.d.dispatch(message(sys_flag=flag, KEYS="k"), 0, 100)
    rig.d.batch_done()
    assert rig.queues.find("T", 0) is None and rig.heard == []
    assert rig.index.lookup("T#k", 10, 0, 1 << 62) == [0]


def test_a_failing_listener_does_not_stop_dispatch(rig: Rig) -> None:
    def boom(*a: object) -> None:
        raise RuntimeError("listener bug")

    rig.d.add_listener(boom)
    rig.d.dispatch(message(), 0, 100)
    rig.d.dispatch(message(qoff=1), 100, 100)
    assert len(entries(rig)) == 2 and len(rig.heard) == 2


def test_bitmaps_become_units_and_bad_ones_do_not(rig: Rig) -> None:
    answers: list[bytes | Exception | None] = [b"\x01\x02", None, b"\x01", RuntimeError("calc bug"), b"\x00\x00"]

    def calc(topic: str, props: dict[str, str], tags: str | None) -> bytes | None:
        a = answers.pop(0)
        if isinstance(a, Exception):
            raise a
        return a

    rig.d.set_bitmap_calculator(calc)
    for i in range(5):
        rig.d.dispatch(message(qoff=i), i * 100, 100)
    cq = rig.queues.find("T", 0)
    assert cq is not None
    slots = [e[2] for e in entries(rig)]
    assert [is_ext_address(s) for s in slots] == [True, False, False, False, True]
    assert cq.ext_unit(0) == CqExtUnit(tag_code("A"), 5000, b"\x01\x02")
    assert cq.ext_unit(4) == CqExtUnit(tag_code("A"), 5000, b"\x00\x00")  # "no group matched" is kept
    assert rig.heard[0][3] == tag_code("A")  # listeners always get the real code


def test_schedule_topic_never_gets_units(rig: Rig) -> None:
    calc: BitmapCalculator = lambda topic, props, tags: b"\x01\x01"  # noqa: E731
    rig.d.set_bitmap_calculator(calc)
    rig.d.dispatch(message(SCHEDULE_TOPIC), 0, 100)
    assert not is_ext_address(entries(rig, SCHEDULE_TOPIC)[0][2])


def test_redo_keeps_existing_entries_and_tells_no_listener(rig: Rig) -> None:
    m0, m1 = message(KEYS="k"), message(qoff=1, KEYS="k")
    rec0 = encode_record(m0)
    m1.commit_log_offset = len(rec0)
    rec1 = encode_record(m1)
    rig.d.dispatch(m0, 0, len(rec0))
    rig.heard.clear()
    buf = rec0 + rec1
    for s in (read_record_summary(buf, 0), read_record_summary(buf, len(rec0))):
        rig.d.redo(s, True, False)
    assert [e[0] for e in entries(rig)] == [0, len(rec0)] and rig.heard == []
    rig.d.dispatch_summary(read_record_summary(rec0 + rec1, len(rec0)))  # a copy of a record already there
    assert len(entries(rig)) == 2 and rig.heard == []


def test_copied_records_notify_listeners(rig: Rig) -> None:
    rec = encode_record(message(tags="B"))
    rig.d.dispatch_summary(read_record_summary(rec))
    assert entries(rig) == [(0, len(rec), tag_code("B"))] and rig.heard == [("T", 0, 0, tag_code("B"))]


def test_unsafe_topic_names_never_become_folders(rig: Rig, tmp_path: Path) -> None:
    for bad in ("..", ".", "a/b", "", "x\x00"):
        with pytest.raises(ValueError):
            rig.queues.get_or_create(bad, 0)
        assert rig.queues.remove_topic(bad) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing created, nothing deleted


def _state(rig: Rig, topic: str) -> tuple[object, ...]:
    cq = rig.queues.find(topic, 0)
    ents = entries(rig, topic) if cq is not None else []
    keys = {k: rig.index.lookup(f"{topic}#{k}", 100, 0, 1 << 62) for k in ("k0", "k1", "k7", "u3", "u20")}
    return ents, list(rig.heard), keys, [q.topic for q in rig.written][-1:]


@pytest.mark.parametrize("with_bitmaps", [False, True])
def test_a_run_dispatches_as_one_message_at_a_time(tmp_path: Path, with_bitmaps: bool,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """``dispatch_run`` (entries written together) leaves what ``dispatch`` of each message leaves: entries (across
    a file end too), listener calls, keys."""
    one, run = Rig(tmp_path / "one"), Rig(tmp_path / "run")
    runs: list[int] = []
    real_run = ConsumeQueue.append_run

    def counted(cq: ConsumeQueue, queue_offset: int, packed: bytes) -> bool:
        ok = real_run(cq, queue_offset, packed)
        runs.append(len(packed) // 20 if ok else 0)
        return ok

    monkeypatch.setattr(ConsumeQueue, "append_run", counted)
    if with_bitmaps:
        for r in (one, run):
            r.d.set_bitmap_calculator(lambda topic, props, tags: b"\x01\x02" if tags == "B" else None)
    try:
        qoff = phy = 0
        for size in (1, 3, 5, 9, 4):  # 22 entries: the second file (16 per file) starts inside a batch
            batch = [message(qoff=qoff + i, phy=phy + 100 * i, tags=["A", "B", None, "Zz"][(qoff + i) % 4],
                             KEYS=f"k{(qoff + i) % 8}", UNIQ_KEY=f"u{qoff + i}") for i in range(size)]  # fmt: skip
            for m in batch:
                one.d.dispatch(m, m.commit_log_offset, 100)
            one.d.batch_done()
            run.d.dispatch_run(batch, [100] * size)
            run.d.batch_done()
            qoff += size
            phy += 100 * size
        assert _state(run, "T") == _state(one, "T")
        assert len(entries(run, "T")) == 22
        if not with_bitmaps:
            assert runs == [3, 5, 0, 4], runs  # the batch across the file end went one by one
        else:
            assert runs == [], runs  # every batch holds a message with a bitmap (tag B): one by one
    finally:
        one.close()
        run.close()
