"""Retention: expired segments deleted by mtime at the configured hour or under disk pressure."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from sievemq.protocol.message import MessageExt
from sievemq.store import GetStatus, MessageStore, cleanup

from .conftest import SEG, msg

OLD = 1_000_000.0
NOW = OLD + 72 * 3600 + 60  # 72 h and a minute later


async def fill(s: MessageStore, n: int) -> list[MessageExt]:
    out = []
    for i in range(n):
        out.append((await s.put_message(msg(body=b"%05d" % i + b"-" * 200, keys=f"k{i}"))).msgs[0])
    return out


def age(s: MessageStore, k: int, when: float = OLD) -> None:
    """Make the first ``k`` segments look last modified at ``when``; the rest at NOW."""
    for i, f in enumerate(s.commitlog.mfq.files):
        t = when if i < k else NOW
        os.utime(f.path, (t, t))


async def test_deletes_expired_prefix_and_moves_min_offsets(open_store: Callable[..., MessageStore]) -> None:
    s = open_store()
    msgs = await fill(s, 100)
    per_seg = msgs[1].commit_log_offset and SEG // msgs[0].store_size
    assert len(s.commitlog.mfq.files) >= 7
    age(s, 5)
    assert await s.clean_expired_files(now=NOW, disk_ratio=0.1) == 5
    assert s.min_phy_offset == 5 * SEG
    assert sorted(os.listdir(s.root / "commitlog"))[0] == f"{5 * SEG:020d}"
    first_alive = next(m for m in msgs if m.commit_log_offset >= 5 * SEG)
    assert first_alive.queue_offset == 5 * per_seg
    assert s.get_min_offset("T", 0) == first_alive.queue_offset
    # consume-queue files whose entries all point below the new start are gone (16 entries per file)
    cq_files = sorted(os.listdir(s.root / "consumequeue" / "T" / "0"))
    assert cq_files[0] == f"{(first_alive.queue_offset // 16) * 16 * 20:020d}"
    r = s.get_message("T", 0, 0, 32, None)
    assert (r.status, r.next_begin_offset) == (GetStatus.OFFSET_TOO_SMALL, first_alive.queue_offset)
    r = s.get_message("T", 0, first_alive.queue_offset, 1, None)
    assert r.status is GetStatus.FOUND
    assert s.get_earliest_store_time("T", 0) == first_alive.store_timestamp
    assert s.look_message_by_offset(msgs[0].commit_log_offset) is None
    assert s.query_message("T", "k1", 5, 0, 1 << 62) == []
    assert len(s.query_message("T", f"k{first_alive.queue_offset}", 5, 0, 1 << 62)) == 1
    # the min offsets survive a restart
    await s.shutdown()
    s = open_store()
    assert s.min_phy_offset == 5 * SEG
    assert s.get_min_offset("T", 0) == first_alive.queue_offset


async def test_never_deletes_the_segment_being_written(open_store: Callable[..., MessageStore]) -> None:
    s = open_store()
    await fill(s, 40)
    n = len(s.commitlog.mfq.files)
    age(s, n)
    assert await s.clean_expired_files(now=NOW, disk_ratio=0.1) == n - 1
    assert len(s.commitlog.mfq.files) == 1
    assert await s.clean_expired_files(now=NOW, disk_ratio=0.99) == 0
    r = await s.put_message(msg(body=b"still writable"))
    assert r.msgs[0].queue_offset == 40


async def test_hour_and_disk_rules(open_store: Callable[..., MessageStore]) -> None:
    other_hour = (time.localtime(NOW).tm_hour + 1) % 24
    s = open_store(delete_when_hours=(other_hour, (other_hour + 2) % 24), delete_files_per_run=2)
    await fill(s, 100)
    age(s, 3)
    # Not the hour, disk fine: nothing.
    assert await s.clean_expired_files(now=NOW, disk_ratio=0.5) == 0
    # Disk above disk_max_used_space_ratio: expired ones go at any hour, 2 per run.
    assert await s.clean_expired_files(now=NOW, disk_ratio=0.8) == 2
    assert await s.clean_expired_files(now=NOW, disk_ratio=0.8) == 1
    assert await s.clean_expired_files(now=NOW, disk_ratio=0.8) == 0  # the rest are not expired
    # Above the force ratio: oldest go even if recent.
    assert await s.clean_expired_files(now=NOW, disk_ratio=0.9) == 2
    # An admin trigger ignores the hour but not the age.
    assert await s.clean_expired_files(now=NOW, disk_ratio=0.1, force=True) == 0
    assert s.min_phy_offset == 5 * SEG


async def test_not_expired_segments_stay(open_store: Callable[..., MessageStore]) -> None:
    s = open_store()
    await fill(s, 60)
    age(s, 3, when=NOW - 71 * 3600)  # 71 h old: kept with 72 h retention
    assert await s.clean_expired_files(now=NOW, disk_ratio=0.1) == 0
    assert s.min_phy_offset == 0


def test_the_disk_ratio_is_what_df_shows(tmp_path: Path) -> None:
    """Retention measures its filesystem as RocketMQ does and ``df`` shows Use% (used / (used + available),
    rounded up; root's reserved blocks count as full), not as used / total."""
    for _ in range(5):  # another process may write between the two readings: agree once in a few tries
        out = subprocess.run(["df", "--output=pcent", str(tmp_path)], capture_output=True, text=True, check=True)
        shown = int(out.stdout.splitlines()[-1].strip().rstrip("%")) / 100
        if cleanup.disk_used_ratio(tmp_path) == shown:
            return
    raise AssertionError(f"disk_used_ratio {cleanup.disk_used_ratio(tmp_path)} != df's {shown}")
