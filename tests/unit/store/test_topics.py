"""Topic bookkeeping: ``topic_queues`` and ``delete_topics``."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable
from typing import Any

import pytest

from sievemq.store import GetStatus, MessageStore
from sievemq.store import flush as fl

from .conftest import msg


async def test_delete_topics(open_store: Callable[..., MessageStore]) -> None:
    s = open_store()
    for topic, qid in [("A", 0), ("A", 3), ("B", 1), ("C", 0)]:
        await s.put_message(msg(topic, b"x", qid))
    assert s.topic_queues() == {"A": [0, 3], "B": [1], "C": [0]}
    s.delete_topics({"A", "B", "nope"})
    assert s.topic_queues() == {"C": [0]}
    assert not (s.root / "consumequeue" / "A").exists() and not (s.root / "consumequeue" / "B").exists()
    assert s.get_message("A", 0, 0, 1, None).status is GetStatus.NO_MATCHED_LOGIC_QUEUE
    assert s.get_max_offset("A", 3) == 0
    r = await s.put_message(msg("A", b"again", 0))  # a re-created topic starts over
    assert r.msgs[0].queue_offset == 0
    s.flush()
    s.delete_topics({"A", "C"})
    await s.shutdown()
    s = open_store()  # an empty consumequeue folder is not a reason to rebuild deleted topics
    assert s.topic_queues() == {}
    assert s.recovery_report is not None and s.recovery_report.records_redone == 0


async def test_delete_topics_while_a_flush_runs(
    open_store: Callable[..., MessageStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    s = open_store()
    await s.start()
    await s.put_message(msg("A", b"x", 0))
    gate, started = threading.Event(), threading.Event()
    real = fl.sync_job

    def job(*a: Any) -> None:
        started.set()
        gate.wait(10)
        for fd in a[0]:
            os.fstat(fd)  # the descriptors of A's queue must still be open here
        real(*a)

    monkeypatch.setattr(fl, "sync_job", job)
    flush = asyncio.create_task(s.flusher.flush_all())
    assert await asyncio.to_thread(started.wait, 10)
    s.delete_topics({"A"})
    assert s.topic_queues() == {}
    gate.set()
    await flush
    assert s.flusher.pending_close == []
    await s.shutdown()
