"""What a producer's check listener gets in CHECK_TRANSACTION_STATE (docs/transactions.md §1): the half message with
its real topic and queue and ``TRANSACTION_CHECK_TIMES`` counting the checks (1, 2, ...), as Apache RocketMQ 5.5.0's
broker sends it (observed with rocketmq-client 4.9.8's listener); whatever the producer put there is replaced."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from sievemq.broker.clients import ClientChannel, ProducerManager
from sievemq.broker.offsets import ConsumerOffsetManager
from sievemq.broker.topics import TopicConfigManager
from sievemq.broker.transactions.book import CheckSettings
from sievemq.broker.transactions.service import TransactionService
from sievemq.protocol.message import MessageExt, decode_record
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


async def test_each_check_carries_its_number(open_store: Callable[..., MessageStore], tmp_path: Path) -> None:
    store = open_store()
    await store.start()
    cfg = tmp_path / "config"
    cfg.mkdir()
    producers, conn = ProducerManager(), _Conn()
    producers.register("g", ClientChannel("c1", conn, "JAVA", 0, 0.0))  # type: ignore[arg-type]
    svc = TransactionService(store, TopicConfigManager(cfg, "b", "c", 4, True), producers, ConsumerOffsetManager(cfg),
                             CheckSettings(timeout_ms=0, check_max=5, interval_ms=1000), HOST, 18)  # fmt: skip
    svc.rebuild()
    half = msg("Real", b"open", queue_id=1, TRAN_MSG="true", PGROUP="g", UNIQ_KEY="U1", TRANSACTION_CHECK_TIMES="9")
    assert (await svc.prepare(half)).ok
    now = half.store_timestamp or 0
    for round_ms in (now + 10, now + 1_100, now + 2_200):
        await svc.check_round(round_ms)
    assert [c.code for c in conn.sent] == [RequestCode.CHECK_TRANSACTION_STATE] * 3
    shown: list[MessageExt] = [decode_record(c.body)[0] for c in conn.sent]
    assert [m.properties["TRANSACTION_CHECK_TIMES"] for m in shown] == ["1", "2", "3"]
    assert {(m.topic, m.queue_id, m.body) for m in shown} == {("Real", 1, b"open")}
    assert {c.ext_fields["transactionId"] for c in conn.sent} == {"U1"}
    await svc.stop()
    await store.shutdown()
