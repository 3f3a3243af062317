"""The flush service on its own: plans, what a finished round marks, failed rounds, deferred closes, waiters."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sievemq.store import flush as fl
from sievemq.store.commitlog import CommitLog
from sievemq.store.consume_queue import ConsumeQueue
from sievemq.store.flush import FlushService
from sievemq.store.index_file import IndexService
from sievemq.store.queues import QueueTable


class Rig:
    def __init__(self, root: Path, *, sync_flush: bool = False, timeout_ms: int = 5000) -> None:
        self.root = root
        self.cl = CommitLog(root / "commitlog", 4096)
        self.index = IndexService(root / "index", 16, 64)
        self.queues = QueueTable(root / "consumequeue", root / "consumequeue_ext", 16, 4096)
        self.f = FlushService(self.cl, self.index, sync_flush=sync_flush, interval_ms=600_000,
                              sync_timeout_ms=timeout_ms, is_live=self.queues.is_live)  # fmt: skip
        self.f.open_checkpoint(root / "checkpoint")
        self.f.activate()

    def append(self, n: int = 100) -> int:
        phy = self.cl.reserve(n)
        self.cl.write(phy, b"r" * n)
        return self.cl.max_offset

    def queue(self, topic: str = "T") -> ConsumeQueue:
        cq = self.queues.get_or_create(topic, 0)
        cq.append(cq.max_offset, 0, 100, 0)
        self.f.mark_dirty(cq)
        return cq

    def close(self) -> None:
        self.f.close()
        self.cl.close()
        self.queues.close()
        self.index.close()


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    r = Rig(tmp_path)
    yield r
    r.close()


def test_commit_log_plan_then_finish(rig: Rig) -> None:
    end = rig.append()
    plan = rig.f.plan(everything=False)
    assert plan.commitlog.upto == end and plan.fds == [rig.cl.mfq.files[0].fd]
    assert plan.dirs == [rig.cl.mfq.directory] and plan.checkpoint is None  # a new segment: its folder too
    rig.f.flush_now()
    assert rig.cl.mfq.flushed_offset == end and not rig.cl.mfq.files[0].new_file
    assert rig.f.plan(everything=False).empty is True
    rig.append()
    again = rig.f.plan(everything=False)
    assert again.fds == [rig.cl.mfq.files[0].fd] and again.dirs == []  # an old file: no folder sync


def test_full_plan_takes_dirty_queues_index_and_checkpoint(rig: Rig) -> None:
    end = rig.append()
    cq = rig.queue()
    rig.index.put("T#k", 0, 1)
    plan = rig.f.plan(everything=True)
    d = cq.directory
    assert [s.queue for s in plan.slices] == [cq.mfq] and plan.queues == [cq]
    assert {d, d.parent, d.parent.parent, rig.index.directory} <= set(plan.dirs)
    assert plan.checkpoint is not None and plan.checkpoint.physic_offset == plan.checkpoint.logics_offset == end
    assert rig.f.plan(everything=True).queues == []  # taken: the next round has none
    assert rig.index.take_dirty() == []


def test_a_failed_round_hands_live_queues_and_index_files_back(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    rig.append()
    kept, gone = rig.queue("Keep"), rig.queue("Gone")
    rig.index.put("T#k", 0, 1)

    def broken(*a: Any) -> None:
        raise OSError("EIO")

    monkeypatch.setattr(fl, "sync_job", broken)

    async def go() -> None:
        rig.queues.remove_topic("Gone")
        with pytest.raises(OSError):
            await rig.f.flush_all()

    asyncio.run(go())
    plan = rig.f.plan(everything=True)
    assert plan.queues == [kept] and gone not in plan.queues
    assert len(plan.index_files) == 1 and rig.cl.mfq.flushed_offset == 0
    for f in gone.detach_files():
        f.close()


def test_files_retired_during_a_round_close_after_it(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    rig.append()
    cq = rig.queue()
    seen: list[int] = []
    real = fl.sync_job

    async def go() -> None:
        loop = asyncio.get_running_loop()
        started, release = asyncio.Event(), asyncio.Event()

        def job(fds: list[int], *rest: Any) -> None:
            loop.call_soon_threadsafe(started.set)
            asyncio.run_coroutine_threadsafe(release.wait(), loop).result(10)
            for fd in fds:
                os.fstat(fd)  # still open
                seen.append(fd)
            real(fds, *rest)

        monkeypatch.setattr(fl, "sync_job", job)
        task = asyncio.create_task(rig.f.flush_all())
        await started.wait()
        files = cq.detach_files()
        rig.f.retire(files)
        assert rig.f.pending_close == files and not any(f.closed for f in files)
        release.set()
        await task
        assert rig.f.pending_close == [] and all(f.closed for f in files)
        rig.f.retire(files)  # no round running: closed at once (idempotent)

    asyncio.run(go())
    assert seen


def test_waiters_are_answered_in_offset_order(tmp_path: Path) -> None:
    rig = Rig(tmp_path, sync_flush=True)
    order: list[int] = []

    async def go() -> None:
        rig.f.start()
        ends = [rig.append() for _ in range(3)]

        async def wait(o: int) -> None:
            assert await rig.f.wait_flushed(o)
            order.append(o)

        await asyncio.gather(*(wait(o) for o in reversed(ends)))
        assert rig.cl.mfq.flushed_offset >= ends[-1]
        assert await rig.f.wait_flushed(ends[0])  # already flushed: at once
        await rig.f.stop_tasks()

    asyncio.run(go())
    assert len(order) == 3 and order == sorted(order)
    rig.close()


@pytest.mark.parametrize("close", [False, True])
def test_wait_times_out_or_is_answered_by_closing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, close: bool) -> None:
    """A disk slower than ``sync_flush_timeout_ms`` answers "not flushed"; so does closing, at once."""
    rig = Rig(tmp_path, sync_flush=True, timeout_ms=60_000 if close else 50)
    gate = threading.Event()
    real = fl.sync_job

    def slow(*a: Any) -> None:
        gate.wait(10)
        real(*a)

    monkeypatch.setattr(fl, "sync_job", slow)

    async def go() -> None:
        rig.f.start()
        waiter = asyncio.create_task(rig.f.wait_flushed(rig.append()))
        if close:
            await asyncio.sleep(0.01)
            rig.f.fail_waiters()
        assert await asyncio.wait_for(waiter, 5) is False
        gate.set()
        await rig.f.stop_tasks()

    asyncio.run(go())
    rig.close()
