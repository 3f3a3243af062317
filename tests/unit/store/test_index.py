"""Key index files: hash chains, collisions, time ranges, rollover, truncation and torn tails."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from sievemq.protocol.message import decode_record
from sievemq.store import MessageStore
from sievemq.store.index_file import IndexService

from .conftest import msg


def test_chains_collisions_and_time_range(tmp_path: Path) -> None:
    idx = IndexService(tmp_path / "index", 1, 100)  # one slot: every key collides
    for i in range(30):
        idx.put(f"T#k{i % 3}", 1000 + i, 10 * i)
    assert idx.lookup("T#k1", 100, 0, 1 << 62) == [1000 + i for i in range(28, -1, -3)]
    assert idx.lookup("T#k1", 2, 0, 1 << 62) == [1028, 1025]
    assert idx.lookup("T#k1", 100, 100, 200) == [1019, 1016, 1013, 1010]
    assert idx.lookup("T#zz", 100, 0, 1 << 62) == []
    idx.close()


def test_rollover_and_reload(tmp_path: Path) -> None:
    idx = IndexService(tmp_path / "index", 8, 10)
    for i in range(35):
        idx.put(f"T#{i % 5}", i * 100, i)
    assert len(idx.files) == 4
    assert idx.lookup("T#2", 100, 0, 1 << 62) == [i * 100 for i in range(32, -1, -5)]
    idx.close()
    idx = IndexService(tmp_path / "index", 8, 10)
    idx.load()
    assert idx.lookup("T#2", 100, 0, 1 << 62) == [i * 100 for i in range(32, -1, -5)]
    idx.truncate_from_phy(1500)  # drops phy >= 1500: the last two files go, the second is cut
    assert len(idx.files) == 2
    assert idx.lookup("T#2", 100, 0, 1 << 62) == [1200, 700, 200]
    idx.put("T#2", 1500, 15)
    assert idx.lookup("T#2", 100, 0, 1 << 62) == [1500, 1200, 700, 200]
    idx.close()


def test_entries_past_header_count_are_dropped_on_load(tmp_path: Path) -> None:
    idx = IndexService(tmp_path / "index", 4, 50)
    for i in range(10):
        idx.put(f"T#{i % 2}", i, i)
    f = idx.files[-1]
    f.count = 7  # the header update of the last 3 puts never landed
    f._write_header()
    idx.close()
    idx = IndexService(tmp_path / "index", 4, 50)
    idx.load()
    assert idx.lookup("T#0", 100, 0, 1 << 62) == [6, 4, 2, 0]
    assert idx.lookup("T#1", 100, 0, 1 << 62) == [5, 3, 1]
    idx.put("T#1", 20, 20)
    assert idx.lookup("T#1", 100, 0, 1 << 62) == [20, 5, 3, 1]
    idx.close()


async def test_query_message_by_keys_and_uniq_key(open_store: Callable[..., MessageStore]) -> None:
    s = open_store(index_hash_slots=1)  # everything collides: the store re-checks the records
    a = (await s.put_message(msg("T", b"a", keys="order-1 shared", uniq="ID-A"))).msgs[0]
    b = (await s.put_message(msg("T", b"b", keys="shared", uniq="ID-B"))).msgs[0]
    await s.put_message(msg("Other", b"c", keys="order-1"))

    def bodies(topic: str, key: str, n: int = 10, begin: int = 0, end: int = 1 << 62) -> list[bytes]:
        return [decode_record(r)[0].body for r in s.query_message(topic, key, n, begin, end)]

    assert bodies("T", "order-1") == [b"a"]
    assert bodies("T", "shared") == [b"b", b"a"]
    assert bodies("T", "shared", 1) == [b"b"]
    assert bodies("T", "ID-B") == [b"b"]
    assert bodies("Other", "order-1") == [b"c"]
    assert bodies("T", "order") == []
    assert bodies("T", "shared", 10, a.store_timestamp, b.store_timestamp) == [b"b", b"a"]
    assert bodies("T", "shared", 10, b.store_timestamp + 1) == []


def test_deferred_headers_are_written_by_finish_and_at_a_file_switch(tmp_path: Path) -> None:
    idx = IndexService(tmp_path / "index", 4, 10)
    for i in range(14):  # 10 fill the first file, 4 go to the second
        idx.put(f"T#{i % 3}", i, i, header=False)
    first, second = idx.files
    assert IndexService.header_count(first) == 10, "the header of a full file is written when the next one starts"
    assert IndexService.header_count(second) == 0, "not yet"
    idx.finish()
    assert IndexService.header_count(second) == 4
    idx.close()
    again = IndexService(tmp_path / "index", 4, 10)
    again.load()
    assert again.lookup("T#1", 100, 0, 1 << 62) == [13, 10, 7, 4, 1]
    again.close()


async def test_a_batch_put_leaves_the_index_header_up_to_date(open_store: Callable[..., MessageStore]) -> None:
    s = open_store(index_max_entries=1000)
    r = await s.put_messages([msg("T", f"m{i}".encode(), keys=f"k{i}", uniq=f"u{i}") for i in range(20)])
    assert [m.queue_offset for m in r.msgs] == list(range(20))
    f = s.index.files[-1]
    assert IndexService.header_count(f) == f.count == 40, "two keys per message, header written at the end"
    assert [decode_record(x)[0].body for x in s.query_message("T", "k7", 5, 0, 1 << 62)] == [b"m7"]
