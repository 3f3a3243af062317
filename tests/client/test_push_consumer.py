"""The push consumer against a real ``sievemq dev``: filtering, retries, DLQ, broadcasting, sharing, offsets."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from sievemq import (
    ClientStateError,
    ConsumeResult,
    Message,
    MessageExt,
    MessageQueue,
    Producer,
    PullConsumer,
    PushConsumer,
    RemotingError,
    Selector,
    SubscriptionError,
)
from sievemq.client import api
from sievemq.filter.tags import java_string_hash
from sievemq.protocol.heartbeat import Subscription
from sievemq.protocol.reasons import Reason
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.connection import connect
from tests.client.conftest import collecting, eventually, ready, routed
from tests.support.procs import Proc
from tests.support.quiet import quiet_period

Names = Callable[[str], str]


async def _create(namesrv: str, topic: str, queues: int = 4) -> None:
    """Make ``topic`` exist (auto-created by a first send) and wait until its route is published."""
    async with Producer(namesrv, "test-topic-creator", default_topic_queue_nums=queues) as p:
        await p.send(Message(topic, b"create"))
    await routed(namesrv, topic)


async def _max_offsets(dev: Proc, topic: str, queues: int) -> dict[int, int]:
    conn = await connect("127.0.0.1", dev.port)
    try:
        return {q: await api.queue_offset(conn, RequestCode.GET_MAX_OFFSET, topic, q) for q in range(queues)}
    finally:
        conn.close()


async def _committed(namesrv: str, group: str, topic: str, queues: int) -> dict[int, int]:
    async with PullConsumer(namesrv, group) as pc:
        return {q: await pc.committed(MessageQueue(topic, "broker-a", q)) for q in range(queues)}


async def test_tag_filter_with_exact_recheck_of_colliding_tags(namesrv: str, names: Names, dev: Proc) -> None:
    """ "Aa" and "BB" share one hash code: the broker lets "BB" through, the client drops it and moves on."""
    assert java_string_hash("Aa") == java_string_hash("BB")
    topic, group = names("Tags"), names("c")
    await _create(namesrv, topic)
    consumer = PushConsumer(namesrv, group, consume_from="first")
    consumer.subscribe(topic, "Aa")
    got = collecting(consumer)
    await consumer.start()
    try:
        async with Producer(namesrv, names("p")) as p:
            for i in range(13):  # all on queue 1, the last one tagged Aa
                await p.send(
                    Message(topic, f"{i}".encode(), tags=("Aa", "BB", "TagC")[i % 3]),
                    queue_selector=lambda queues, msg: queues[1],
                )
        await eventually(lambda: len(got.msgs) >= 5, what="the Aa messages")
        await quiet_period(0.3, "more deliveries", unchanged=lambda: len(got.msgs))
    finally:
        await consumer.close()
    assert sorted(int(b) for b in got.bodies()) == [0, 3, 6, 9, 12]
    assert {m.tags for m in got.msgs} == {"Aa"}
    # Messages dropped by the re-check (BB) never hold the committed offset back.
    assert (await _committed(namesrv, group, topic, 4))[1] == (await _max_offsets(dev, topic, 4))[1] >= 13


async def test_tag_expression_with_several_tags(namesrv: str, names: Names) -> None:
    topic, group = names("Tags2"), names("c")
    await _create(namesrv, topic)
    consumer = PushConsumer(namesrv, group, consume_from="first")
    consumer.subscribe(topic, Selector.tag(["TagA", "TagB"]))
    got = collecting(consumer)
    await consumer.start()
    try:
        async with Producer(namesrv, names("p")) as p:
            for i, tag in enumerate(["TagA", "TagB", "TagC", None, "TagA"]):
                await p.send(Message(topic, f"{i}".encode(), tags=tag))
        await eventually(lambda: len(got.msgs) >= 3, what="TagA/TagB messages")
        await quiet_period(0.3, "more deliveries", unchanged=lambda: len(got.msgs))
    finally:
        await consumer.close()
    assert sorted(got.bodies()) == [b"0", b"1", b"4"]


async def test_reconsume_later_comes_back_through_the_retry_topic(namesrv: str, names: Names) -> None:
    topic, group = names("Retry"), names("c")
    await _create(namesrv, topic)
    consumer = PushConsumer(namesrv, group, consume_from="first", retry_delay_level=1)
    consumer.subscribe(topic, "*")
    got = collecting(consumer, fail=lambda m: m.reconsume_times == 0 and m.body == b"fail-once")
    await consumer.start()
    try:
        async with Producer(namesrv, names("p")) as p:
            sent = await p.send(Message(topic, b"fail-once", tags="T", keys=["k"], properties={"a": "1"}))
            await p.send(Message(topic, b"fine"))
        await eventually(lambda: len([m for m in got.msgs if m.body == b"fail-once"]) >= 2, timeout=8.0,
                         what="the redelivery")  # fmt: skip
        assert any(mq.topic == f"%RETRY%{group}" for mq in consumer.assignment())
    finally:
        await consumer.close()
    first, again = [m for m in got.msgs if m.body == b"fail-once"][:2]
    assert first.reconsume_times == 0 and again.reconsume_times == 1
    assert again.topic == topic, "retried messages are shown with their original topic"
    assert again.properties["RETRY_TOPIC"] == topic
    assert again.msg_id == sent.msg_id and again.tags == "T" and again.keys == ["k"] and again.properties["a"] == "1"
    assert [m.body for m in got.msgs].count(b"fine") == 1


async def test_raising_sync_listener_runs_in_a_thread_and_is_retried(namesrv: str, names: Names) -> None:
    topic, group = names("Sync"), names("c")
    await _create(namesrv, topic)
    consumer = PushConsumer(namesrv, group, consume_from="first", retry_delay_level=1)
    consumer.subscribe(topic)
    seen: list[tuple[int, str]] = []

    @consumer.listener
    def handle(msgs: list[MessageExt]) -> ConsumeResult:
        for m in msgs:
            if m.body == b"boom":
                seen.append((m.reconsume_times, threading.current_thread().name))
                if m.reconsume_times == 0:
                    raise ValueError("listener bug")
        return ConsumeResult.SUCCESS

    await consumer.start()
    try:
        async with Producer(namesrv, names("p")) as p:
            await p.send(Message(topic, b"boom"))
        await eventually(lambda: len(seen) >= 2, timeout=8.0, what="redelivery after an exception")
    finally:
        await consumer.close()
    assert [r for r, _ in seen[:2]] == [0, 1]
    assert all(name != threading.main_thread().name for _, name in seen)


async def test_exhausted_retries_go_to_the_dead_letter_queue(namesrv: str, names: Names) -> None:
    topic, group = names("Dlq"), names("c")
    await _create(namesrv, topic)
    consumer = PushConsumer(namesrv, group, consume_from="first", retry_delay_level=1, max_reconsume_times=2)
    consumer.subscribe(topic)
    got = collecting(consumer, fail=lambda m: m.body == b"poison")
    await consumer.start()
    try:
        async with Producer(namesrv, names("p")) as p:
            sent = await p.send(Message(topic, b"poison"))
        async with PullConsumer(namesrv, names("dlq-reader"), consume_from="first") as pc:
            dlq = MessageQueue(f"%DLQ%{group}", "broker-a", 0)

            async def dlq_route() -> bool:
                return bool(await pc.fetch_queues(dlq.topic))

            await eventually(dlq_route, timeout=10.0, what="the DLQ topic")
            pc.assign([dlq])
            dead = await eventually(lambda: pc.poll(0.3), timeout=5.0, what="the dead letter")
        await quiet_period(0.5, "a delivery of the dead letter", unchanged=lambda: len(got.msgs))
    finally:
        await consumer.close()
    assert [m.reconsume_times for m in got.msgs if m.body == b"poison"] == [0, 1, 2]
    assert [m.body for m in dead] == [b"poison"] and dead[0].msg_id == sent.msg_id
    assert dead[0].properties["RETRY_TOPIC"] == topic


async def test_broadcasting_delivers_everything_to_every_client(namesrv: str, names: Names, tmp_path: Path) -> None:
    topic, group = names("Bcast"), names("c")
    await _create(namesrv, topic)
    consumers = [
        PushConsumer(namesrv, group, broadcasting=True, instance_name=f"b{i}", offset_store_dir=tmp_path)
        for i in range(2)
    ]
    collectors = []
    for c in consumers:
        c.subscribe(topic)
        collectors.append(collecting(c))
        await c.start()
    try:
        for c in consumers:
            await ready(c, topic, 4)
        assert all(not any(mq.topic.startswith("%RETRY%") for mq in c.assignment()) for c in consumers)
        async with Producer(namesrv, names("p")) as p:
            for i in range(10):
                await p.send(Message(topic, f"{i}".encode()))
        for col in collectors:
            await eventually(lambda col=col: len(col.msgs) >= 10, what="all messages at every client")
    finally:
        for c in consumers:
            await c.close()
    for col in collectors:
        assert sorted(col.bodies()) == sorted(f"{i}".encode() for i in range(10))
    files = sorted(tmp_path.rglob("offsets.json"))
    assert len(files) == 2
    table = orjson.loads(files[0].read_bytes())["offsetTable"]
    assert sum(table.values()) >= 11  # 1 creation message + 10, all consumed past


async def test_three_consumers_share_the_queues_and_rebalance_on_leave(namesrv: str, names: Names) -> None:
    topic, group = names("Share"), names("c")
    await _create(namesrv, topic, queues=8)
    consumers = [PushConsumer(namesrv, group, instance_name=f"share-{i}", consume_from="first") for i in range(3)]
    collectors = []
    for c in consumers:
        c.subscribe(topic)
        collectors.append(collecting(c))
        await c.start()

    def shared(members: list[PushConsumer]) -> bool:
        sets = [{mq for mq in c.assignment() if mq.topic == topic} for c in members]
        union = set().union(*sets)
        return len(union) == 8 and sum(len(s) for s in sets) == 8 and all(sets)

    try:
        await eventually(lambda: shared(consumers), what="8 queues split over 3 clients")
        assert sorted(len([q for q in c.assignment() if q.topic == topic]) for c in consumers) == [2, 3, 3]
        async with Producer(namesrv, names("p")) as p:
            sent = {(await p.send(Message(topic, f"{i}".encode()))).msg_id for i in range(60)}
        received = lambda: {m.msg_id for col in collectors for m in col.msgs}  # noqa: E731
        await eventually(lambda: sent <= received(), what="every message delivered")
        assert all(col.msgs for col in collectors)
        await consumers[0].close()
        await eventually(lambda: shared(consumers[1:]), what="the leaver's queues taken over")
        async with Producer(namesrv, names("p2")) as p:
            more = {(await p.send(Message(topic, f"late{i}".encode()))).msg_id for i in range(20)}
        await eventually(lambda: more <= received(), what="messages after the rebalance")
    finally:
        for c in consumers:
            await c.close()


async def test_offsets_are_committed_and_a_restart_resumes_after_them(namesrv: str, names: Names, dev: Proc) -> None:
    topic, group = names("Resume"), names("c")
    await _create(namesrv, topic)
    first = PushConsumer(namesrv, group, consume_from="first")
    first.subscribe(topic)
    got1 = collecting(first)
    await first.start()
    async with Producer(namesrv, names("p")) as p:
        for i in range(10):
            await p.send(Message(topic, f"old{i}".encode()))
        await eventually(lambda: len(got1.msgs) >= 11, what="the first batch")
        await first.close()
        assert await _committed(namesrv, group, topic, 4) == await _max_offsets(dev, topic, 4)
        second = PushConsumer(namesrv, group, consume_from="first")
        second.subscribe(topic)
        got2 = collecting(second)
        await second.start()
        try:
            await ready(second, topic, 4)
            for i in range(5):
                await p.send(Message(topic, f"new{i}".encode()))
            await eventually(lambda: len(got2.msgs) >= 5, what="the new messages")
            await quiet_period(0.3, "more deliveries", unchanged=lambda: len(got2.msgs))
        finally:
            await second.close()
    assert sorted(got2.bodies()) == sorted(f"new{i}".encode() for i in range(5))


async def test_inconsistent_subscription_in_a_group_is_refused_at_start(namesrv: str, names: Names) -> None:
    topic, group = names("Incons"), names("c")
    await _create(namesrv, topic)
    a = PushConsumer(namesrv, group, instance_name="inc-a")
    a.subscribe(topic, "TagA")
    collecting(a)
    await a.start()
    b = PushConsumer(namesrv, group, instance_name="inc-b")
    b.subscribe(topic, "TagB")
    collecting(b)
    try:
        with pytest.raises(SubscriptionError) as e:
            await b.start()
        assert e.value.reason == Reason.SUBSCRIPTION_INCONSISTENT, e.value
    finally:
        await a.close()
        await b.close()


async def test_start_needs_a_listener_and_a_subscription(namesrv: str, names: Names) -> None:
    c = PushConsumer(namesrv, names("c"))
    with pytest.raises(ClientStateError, match="listener"):
        await c.start()
    collecting(c)
    with pytest.raises(ClientStateError, match="subscribe"):
        await c.start()


async def test_bad_sql_selector_fails_start_with_the_brokers_reason(namesrv: str, names: Names) -> None:
    topic, group = names("BadSql"), names("c")
    await _create(namesrv, topic)
    consumer = PushConsumer(namesrv, group)
    consumer.subscribe(topic, Selector.sql("region = = 'eu' AND"))
    collecting(consumer)
    with pytest.raises(SubscriptionError) as e:
        await consumer.start()
    assert e.value.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED, e.value
    await consumer.close()


async def _broker_has_sql(dev: Proc) -> bool:
    conn = await connect("127.0.0.1", dev.port)
    try:
        await api.check_client_config(conn, "probe@0", "sql-probe", Subscription("T", "a = 1", "SQL92", 1), timeout=3.0)
    except RemotingError:
        return False
    finally:
        conn.close()
    return True


async def test_sql_selector_delivers_only_matching_properties(namesrv: str, names: Names, dev: Proc) -> None:
    assert await _broker_has_sql(dev), "CHECK_CLIENT_CONFIG refused 'a = 1'"
    topic, group = names("Sql"), names("c")
    await _create(namesrv, topic)
    consumer = PushConsumer(namesrv, group, consume_from="first")
    consumer.subscribe(topic, Selector.sql("region = 'eu' AND amount > 10"))
    got = collecting(consumer)
    await consumer.start()
    try:
        async with Producer(namesrv, names("p")) as p:
            for i, (region, amount) in enumerate([("eu", 20), ("us", 20), ("eu", 5), ("eu", 11)]):
                await p.send(Message(topic, f"{i}".encode(), properties={"region": region, "amount": str(amount)}))
        await eventually(lambda: len(got.msgs) >= 2, what="matching messages")
        await quiet_period(0.3, "more deliveries", unchanged=lambda: len(got.msgs))
    finally:
        await consumer.close()
    assert sorted(got.bodies()) == [b"0", b"3"]


async def test_flow_control_pauses_pulling_while_listeners_are_slow(namesrv: str, names: Names) -> None:
    topic, group = names("Flow"), names("c")
    await _create(namesrv, topic)
    consumer = PushConsumer(namesrv, group, consume_from="first", max_cached_messages=8, pull_batch_size=4)
    consumer.subscribe(topic)
    release = asyncio.Event()
    seen: list[bytes] = []

    @consumer.listener
    async def slow(msgs: list[MessageExt]) -> ConsumeResult:
        seen.extend(m.body for m in msgs)
        await release.wait()
        return ConsumeResult.SUCCESS

    await consumer.start()
    try:
        async with Producer(namesrv, names("p")) as p:
            for i in range(40):
                await p.send(Message(topic, f"{i}".encode()), queue_selector=lambda queues, msg: queues[2])
        await eventually(lambda: len(seen) >= 8, what="the first messages")
        await quiet_period(0.5, "pulling past max_cached_messages while the listener is held")
        assert len(seen) <= 8 + 4 + 1, "pulling must pause at max_cached_messages (+ one pull batch)"
        release.set()
        await eventually(lambda: len([b for b in seen if b != b"create"]) >= 40, what="the rest after release")
    finally:
        release.set()
        await consumer.close()
