"""A committed transactional message is filtered like any other: tags and SQL92 (with the broker's bitmaps)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sievemq import ConsumeResult, Message, MessageExt, PushConsumer, Selector, TransactionProducer, TransactionState
from sievemq.admin.api import AdminClient
from tests.client.conftest import eventually, ready, routed
from tests.support.quiet import quiet_period

Names = Callable[[str], str]
FAST = {"rebalance_interval": 1.0, "heartbeat_interval": 1.0, "persist_interval": 0.5, "consume_from": "first"}


async def _check(msg: MessageExt) -> TransactionState:
    return TransactionState.ROLLBACK


async def _by_body(msg: Message, arg: Any) -> TransactionState:
    return TransactionState.COMMIT if msg.body.startswith(b"c") else TransactionState.ROLLBACK


async def test_committed_transactional_messages_pass_tag_and_sql_filters(namesrv: str, names: Names) -> None:
    topic = names("TxF")
    async with AdminClient(namesrv) as admin:
        await admin.create_topic(topic, 2)
    await routed(namesrv, topic)
    got: dict[str, list[bytes]] = {"sql": [], "tag": []}
    consumers = []
    for kind, sel in (("sql", Selector.sql("amount > 10")), ("tag", Selector.tag("TagB"))):
        c = PushConsumer(namesrv, names(f"TxF{kind}"), **FAST)  # type: ignore[arg-type]
        c.subscribe(topic, sel)

        def listener(kind: str = kind) -> Callable[[list[MessageExt]], Any]:
            async def on(msgs: list[MessageExt]) -> ConsumeResult:
                got[kind].extend(m.body for m in msgs)
                return ConsumeResult.SUCCESS

            return on

        c.listener(listener())
        consumers.append(c)
    sent = [("c-big-a", "TagA", "50"), ("c-small-b", "TagB", "5"), ("r-big-b", "TagB", "99"), ("c-big-b", "TagB", "20")]
    async with consumers[0], consumers[1], TransactionProducer(namesrv, names("TxFP"), check_listener=_check) as p:
        for c in consumers:
            await ready(c, topic, 2)
        for body, tag, amount in sent:
            await p.send_in_transaction(Message(topic, body.encode(), tags=tag, properties={"amount": amount}),
                                        _by_body)  # fmt: skip
        await eventually(lambda: len(got["sql"]) >= 2 and len(got["tag"]) >= 2, timeout=20, what="both filtered")
        await quiet_period(0.5, "a rolled-back message", unchanged=lambda: (len(got["sql"]), len(got["tag"])))
    assert sorted(got["sql"]) == [b"c-big-a", b"c-big-b"], got
    assert sorted(got["tag"]) == [b"c-big-b", b"c-small-b"], got
