"""Truncating a stopped store's commit log (``store/truncate.py``) and loading it again with a real ``MessageStore``.

Each store holds messages over three queues of two topics, each message with a key and a unique key (several index
files), extension units with a per-message bitmap (several ``consumequeue_ext`` files per queue), in 4 KiB
segments; what a load serves afterwards is compared with what the store served before, restricted to the records
below the cut.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sievemq.protocol.message import MessageExt, decode_record
from sievemq.store import CqExtUnit, GetStatus, MessageStore, PutStatus, StoreConfig
from sievemq.store.consume_queue_ext import MIN_UNIT_SIZE, decode_address, is_ext_address
from sievemq.store.epochs import EpochHistory, load_epochs, save_epochs
from sievemq.store.truncate import TruncationRefused, plan_truncation, truncate_commitlog

from .conftest import HOST, SEG, make_config, msg

TOPICS = [("T", 0), ("T", 1), ("U", 0)]
BM_LEN = 14
UNIT = MIN_UNIT_SIZE + BM_LEN


def calc(topic: str, props: dict[str, str], tags: str | None) -> bytes | None:
    """A bitmap per message (its number in the first byte): units differ, and a rebuild must recompute them."""
    i = int(props["i"])
    return bytes([i % 256, 0x80 if topic == "U" else 1]) + bytes(BM_LEN - 2)


def config(root: Path, **over: Any) -> StoreConfig:
    over.setdefault("mapped_file_size_cq_ext", 256)  # 7 units a file: several files per queue
    return make_config(root, **over)


@pytest.fixture
def opener() -> Iterator[Callable[[Path], MessageStore]]:
    """``opener(root)`` loads the store at ``root`` with the bitmap calculator set before ``load()``."""
    opened: list[MessageStore] = []

    def factory(root: Path) -> MessageStore:
        s = MessageStore(config(root), HOST)
        s.set_bitmap_calculator(calc)
        s.load()
        opened.append(s)
        return s

    yield factory
    for s in opened:
        if s.available:
            s.abandon()


async def fill(s: MessageStore, n: int, start: int = 0) -> list[MessageExt]:
    out = []
    for i in range(start, start + n):
        topic, qid = TOPICS[i % 3]
        m = msg(topic, b"body-%04d" % i + b"." * 200, qid, tags=f"t{i % 2}", keys=f"key-{i:03d}", uniq=f"U{i:06d}",
                i=str(i))  # fmt: skip
        r = await s.put_message(m)
        assert r.status is PutStatus.PUT_OK
        out.append(r.msgs[0])
    return out


@dataclass
class View:
    """What a store serves: its end, each queue's entries and units, the records found by key."""

    end: int
    entries: dict[tuple[str, int], list[tuple[int, int, int]]]
    units: dict[tuple[str, int], list[CqExtUnit | None]]
    by_key: dict[str, list[bytes]]


def view(s: MessageStore, msgs: list[MessageExt]) -> View:
    entries = {(t, q): s.read_cq_entries(t, q, 0, 10_000) for t, q in TOPICS}
    units = {(t, q): [s.get_cq_ext_unit(t, q, o) for o in range(s.get_max_offset(t, q))] for t, q in TOPICS}
    by_key: dict[str, list[bytes]] = {}
    for i, m in enumerate(msgs):
        by_key[f"key-{i:03d}"] = s.query_message(m.topic, f"key-{i:03d}", 4, 0, 2**62)
        by_key[f"U{i:06d}"] = s.query_message(m.topic, f"U{i:06d}", 4, 0, 2**62)
    return View(s.max_phy_offset, entries, units, by_key)


def cut_view(before: View, cut: int) -> View:
    """``before`` as a store truncated at ``cut`` must serve it."""
    entries = {k: [e for e in v if e[0] < cut] for k, v in before.entries.items()}
    units = {k: v[: len(entries[k])] for k, v in before.units.items()}
    by_key = {k: [r for r in v if decode_record(r)[0].commit_log_offset < cut] for k, v in before.by_key.items()}
    return View(cut, entries, units, by_key)


def assert_nothing_points_past(s: MessageStore, cut: int) -> None:
    """No consume-queue entry, extension unit or index key is left for a record at or past ``cut``."""
    for t, q in TOPICS:
        cq = s.queues.find(t, q)
        assert cq is not None
        n = cq.max_offset
        assert all(cq.phy_at(o) < cut for o in range(cq.mfq.min_offset // 20, n))
        assert cq.ext is not None
        slots = [e[2] for o in range(n) if (e := cq.entry(o)) is not None and is_ext_address(e[2])]
        assert cq.ext.data_end() == (decode_address(slots[-1]) + UNIT if slots else cq.ext.mfq.min_offset), (t, q)
        assert all(f.file_from_offset <= cq.ext.data_end() for f in cq.ext.mfq.files), "no ext file past the data"
    for f in s.index.files:
        assert all(f.entry(k)[1] < cut for k in range(1, f.count + 1))


def folder_bytes(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


async def make_store(root: Path, opener: Callable[[Path], MessageStore], n: int = 90) -> tuple[View, list[MessageExt]]:
    s = opener(root)
    msgs = await fill(s, n)
    before = view(s, msgs)
    await s.shutdown()
    if n >= 90:  # the geometry the tests are about: several files of each kind
        assert len(os.listdir(root / "commitlog")) >= 6
        assert len(os.listdir(root / "index")) >= 2
        assert all(len(os.listdir(root / "consumequeue_ext" / t / str(q))) >= 3 for t, q in TOPICS)
    return before, msgs


async def check_after(s: MessageStore, before: View, msgs: list[MessageExt], cut: int) -> None:
    """``s`` (loaded after a truncation at ``cut``) serves exactly the records below it, and takes new ones at it."""
    assert s.max_phy_offset == cut
    assert view(s, msgs) == cut_view(before, cut)
    assert_nothing_points_past(s, cut)
    kept = [m for m in msgs if m.commit_log_offset < cut]
    for t, q in TOPICS:
        assert s.get_max_offset(t, q) == sum(1 for m in kept if (m.topic, m.queue_id) == (t, q))
    for m in kept:
        r = s.get_message(m.topic, m.queue_id, m.queue_offset, 1, None)
        assert r.status is GetStatus.FOUND and decode_record(r.records[0])[0].body == m.body
    # New puts continue the log (at the cut, or past an end-of-segment marker there) and the queues.
    more = await fill(s, 3, 500)
    first = s.look_message_by_offset(more[0].commit_log_offset)
    assert first is not None
    fits = SEG - cut % SEG >= len(first) + 8
    assert more[0].commit_log_offset == (cut if fits else cut - cut % SEG + SEG)
    for m in more:
        qkept = sum(1 for k in kept if (k.topic, k.queue_id) == (m.topic, m.queue_id))
        assert m.queue_offset == qkept
        r = s.get_message(m.topic, m.queue_id, m.queue_offset, 1, None)
        assert r.status is GetStatus.FOUND and decode_record(r.records[0])[0].body == m.body
        assert s.get_cq_ext_unit(m.topic, m.queue_id, m.queue_offset) is not None
        assert len(s.query_message(m.topic, m.keys[0], 4, 0, 2**62)) == 1


# ------------------------------------------------------------------------------------------------ cutting
async def test_cut_in_the_middle(tmp_path: Path, opener: Callable[[Path], MessageStore]) -> None:
    root = tmp_path / "store"
    before, msgs = await make_store(root, opener)
    cut = msgs[47].commit_log_offset
    assert cut % SEG, "a record inside a segment"
    segments = len(os.listdir(root / "commitlog"))
    assert truncate_commitlog(config(root), cut) == cut
    assert len(os.listdir(root / "commitlog")) == cut // SEG + 1 < segments
    assert (root / "abort").exists(), "the next load recovers the queues and the index"
    s = opener(root)
    assert s.recovery_report is not None and s.recovery_report.abnormal
    await check_after(s, before, msgs, cut)
    # ... and the result survives a clean restart unchanged.
    after = view(s, msgs)
    await s.shutdown()
    s = opener(root)
    assert view(s, msgs) == after


async def test_cut_at_a_segment_start(tmp_path: Path, opener: Callable[[Path], MessageStore]) -> None:
    root = tmp_path / "store"
    before, msgs = await make_store(root, opener)
    cut = next(m.commit_log_offset for m in msgs[20:] if m.commit_log_offset % SEG == 0)
    assert truncate_commitlog(config(root), cut) == cut
    assert not (root / "commitlog" / f"{cut:020d}").exists(), "the segment starting at the cut goes"
    assert (root / "commitlog" / f"{cut - SEG:020d}").exists()
    s = opener(root)
    await check_after(s, before, msgs, cut)


def record_size(root: Path, phy: int) -> int:
    with open(root / "commitlog" / f"{phy - phy % SEG:020d}", "rb") as f:
        f.seek(phy % SEG)
        return int.from_bytes(f.read(4), "big")


async def test_cut_at_an_end_of_segment_marker(tmp_path: Path, opener: Callable[[Path], MessageStore]) -> None:
    root = tmp_path / "store"
    before, msgs = await make_store(root, opener)
    i = next(i for i in range(10, len(msgs)) if msgs[i + 1].commit_log_offset % SEG == 0)
    blank = msgs[i].commit_log_offset + record_size(root, msgs[i].commit_log_offset)
    assert blank % SEG and record_size(root, blank) == SEG - blank % SEG, "the marker fills the segment's rest"
    assert truncate_commitlog(config(root), blank) == blank
    s = opener(root)
    await check_after(s, before, msgs, blank)


async def test_cut_at_the_first_byte_empties_the_log(tmp_path: Path, opener: Callable[[Path], MessageStore]) -> None:
    root = tmp_path / "store"
    before, msgs = await make_store(root, opener, n=30)
    assert truncate_commitlog(config(root), 0) == 0
    assert os.listdir(root / "commitlog") == [f"{0:020d}"]
    s = opener(root)
    await check_after(s, before, msgs, 0)


async def test_cut_at_the_end_changes_nothing(tmp_path: Path, opener: Callable[[Path], MessageStore]) -> None:
    root = tmp_path / "store"
    before, msgs = await make_store(root, opener)
    files = folder_bytes(root)
    assert truncate_commitlog(config(root), before.end) == before.end
    assert folder_bytes(root) == files
    s = opener(root)
    assert s.recovery_report is not None and not s.recovery_report.abnormal
    assert view(s, msgs) == before


@pytest.mark.parametrize("where", ["past the end", "inside a record", "inside a header", "in a blank tail",
                                   "negative", "below the oldest segment"])  # fmt: skip
async def test_refused_offsets_change_nothing(
    tmp_path: Path, opener: Callable[[Path], MessageStore], where: str
) -> None:
    root = tmp_path / "store"
    before, msgs = await make_store(root, opener, n=40)
    i = next(i for i in range(5, len(msgs)) if msgs[i + 1].commit_log_offset % SEG == 0)
    size = msgs[i + 1].commit_log_offset - msgs[i].commit_log_offset  # this record and the blank tail after it
    if where == "below the oldest segment":
        os.unlink(root / "commitlog" / f"{0:020d}")  # as retention deletes the oldest segment
    offset, says = {
        "past the end": (before.end + 1, "past the end of the commit log"),
        "inside a record": (msgs[i].commit_log_offset + 1, "not a record boundary"),
        "inside a header": (msgs[i].commit_log_offset + 4, "not a record boundary"),
        "in a blank tail": (msgs[i + 1].commit_log_offset - 4, "not a record boundary"),
        "negative": (-1, "negative offset"),
        "below the oldest segment": (SEG - 100, "below the oldest byte"),
    }[where]
    assert size > 0
    files = folder_bytes(root)
    with pytest.raises(TruncationRefused, match=says):
        truncate_commitlog(config(root), offset)
    assert folder_bytes(root) == files


def test_a_folder_in_use_is_refused(tmp_path: Path, opener: Callable[[Path], MessageStore]) -> None:
    root = tmp_path / "store"
    opener(root)
    with pytest.raises(TruncationRefused, match="in use by another process"):
        truncate_commitlog(config(root), 0)


def test_an_empty_or_missing_store(tmp_path: Path, opener: Callable[[Path], MessageStore]) -> None:
    assert truncate_commitlog(config(tmp_path / "none"), 0) == 0
    assert not (tmp_path / "none").exists()
    with pytest.raises(TruncationRefused, match="commit log ends at 0"):
        truncate_commitlog(config(tmp_path / "none"), 10)
    s = opener(tmp_path / "empty")
    s.abandon()
    assert truncate_commitlog(config(tmp_path / "empty"), 0) == 0
    with pytest.raises(TruncationRefused, match="past the end"):
        truncate_commitlog(config(tmp_path / "empty"), 1)


# ------------------------------------------------------------------------------------------------ epochs.json
async def test_epoch_entries_past_the_cut_go(tmp_path: Path, opener: Callable[[Path], MessageStore]) -> None:
    root = tmp_path / "store"
    _before, msgs = await make_store(root, opener, n=40)
    cut = msgs[25].commit_log_offset
    save_epochs(root / "epochs.json", EpochHistory([(1, 0), (2, msgs[10].commit_log_offset), (4, cut),
                                                    (5, msgs[30].commit_log_offset)]))  # fmt: skip
    assert truncate_commitlog(config(root), cut) == cut
    assert load_epochs(root / "epochs.json") == EpochHistory([(1, 0), (2, msgs[10].commit_log_offset)])


# ------------------------------------------------------------------------------------------------ crashes
@pytest.mark.parametrize("at", ["mid-segment", "segment start"])
async def test_a_crash_after_any_step_loads_as_before_or_as_after(
    tmp_path: Path, opener: Callable[[Path], MessageStore], at: str
) -> None:
    """Stop after each step (the files closed as a killed process leaves them) and load: before the commit step
    the store is as it was, from it on as truncated. Running the truncation again after the crash completes it."""
    base = tmp_path / "base"
    before, msgs = await make_store(base, opener)
    if at == "mid-segment":
        cut = msgs[40].commit_log_offset
    else:
        cut = next(m.commit_log_offset for m in msgs[30:] if m.commit_log_offset % SEG == 0)
    epochs = EpochHistory([(1, 0), (2, msgs[10].commit_log_offset), (3, msgs[60].commit_log_offset)])
    save_epochs(base / "epochs.json", epochs)
    cut_epochs = EpochHistory([(1, 0), (2, msgs[10].commit_log_offset)])
    with plan_truncation(config(base), cut) as plan:
        names = [step.name for step in plan.steps]
    commit = names.index("commit")
    assert names[:commit] == ["abort", "sync", "checkpoint"] and names[-1] == "epochs"
    assert sum(n.startswith("delete ") for n in names) >= 3
    for k in range(len(names) + 1):
        for rerun in (False, True):
            root = tmp_path / f"k{k}-{rerun}"
            shutil.copytree(base, root)
            with plan_truncation(config(root), cut) as plan:
                plan.run(k)  # then "killed": files closed, nothing else done
            if rerun:
                assert truncate_commitlog(config(root), cut) == cut
            done = rerun or k > commit
            assert load_epochs(root / "epochs.json") == (cut_epochs if rerun or k == len(names) else epochs)
            s = opener(root)
            if done:
                await check_after(s, before, msgs, cut)
            else:
                assert view(s, msgs) == before, f"crash after {names[:k]}"
            s.abandon()


# ------------------------------------------------------------------------------------------------ unclean stop
async def test_a_folder_left_by_an_unclean_stop(tmp_path: Path, opener: Callable[[Path], MessageStore]) -> None:
    """``abort`` present, the checkpoint behind the end: the end is found as recovery finds it (CRCs checked from
    the checkpoint), and offsets on either side of the checkpoint can be cut."""
    base = tmp_path / "base"
    s = opener(base)
    msgs = await fill(s, 45)
    s.flush()
    msgs += await fill(s, 45, 45)
    before = view(s, msgs)
    s.abandon()  # as kill -9: the page cache keeps what was written, abort stays, the checkpoint lags
    assert (base / "abort").exists()
    for i in (20, 70):
        root = tmp_path / f"cut{i}"
        shutil.copytree(base, root)
        cut = msgs[i].commit_log_offset
        assert truncate_commitlog(config(root), cut) == cut
        s = opener(root)
        await check_after(s, before, msgs, cut)
        s.abandon()


async def test_an_unclean_stop_with_a_torn_record(tmp_path: Path, opener: Callable[[Path], MessageStore]) -> None:
    """A record whose body does not match its CRC ends the log (as recovery would find it): past it is refused,
    at it is a no-op."""
    root = tmp_path / "store"
    s = opener(root)
    msgs = await fill(s, 30)
    s.flush()
    msgs += await fill(s, 30, 30)
    before = view(s, msgs)
    s.abandon()
    torn = msgs[50].commit_log_offset
    seg = root / "commitlog" / f"{torn - torn % SEG:020d}"
    with open(seg, "r+b") as f:  # a byte of the body changed: its CRC no longer matches
        f.seek(torn % SEG + 200)
        b = f.read(1)
        f.seek(torn % SEG + 200)
        f.write(bytes([b[0] ^ 0xFF]))
    with pytest.raises(TruncationRefused, match=f"past the end of the commit log \\({torn}\\)"):
        truncate_commitlog(config(root), msgs[55].commit_log_offset)
    assert truncate_commitlog(config(root), torn) == torn
    s = opener(root)
    assert s.max_phy_offset == torn
    assert view(s, msgs) == cut_view(before, torn)
    assert_nothing_points_past(s, torn)
