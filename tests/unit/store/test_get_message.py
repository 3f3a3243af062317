"""``get_message``: every row of the status table (docs/protocol/requests.md §6), batch limits and filtering."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable

import pytest

from sievemq.filter.tags import tag_code
from sievemq.protocol.message import decode_record
from sievemq.store import AcceptingFilter, CqExtUnit, GetStatus, MessageStore
from sievemq.store.consume_queue import ConsumeQueue

from .conftest import msg


class TagFilter(AcceptingFilter):
    """A tag filter as the broker builds it: code set on the CQ, nothing on the record."""

    def __init__(self, *tags: str) -> None:
        self.codes = {tag_code(t) for t in tags}
        self.cq_calls: list[tuple[int, CqExtUnit | None]] = []
        self.record_calls = 0

    def match_cq(self, tags_code: int, ext: CqExtUnit | None) -> bool:
        self.cq_calls.append((tags_code, ext))
        return tags_code in self.codes

    def match_record(self, record: memoryview) -> bool:
        self.record_calls += 1
        return True


class BodyFilter(AcceptingFilter):
    """A record-level filter (like SQL92): passes everything on the CQ, decides on the stored bytes."""

    def __init__(self, needle: bytes) -> None:
        self.needle = needle
        self.seen: list[bytes] = []

    def match_cq(self, tags_code: int, ext: CqExtUnit | None) -> bool:
        return True

    def match_record(self, record: memoryview) -> bool:
        m, _ = decode_record(record)
        self.seen.append(bytes(record))
        return self.needle in m.body


async def put_n(
    s: MessageStore, n: int, *, topic: str = "T", qid: int = 0, body: bytes = b"m", tags: str = "A"
) -> None:
    for i in range(n):
        await s.put_message(msg(topic, body + str(i).encode(), qid, tags=tags))


async def test_unknown_queue(open_store: Callable[..., MessageStore]) -> None:
    s = open_store()
    await put_n(s, 1)
    for topic, qid in [("nope", 0), ("T", 5)]:
        r = s.get_message(topic, qid, 7, 32, None)
        assert (r.status, r.next_begin_offset, r.min_offset, r.max_offset) == (
            GetStatus.NO_MATCHED_LOGIC_QUEUE, 0, 0, 0,
        )  # fmt: skip
        assert r.records == []


async def test_empty_queue(open_store: Callable[..., MessageStore]) -> None:
    """A queue whose only message was torn away by recovery exists but is empty (max 0)."""
    s = open_store()
    await put_n(s, 1)
    seg = s.root / "commitlog" / f"{0:020d}"
    s.abandon()  # crash: abort file stays
    with open(seg, "r+b") as f:  # flip a body byte: CRC mismatch
        f.seek(88)
        b = f.read(1)
        f.seek(88)
        f.write(bytes([b[0] ^ 0xFF]))
    s = open_store()
    assert s.topic_queues() == {"T": [0]}
    for off in (0, 3):
        r = s.get_message("T", 0, off, 32, None)
        assert (r.status, r.next_begin_offset, r.max_offset) == (GetStatus.NO_MESSAGE_IN_QUEUE, 0, 0)


async def test_offset_rows(open_store: Callable[..., MessageStore]) -> None:
    s = open_store()
    await put_n(s, 5)
    r = s.get_message("T", 0, 5, 32, None)
    assert (r.status, r.next_begin_offset, r.min_offset, r.max_offset) == (GetStatus.OFFSET_OVERFLOW_ONE, 5, 0, 5)
    r = s.get_message("T", 0, 9, 32, None)
    assert (r.status, r.next_begin_offset) == (GetStatus.OFFSET_OVERFLOW_BADLY, 5)
    r = s.get_message("T", 0, 2, 32, None)
    assert (r.status, r.next_begin_offset, r.message_count) == (GetStatus.FOUND, 5, 3)
    assert [decode_record(x)[0].body for x in r.records] == [b"m2", b"m3", b"m4"]
    assert r.buffer_total_size == sum(len(x) for x in r.records)


async def test_a_read_limit_hides_records_beyond_it(open_store: Callable[..., MessageStore]) -> None:
    """Under automatic failover a master's consumers see only what every replica in sync holds (``read_limit``, the
    confirmed commit-log offset): records past it are neither returned nor counted in the queue's max offset."""
    s = open_store()
    await put_n(s, 5)
    cq = s.queues.find("T", 0)
    assert cq is not None
    ends = [e[0] + e[1] for e in (cq.entry(i) for i in range(5)) if e is not None]
    s.reader.read_limit = lambda: ends[2]  # the first three are confirmed
    r = s.get_message("T", 0, 0, 32, None)
    assert (r.status, r.message_count, r.next_begin_offset, r.max_offset) == (GetStatus.FOUND, 3, 3, 3)
    r = s.get_message("T", 0, 3, 32, None)
    assert (r.status, r.max_offset) == (GetStatus.OFFSET_OVERFLOW_ONE, 3)  # nothing more yet: the pull waits
    s.reader.read_limit = lambda: ends[4]
    r = s.get_message("T", 0, 3, 32, None)
    assert [decode_record(x)[0].body for x in r.records] == [b"m3", b"m4"]


async def test_offset_too_small_after_retention(open_store: Callable[..., MessageStore]) -> None:
    s = open_store()
    await put_n(s, 12, body=b"x" * 1000)  # 3 per segment -> 4 segments
    old = 1_000_000.0
    for f in s.commitlog.mfq.files:
        os.utime(f.path, (old, old))
    deleted = await s.clean_expired_files(now=old + 100 * 3600, disk_ratio=0.1)
    assert deleted == 3
    assert s.get_min_offset("T", 0) == 9
    r = s.get_message("T", 0, 4, 32, None)
    assert (r.status, r.next_begin_offset, r.min_offset, r.max_offset) == (GetStatus.OFFSET_TOO_SMALL, 9, 9, 12)


async def test_message_was_removing(open_store: Callable[..., MessageStore]) -> None:
    """Entries whose commit-log segment is gone but whose queue min offset was not corrected yet."""
    s = open_store(max_cq_scan_entries=3)
    await put_n(s, 6, body=b"x" * 1000)
    for mf in s.commitlog.mfq.delete_first(1):  # the segment vanishes under the queue
        mf.destroy()
    r = s.get_message("T", 0, 0, 2, None)
    assert (r.status, r.next_begin_offset) == (GetStatus.MESSAGE_WAS_REMOVING, 3)
    r = s.get_message("T", 0, 1, 32, None)  # a window mixing removed and live entries
    assert (r.status, r.next_begin_offset, r.message_count) == (GetStatus.FOUND, 6, 3)


async def test_offset_found_null(open_store: Callable[..., MessageStore], monkeypatch: pytest.MonkeyPatch) -> None:
    """Entry within [min, max) whose file cannot be read (a race with file deletion)."""
    s = open_store()
    await put_n(s, 3)
    monkeypatch.setattr(ConsumeQueue, "read_block", lambda self, offset, n: b"")
    r = s.get_message("T", 0, 1, 32, None)
    assert (r.status, r.next_begin_offset) == (GetStatus.OFFSET_FOUND_NULL, 16)  # next CQ file


async def test_batch_limits(open_store: Callable[..., MessageStore]) -> None:
    s = open_store(max_transfer_msgs_per_pull=4, max_transfer_bytes_per_pull=10_000)
    await put_n(s, 10, body=b"y" * 10)
    r = s.get_message("T", 0, 0, 3, None)
    assert (r.message_count, r.next_begin_offset) == (3, 3)  # max_msgs
    r = s.get_message("T", 0, 0, 32, None)
    assert (r.message_count, r.next_begin_offset) == (4, 4)  # max_transfer_msgs_per_pull
    size = len(r.records[0])
    s.reader.config = dataclasses.replace(s.config, max_transfer_bytes_per_pull=size * 2 + 1)
    r = s.get_message("T", 0, 0, 32, None)
    assert (r.message_count, r.next_begin_offset, r.buffer_total_size) == (2, 2, 2 * size)
    s.reader.config = dataclasses.replace(s.config, max_transfer_bytes_per_pull=1)  # the first record always goes
    r = s.get_message("T", 0, 5, 32, None)
    assert (r.message_count, r.next_begin_offset) == (1, 6)


async def test_scan_stops_at_cq_file_end_and_scan_limit(open_store: Callable[..., MessageStore]) -> None:
    s = open_store(max_cq_scan_entries=5, max_transfer_msgs_per_pull=100)
    await put_n(s, 40)
    r = s.get_message("T", 0, 0, 3, None)
    assert r.next_begin_offset == 3
    r = s.get_message("T", 0, 0, 100, None)  # at least max_msgs entries, but not past the file (16)
    assert (r.message_count, r.next_begin_offset) == (16, 16)
    r = s.get_message("T", 0, 16, 4, None)
    assert (r.message_count, r.next_begin_offset) == (4, 20)
    r = s.get_message("T", 0, 34, 100, None)  # not past max either
    assert (r.message_count, r.next_begin_offset) == (6, 40)


async def test_tag_filter_passes_only_matching_codes(open_store: Callable[..., MessageStore]) -> None:
    s = open_store()
    tags = ["B", "A", "B", "C", "A", None, "A"]
    for i, t in enumerate(tags):
        await s.put_message(msg(body=b"%d" % i, tags=t))
    f = TagFilter("A")
    r = s.get_message("T", 0, 0, 32, f)
    assert r.status is GetStatus.FOUND
    assert [decode_record(x)[0].queue_offset for x in r.records] == [1, 4, 6]
    assert r.next_begin_offset == 7
    assert [c for c, _ in f.cq_calls] == [tag_code(t) for t in tags]
    assert all(ext is None for _, ext in f.cq_calls)
    assert f.record_calls == 3  # the commit log is read only for CQ matches
    r = s.get_message("T", 0, 2, 2, TagFilter("A", "C"))
    assert [decode_record(x)[0].queue_offset for x in r.records] == [3, 4]
    assert r.next_begin_offset == 5


async def test_non_matching_run_advances_next_offset(open_store: Callable[..., MessageStore]) -> None:
    s = open_store(max_cq_scan_entries=6)
    await put_n(s, 14, tags="B")
    await put_n(s, 2, tags="A")  # offsets 14, 15
    f = TagFilter("A")
    offset, seen = 0, []
    for _ in range(10):
        r = s.get_message("T", 0, offset, 1, f)
        seen.append((r.status, r.next_begin_offset))
        if r.status is GetStatus.FOUND:
            break
        offset = r.next_begin_offset
    assert seen == [
        (GetStatus.NO_MATCHED_MESSAGE, 6),
        (GetStatus.NO_MATCHED_MESSAGE, 12),
        (GetStatus.FOUND, 15),
    ]
    assert f.record_calls == 1


async def test_record_filter(open_store: Callable[..., MessageStore]) -> None:
    s = open_store()
    for body in [b"red", b"green", b"dark red", b"blue"]:
        await s.put_message(msg(body=body))
    f = BodyFilter(b"red")
    r = s.get_message("T", 0, 0, 32, f)
    assert [decode_record(x)[0].body for x in r.records] == [b"red", b"dark red"]
    assert r.next_begin_offset == 4
    assert f.seen[1] == s.look_message_by_offset(decode_record(f.seen[1])[0].commit_log_offset)
    r = s.get_message("T", 0, 3, 32, f)
    assert (r.status, r.next_begin_offset) == (GetStatus.NO_MATCHED_MESSAGE, 4)
