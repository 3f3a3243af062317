"""What a producer's check listener gets in CHECK_TRANSACTION_STATE (docs/transactions.md §1): the half message with
its real topic and queue, ``TRANSACTION_CHECK_TIMES`` counting the checks (1, 2, ...) and ``WAIT`` false, as Apache
RocketMQ 5.5.0's broker sends it (compared in tests/compat/test_transactions.py); whatever the producer put there is
replaced. And what is left of a transaction nobody answers: a copy in TRANS_CHECK_MAX_TIME_TOPIC."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from sievemq.broker.clients import ClientChannel, ProducerManager
from sievemq.broker.offsets import ConsumerOffsetManager
from sievemq.broker.topics import TopicConfigManager
from sievemq.broker.transactions.book import CheckSettings
from sievemq.broker.transactions.service import TransactionService
from sievemq.protocol.message import MessageExt, decode_record
from sievemq.protocol.names import TRANS_CHECK_MAX_TIME_TOPIC
from sievemq.remoting.codes import RequestCode
from sievemq.remoting.command import RemotingCommand
from sievemq.store import MessageStore

from .conftest import HOST, msg


class _Conn:
    """A producer's connection that keeps what the broker sends it."""

    is_closed = False

    def __init__(self) -> None:
        self.sent: list[RemotingCommand] = []

    def send_oneway(self, cmd: RemotingCommand) -> None:
        self.sent.append(cmd)


def _service(store: MessageStore, tmp_path: Path, producers: ProducerManager) -> TransactionService:
    cfg = tmp_path / "config"
    cfg.mkdir()
    return TransactionService(store, TopicConfigManager(cfg, "b", "c", 4, True), producers, ConsumerOffsetManager(cfg),
                              CheckSettings(timeout_ms=0, check_max=3, interval_ms=1000), HOST, 18)  # fmt: skip


async def test_each_check_carries_its_number(open_store: Callable[..., MessageStore], tmp_path: Path) -> None:
    store = open_store()
    await store.start()
    producers, conn = ProducerManager(), _Conn()
    producers.register("g", ClientChannel("c1", conn, "JAVA", 0, 0.0))  # type: ignore[arg-type]
    svc = _service(store, tmp_path, producers)
    svc.rebuild()
    half = msg("Real", b"open", queue_id=1, TRAN_MSG="true", PGROUP="g", UNIQ_KEY="U1", TRANSACTION_CHECK_TIMES="9")
    assert (await svc.prepare(half)).ok
    now = half.store_timestamp or 0
    for round_ms in (now + 10, now + 1_100, now + 2_200):
        await svc.check_round(round_ms)
    assert [c.code for c in conn.sent] == [RequestCode.CHECK_TRANSACTION_STATE] * 3
    shown: list[MessageExt] = [decode_record(c.body)[0] for c in conn.sent]
    assert [m.properties["TRANSACTION_CHECK_TIMES"] for m in shown] == ["1", "2", "3"]
    assert {(m.properties["WAIT"], m.properties["__transactionId__"]) for m in shown} == {("false", "U1")}
    assert {(m.topic, m.queue_id, m.body) for m in shown} == {("Real", 1, b"open")}
    assert {c.ext_fields["transactionId"] for c in conn.sent} == {"U1"}
    await svc.stop()
    await store.shutdown()


async def test_a_transaction_checked_too_often_leaves_a_copy(open_store: Callable[..., MessageStore],
                                                              tmp_path: Path) -> None:  # fmt: skip
    """After ``transactionCheckMax`` unanswered checks the next round rolls the transaction back and stores a copy of
    its half message, checks counted, in TRANS_CHECK_MAX_TIME_TOPIC queue 0; nothing reaches the real topic."""
    store = open_store()
    await store.start()
    producers = ProducerManager()
    producers.register("g", ClientChannel("c1", _Conn(), "JAVA", 0, 0.0))  # type: ignore[arg-type]
    svc = _service(store, tmp_path, producers)
    svc.rebuild()
    half = msg("Real", b"open", queue_id=1, TRAN_MSG="true", PGROUP="g", UNIQ_KEY="U1", TAGS="A")
    assert (await svc.prepare(half)).ok
    now = half.store_timestamp or 0
    for n in range(4):
        await svc.check_round(now + 10 + n * 1_100)
    assert (svc.checks_sent, svc.expired) == (3, 1)
    entries = store.read_cq_entries(TRANS_CHECK_MAX_TIME_TOPIC, 0, 0, 8)
    assert len(entries) == 1
    raw = store.look_message_by_offset(entries[0][0])
    assert raw is not None
    aside, _ = decode_record(raw)
    assert (aside.topic, aside.body, aside.tags) == (TRANS_CHECK_MAX_TIME_TOPIC, b"open", "A")
    props = aside.properties
    assert (props["REAL_TOPIC"], props["REAL_QID"], props["TRANSACTION_CHECK_TIMES"]) == ("Real", "1", "3")
    assert store.read_cq_entries("Real", 1, 0, 8) == []
    await svc.check_round(now + 10_000)
    assert len(store.read_cq_entries(TRANS_CHECK_MAX_TIME_TOPIC, 0, 0, 8)) == 1, "set aside once"
    await svc.stop()
    await store.shutdown()
