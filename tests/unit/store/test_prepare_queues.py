"""A new topic's queues get their first consume-queue file ahead of the first message (``prepare_queues``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from sievemq.protocol.message import decode_record
from sievemq.store import MessageStore, PutStatus
from sievemq.store.mapped_file_queue import SPARE_SUFFIX
from tests.unit.store.conftest import msg
from tests.unit.store.test_allocation import no_space


def bodies(store: MessageStore, topic: str, qid: int) -> list[bytes]:
    return [decode_record(rec)[0].body for rec in store.get_message(topic, qid, 0, 10, None).records]


def cq_files(store: MessageStore, topic: str, qid: int) -> list[str]:
    d = store.config.root / "consumequeue" / topic / str(qid)
    return sorted(p.name for p in d.iterdir()) if d.is_dir() else []


async def test_prepared_queues_have_spares_that_their_first_put_takes(open_store: Callable[..., MessageStore]) -> None:
    s = open_store()
    assert await s.prepare_queues("T", range(3)) == 3
    for q in range(3):
        assert cq_files(s, "T", q) == ["0" * 20 + SPARE_SUFFIX], cq_files(s, "T", q)
    assert await s.prepare_queues("T", range(3)) == 0, "ready queues are left alone"
    r = await s.put_message(msg("T", b"first", 1, tags="A"))
    assert r.status == PutStatus.PUT_OK
    assert cq_files(s, "T", 1) == ["0" * 20], "the put took the spare as the queue's first file"
    assert bodies(s, "T", 1) == [b"first"]
    assert await s.prepare_queues("T", range(4)) == 1, "a queue added to the topic later"


async def test_a_queue_in_use_is_not_prepared(open_store: Callable[..., MessageStore]) -> None:
    s = open_store()
    await s.put_message(msg("U", b"x", 0))
    assert await s.prepare_queues("U", range(1)) == 0
    assert cq_files(s, "U", 0) == ["0" * 20]


async def test_no_disk_space_prepares_nothing_and_puts_still_decide(
    open_store: Callable[..., MessageStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    s = open_store()
    no_space(monkeypatch)
    assert await s.prepare_queues("T", range(2)) == 0
    assert cq_files(s, "T", 0) == [] and cq_files(s, "T", 1) == []
    monkeypatch.undo()
    assert (await s.put_message(msg("T", b"y", 0))).status == PutStatus.PUT_OK


async def test_unused_spares_are_gone_after_a_restart(open_store: Callable[..., MessageStore], tmp_path: Path) -> None:
    s = open_store()
    assert await s.prepare_queues("T", range(2)) == 2
    await s.put_message(msg("T", b"z", 0))
    await s.shutdown()
    again = open_store()
    assert cq_files(again, "T", 1) == [], "a spare holds no data: it is not kept"
    assert bodies(again, "T", 0) == [b"z"]
