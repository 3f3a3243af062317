"""The transaction service over a real store: a commit's op record without its commit record (a crash between the
two writes) gets the commit written at restart, once; settled transactions stay settled; checks counted."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from sievemq.broker.clients import ProducerManager
from sievemq.broker.offsets import ConsumerOffsetManager
from sievemq.broker.topics import TopicConfigManager
from sievemq.broker.transactions.book import CheckSettings
from sievemq.broker.transactions.records import OpKind, op_message
from sievemq.broker.transactions.service import EndRequest, TransactionService
from sievemq.protocol.message import decode_record
from sievemq.store import MessageStore

from .conftest import HOST, msg

SETTINGS = CheckSettings(timeout_ms=0, check_max=2, interval_ms=1000)


def _service(store: MessageStore, root: Path) -> TransactionService:
    cfg = root / "config"
    cfg.mkdir(parents=True, exist_ok=True)
    topics = TopicConfigManager(cfg, "b", "c", 4, True)
    return TransactionService(store, topics, ProducerManager(), ConsumerOffsetManager(cfg), SETTINGS, HOST, 18)


def _bodies(store: MessageStore, topic: str = "Real") -> list[bytes]:
    res = store.get_message(topic, 1, 0, 100, None)
    return [decode_record(r)[0].body for r in res.records]


async def _half(svc: TransactionService, body: bytes) -> tuple[int, int]:
    m = msg("Real", body, queue_id=1, TRAN_MSG="true", PGROUP="g", UNIQ_KEY=body.decode())
    r = await svc.prepare(m)
    assert r.ok
    return m.queue_offset, m.commit_log_offset


async def test_a_commit_op_without_its_commit_record_is_completed_once_at_restart(
    open_store: Callable[..., MessageStore], tmp_path: Path
) -> None:
    store = open_store()
    await store.start()
    svc = _service(store, tmp_path)
    svc.rebuild()
    done = await _half(svc, b"done")
    torn = await _half(svc, b"torn")
    rolled = await _half(svc, b"rolled")
    result, _ = await svc.end(EndRequest("g", *done, commit=True, from_check=False, msg_id="done"))
    assert result is not None and result.ok
    await svc.end(EndRequest("g", *rolled, commit=False, from_check=False, msg_id="rolled"))
    # The crash: the op of "torn" is stored, its commit record never was.
    (r,) = await store.put_in_order([[op_message(torn[0], OpKind.COMMIT, HOST, 0)]])
    assert r.ok
    assert _bodies(store) == [b"done"]
    await svc.stop()
    await store.shutdown()

    store = open_store()
    await store.start()
    svc = _service(store, tmp_path)
    await svc.start(checks=False)  # a slave: rebuilds, writes nothing
    assert _bodies(store) == [b"done"], _bodies(store)
    assert not svc.book.pending, svc.book.pending
    await svc.stop()
    await svc.start()  # a master pays what the op promised
    assert _bodies(store) == [b"done", b"torn"]
    for _ in range(3):
        await svc.check_round()
    assert _bodies(store) == [b"done", b"torn"], "a settled transaction was committed again"
    for half in (done, torn, rolled):
        result, remark = await svc.end(EndRequest("g", *half, commit=True, from_check=True, msg_id="x"))
        assert result is None, (half, result, remark)  # None: settled already, nothing was written
    assert _bodies(store) == [b"done", b"torn"]
    await svc.stop()


async def test_check_counts_survive_a_restart_and_end_in_expiry(
    open_store: Callable[..., MessageStore], tmp_path: Path
) -> None:
    store = open_store()
    await store.start()
    svc = _service(store, tmp_path)
    svc.rebuild()
    open_one = await _half(svc, b"open")
    assert await svc.check_round(now_ms=10**13) == 1  # checked once (no producer connected: counted anyway)
    await svc.stop()
    await store.shutdown()

    store = open_store()
    await store.start()
    svc = _service(store, tmp_path)
    svc.rebuild()
    assert svc.book.pending[open_one[0]].checks == 1
    await svc.check_round(now_ms=10**13 + 1000)  # the second check
    await svc.check_round(now_ms=10**13 + 2000)  # check_max reached: rolled back
    assert svc.book.is_resolved(open_one[0]) and svc.expired == 1
    assert _bodies(store) == []
    await svc.stop()
