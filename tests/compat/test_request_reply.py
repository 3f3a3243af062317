"""Request-reply, compared with Apache RocketMQ: rocketmq-client 5.5.0's DefaultMQProducer.request against both
brokers, answered by a push consumer of the same client through MessageUtil.createReplyMessage. What the replier
receives (the request and its properties), what the requester gets back and what the broker keeps in
``<cluster>_REPLY_TOPIC`` must be the same, once what names a run (ids, client ids, times) is set aside.
"""

from __future__ import annotations

import asyncio
from typing import Any

from sievemq.client.api import pull_message
from sievemq.remoting.codes import ResponseCode
from tests.compat.conftest import CLUSTER
from tests.compat.sides import Side, broker_connection, create_topic
from tests.interop.clients import ensure_clients_installed, run_driver, start_driver, unique_name

KIND = "java5"
"""rocketmq-client 5.5.0 (the 4.x remoting API of RocketMQ 5)."""
REPLY_TOPIC = f"{CLUSTER}_REPLY_TOPIC"
RUN_BOUND = frozenset(("UNIQ_KEY", "CORRELATION_ID", "REPLY_TO_CLIENT", "PUSH_REPLY_TIME", "ARRIVE_TIME",
                       "CONSUME_START_TIME"))
"""Properties whose value names this run: an id, a client id, a time (their presence is compared)."""
COUNT = 3


def norm(props: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, "<run>" if k in RUN_BOUND else v) for k, v in props.items()))


def scenario(side: Side, topic: str, requester: str, replier: str) -> dict[str, Any]:
    """A replier that answers COUNT requests, a requester that sends them: what each observed, and the stored
    replies."""
    base = ["--namesrv", side.namesrv, "--topic", topic, "--send-timeout-ms", "15000"]
    consume = ["consume", *base, "--group", replier, "--reply", "--from", "first", "--expect", str(COUNT),
               "--linger", "1", "--timeout", "120"]  # fmt: skip
    with start_driver(KIND, consume) as answering:
        answering.wait_for("assigned", timeout=90, predicate=lambda e: len(e["queues"]) == 1)
        res = run_driver(KIND, ["request", *base, "--group", requester, "--count", str(COUNT), "--key-prefix", "q",
                                "--request-timeout-ms", "20000"], timeout=180)  # fmt: skip
        assert answering.wait() == 0, answering.describe()
    assert res.ok, f"{res.describe()}\n---- replier ----\n{answering.describe()}"
    correlation = {e["reply_props"]["CORRELATION_ID"] for e in res.of("reply")}

    async def stored() -> list[tuple[Any, ...]]:
        conn = await broker_connection(side)
        try:
            r = await pull_message(conn, "CompatPeek", REPLY_TOPIC, 0, 0, max_nums=64)
        finally:
            conn.close()
        assert r.code == ResponseCode.SUCCESS, (side.name, r.code, r.remark)
        return sorted((m.body.decode(), m.queue_id, m.sys_flag, norm(m.properties)) for m in r.messages
                      if m.properties.get("CORRELATION_ID") in correlation)  # fmt: skip

    return {
        "received": sorted((e["body"], e["topic"], norm(e["props"])) for e in answering.of("received")),
        "replied": sorted((e["reply_topic"], e["status"]) for e in answering.of("replied")),
        "replies": sorted((e["i"], e["reply_body"], e["reply_topic"], norm(e["reply_props"])) for e in res.of("reply")),
        "stored": asyncio.run(stored()),
    }


def test_a_request_and_its_reply_look_the_same(sides: tuple[Side, Side]) -> None:
    ensure_clients_installed()
    topic, requester, replier = unique_name("CompatReq"), unique_name("CompatReqP"), unique_name("CompatRep")

    async def make() -> None:
        for side in sides:
            await create_topic(side, topic)

    asyncio.run(make())
    ref, ours = (scenario(side, topic, requester, replier) for side in sides)
    assert ref["received"] == ours["received"]
    assert ref["replied"] == ours["replied"]
    assert ref["replies"] == ours["replies"]
    assert ref["stored"] == ours["stored"]
    assert [row[1] for row in ours["replies"]] == [f"reply-body-{i}" for i in range(COUNT)]
    assert len(ours["stored"]) == COUNT
