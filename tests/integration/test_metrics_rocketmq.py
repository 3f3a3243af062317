"""RocketMQ 5's metric families on a real sievemq's ``/metrics`` (docs/metrics-rocketmq.md): after real sends, pulls,
POPs, commits and dead letters over TCP, the ``rocketmq_*`` values are exactly what was done, with RocketMQ's names,
labels and label values; the dashboard in deploy/grafana queries only names and labels a running sievemq exports; and
``httpMetricsRocketmqNames = false`` turns the families off."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

import orjson

from sievemq.client import api
from sievemq.protocol.batch import BatchEntry
from sievemq.protocol.heartbeat import ConsumerData, HeartbeatData, Subscription
from sievemq.protocol.message import MessageExt, decode_records
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection, connect
from tests.integration.conftest import Cluster
from tests.integration.helpers import create_topic, eventually, max_offset
from tests.integration.test_sql92 import EXPR, fill, hb, matches
from tests.support import wire
from tests.support.metrics import Scrape, scrape
from tests.support.procs import free_port

NODE = {"cluster": "DefaultCluster", "node_type": "broker"}
NO = "false"


async def _pull_all(conn: Connection, group: str, topic: str, queue_id: int, sub: str | None = "*") -> list[MessageExt]:
    """Every message of a queue the group's filter lets through (``sub`` None: its heartbeat's subscription)."""
    got: list[MessageExt] = []
    offset = 0
    while True:
        r = await api.pull_message(conn, group, topic, queue_id, offset, max_nums=8, subscription=sub)
        if r.code != ResponseCode.SUCCESS or r.next_begin_offset == offset:
            return got
        got += r.messages
        offset = r.next_begin_offset


def _consumer(client: str, group: str, topic: str, expr: str, consume_type: str = "CONSUME_PASSIVELY") -> ConsumerData:
    return ConsumerData(group, consume_type=consume_type, subscriptions=[Subscription(topic, expr, "TAG", 1)])


@dataclass
class Traffic:
    """What ``_traffic`` did, to compare with the scrape."""

    started: float
    stored_bytes: int
    per_request_bytes: list[int]
    batch_bytes: int


async def _traffic(conn: Connection) -> Traffic:
    """Sends of every message type, a filtered consumer group with a backlog, a reader, a POP group, dead letters."""
    started = time.time()
    await create_topic(conn, "RmqT", 2)
    await create_topic(conn, "RmqPop", 1)
    beat = HeartbeatData("rmq-client", producer_groups=["rmq-producer"], consumers=[
        _consumer("rmq-client", "rmq-consumer", "RmqT", "TagA"),
        _consumer("rmq-client", "rmq-pop", "RmqPop", "*", "CONSUME_POP")])  # fmt: skip
    cmd = RemotingCommand.request(RequestCode.HEART_BEAT, body=orjson.dumps(beat.to_json()))
    cmd.language = "PYTHON"  # as the C++ core under rocketmq-client-python says
    assert (await conn.request(cmd, 5.0)).code == ResponseCode.SUCCESS
    for i in range(15):  # queue 0: 10 TagA, 5 TagB
        await wire.send_message(conn, "RmqT", f"body-{i}".encode() * (i + 1), tags="TagB" if i % 3 == 2 else "TagA",
                                queue_id=0, group="rmq-producer")  # fmt: skip
    for i in range(4):
        await wire.send_message(conn, "RmqT", f"q1-{i}".encode(), tags="TagA", queue_id=1, group="rmq-producer")
    await _dispatched(conn, "RmqT", {0: 15, 1: 4})  # RocketMQ (tests/compat) dispatches after it answers
    await wire.send_message(conn, "RmqTypes", b"later", delay_level=1)
    await wire.send_message(conn, "RmqTypes", b"ordered", properties={"__SHARDINGKEY": "order-1"})
    await wire.send_message(conn, "RmqTypes", b"half", properties={"TRAN_MSG": "true", "PGROUP": "rmq-producer"})
    await wire.send_batch(conn, "RmqBatch", [BatchEntry(body=b"x" * (100 * (i + 1))) for i in range(4)], queue_id=0)

    everything = [*await _pull_all(conn, "rmq-reader", "RmqT", 0), *await _pull_all(conn, "rmq-reader", "RmqT", 1)]
    assert len(everything) == 19
    filtered = await _pull_all(conn, "rmq-consumer", "RmqT", 0, sub=None)
    assert len(filtered) == 10, "the broker filtered out the TagB messages"
    await api.update_offset(conn, "rmq-consumer", "RmqT", 0, 8)
    await api.update_offset(conn, "rmq-consumer", "RmqT", 1, 1)
    for m in filtered[:2]:  # straight to the dead-letter queue (a negative delay level)
        await api.send_back(conn, offset=m.commit_log_offset, group="rmq-consumer", delay_level=-1, origin_topic="RmqT")

    for i in range(5):
        await wire.send_message(conn, "RmqPop", f"pop-{i}".encode(), queue_id=0)
    await _dispatched(conn, "RmqPop", {0: 5})
    await _dispatched(conn, "RmqBatch", {0: 4})
    assert await _pop(conn, "rmq-pop", "RmqPop", 2) == 2
    batch = await _pull_all(conn, "rmq-reader", "RmqBatch", 0)
    return Traffic(started, sum(m.store_size for m in everything), [m.store_size for m in everything],
                   sum(m.store_size for m in batch))  # fmt: skip


async def _pop(conn: Connection, group: str, topic: str, n: int) -> int:
    """POP_MESSAGE of up to ``n`` messages of queue 0 (leased for a minute), as RocketMQ's clients ask it (the
    answer's fields differ between the two brokers; the records in its body do not): how many came."""
    fields = {"consumerGroup": group, "topic": topic, "queueId": "0", "maxMsgNums": str(n), "invisibleTime": "60000",
              "pollTime": "0", "bornTime": str(int(time.time() * 1000)), "initMode": "0", "expType": "TAG",
              "exp": "*"}  # fmt: skip
    resp = await conn.request(RemotingCommand.request(RequestCode.POP_MESSAGE, fields), 10.0)
    assert resp.code == ResponseCode.SUCCESS, (resp.code, resp.remark)
    return len(decode_records(resp.body))


async def _dispatched(conn: Connection, topic: str, ends: dict[int, int]) -> None:
    """Wait until the queues of ``topic`` hold ``ends`` messages."""
    for queue_id, end in ends.items():
        await eventually(lambda q=queue_id, e=end: _holds(conn, topic, q, e), what=f"{topic} queue {queue_id} at {end}")


async def _holds(conn: Connection, topic: str, queue_id: int, end: int) -> bool:
    return await max_offset(conn, topic, queue_id) >= end


def _broker_name(log: str) -> str:
    m = re.search(r"broker\s+\S+\s+\(([^,]+),", log)
    assert m, log
    return m.group(1)


async def test_rocketmq_families_say_what_was_sent_consumed_and_left(cluster: Cluster) -> None:
    dev = cluster.dev()
    http = str(dev.extra["http"])
    conn = await connect("127.0.0.1", dev.port)
    try:
        t = await _traffic(conn)
        await create_topic(conn, "RmqSql", 1)  # a SQL92 group with Bloom bits, 40 messages behind, 14 of them its
        await api.heartbeat(conn, hb("rmq-sql-client", "rmq-sql", "RmqSql", EXPR))
        await fill(conn, "RmqSql")
        await api.update_offset(conn, "rmq-sql", "RmqSql", 0, 0)
        s = await eventually(lambda: _scraped_with_dead_letters(http), what="dead letters counted")
    finally:
        conn.close()
    node = {**NODE, "node_id": _broker_name(dev.log())}
    for name, samples in s.samples.items():
        if name.startswith("rocketmq_") and name != "rocketmq_proxy_up":
            for sample in samples:
                assert {k: sample.labels.get(k) for k in node} == node, sample

    # messages and bytes in, by topic and message type (RocketMQ's BrokerMetricsManager.getMessageType)
    normal = {**node, "topic": "RmqT", "message_type": "normal", "is_system": NO}
    assert s.value("rocketmq_messages_in_total", **normal) == 19
    assert s.value("rocketmq_throughput_in_total", **normal) == t.stored_bytes
    assert s.value("rocketmq_message_size_count", **normal) == 19, "one sample per send request"
    assert s.value("rocketmq_message_size_sum", **normal) == sum(t.per_request_bytes)
    assert s.value("rocketmq_message_size_bucket", **normal, le="1024.0") == 19
    kinds = {k: s.get("rocketmq_messages_in_total", **node, topic="RmqTypes", message_type=k, is_system=NO)
             for k in ("delay", "fifo", "transaction", "normal")}  # fmt: skip
    assert kinds == {"delay": 1, "fifo": 1, "transaction": 1, "normal": 0}, kinds
    batch = {**node, "topic": "RmqBatch", "message_type": "normal", "is_system": NO}
    assert s.value("rocketmq_messages_in_total", **batch) == 4
    assert s.value("rocketmq_message_size_count", **batch) == 1, "a batch is one request"
    assert s.value("rocketmq_message_size_sum", **batch) == t.batch_bytes // 4, "bytes per message of the request"
    assert not [x for x in s.samples["rocketmq_messages_in_total"] if x.labels["topic"].startswith("%")], (
        "retry and dead-letter topics are left out, as RocketMQ does"
    )

    # messages and bytes out, by topic and consumer group
    def out(group: str, topic: str = "RmqT") -> dict[str, str]:
        return {**node, "topic": topic, "consumer_group": group, "is_system": NO}

    assert s.value("rocketmq_messages_out_total", **out("rmq-reader")) == 19
    assert s.value("rocketmq_throughput_out_total", **out("rmq-reader")) == t.stored_bytes
    assert s.value("rocketmq_messages_out_total", **out("rmq-consumer")) == 10, "only what the filter let through"
    assert s.value("rocketmq_messages_out_total", **out("rmq-pop", "RmqPop"), is_retry=NO) == 2, "POPs: is_retry"

    # lag of the live groups, counting only what the group's tag lets through (RocketMQ's estimateAccumulation):
    # queue 0 holds 15 (committed 8, pulled to 15; TagA at 9, 10, 12, 13 after 8), queue 1 holds 4 TagA (committed 1,
    # not pulled)
    lag = {**node, "consumer_group": "rmq-consumer", "topic": "RmqT", "is_retry": NO, "is_system": NO}
    assert s.value("rocketmq_consumer_lag_messages", **lag) == 4 + (4 - 1)
    assert s.value("rocketmq_consumer_inflight_messages", **lag) == 4
    assert s.value("rocketmq_consumer_ready_messages", **lag) == 4 - 1
    bound_ms = (time.time() - t.started) * 1000 + 1000
    assert 0 <= s.value("rocketmq_consumer_lag_latency_milliseconds", **lag) <= bound_ms
    assert 0 <= s.value("rocketmq_consumer_queueing_latency_milliseconds", **lag) <= bound_ms
    assert not s.find("rocketmq_consumer_lag_messages", consumer_group="rmq-reader"), (
        "a group without live consumers has no lag series (RocketMQ's ConsumerLagCalculator)"
    )
    sql = {**node, "consumer_group": "rmq-sql", "topic": "RmqSql", "is_retry": NO, "is_system": NO}
    wanted = sum(1 for i in range(40) if matches(i))
    assert wanted <= s.value("rocketmq_consumer_lag_messages", **sql) < 40, "the Bloom bits rule most others out"
    pop = {**node, "consumer_group": "rmq-pop", "topic": "RmqPop", "is_retry": NO, "is_system": NO}
    assert s.value("rocketmq_consumer_inflight_messages", **pop) == 2, "the leases"
    assert s.value("rocketmq_consumer_ready_messages", **pop) == 3
    assert s.value("rocketmq_consumer_lag_messages", **pop) == 5

    dlq = {**node, "consumer_group": "rmq-consumer", "topic": "RmqT", "is_system": NO}
    assert s.value("rocketmq_send_to_dlq_messages_total", **dlq) == 2

    # connections, bookkeeping, store
    assert s.value("rocketmq_producer_connections", **node, language="python", version="v4_9_8",
                   protocol_type="remoting") == 1, "the heartbeat's producer group"  # fmt: skip
    assert s.value("rocketmq_consumer_connections", **node, consumer_group="rmq-consumer", language="python",
                   version="v4_9_8", consume_mode="push", protocol_type="remoting", is_system=NO) == 1  # fmt: skip
    assert s.value("rocketmq_consumer_connections", **node, consumer_group="rmq-pop", language="python",
                   version="v4_9_8", consume_mode="pop", protocol_type="remoting", is_system=NO) == 1  # fmt: skip
    assert s.value("rocketmq_topic_number", **node) == s.value("sievemq_broker_topics")
    assert s.value("rocketmq_consumer_group_number", **node) == s.value("sievemq_broker_consumer_groups")
    assert s.value("rocketmq_broker_permission", **node) == 6
    assert s.value("rocketmq_half_messages", **node, topic="RmqTypes") == 1, "the transaction left open"
    store = {**node, "storage_type": "local", "storage_medium": "disk"}
    assert s.value("rocketmq_storage_size_bytes", **store) > 0
    assert s.value("rocketmq_storage_flush_behind_bytes", **store) >= 0
    assert s.value("rocketmq_storage_dispatch_behind_bytes", **store) == 0
    assert 0 <= s.value("rocketmq_storage_message_reserve_time_milliseconds", **store) <= bound_ms
    up = s.find("rocketmq_proxy_up")
    assert len(up) == 1 and up[0].value == 1 and up[0].labels["node_type"] == "proxy", up


async def _scraped_with_dead_letters(http: str) -> Scrape | None:
    s = await scrape(http)
    return s if s.total("rocketmq_send_to_dlq_messages_total") >= 2 else None


async def test_rocketmq_families_can_be_turned_off(cluster: Cluster) -> None:
    ns = cluster.namesrv()
    port = free_port()
    b = cluster.broker(ns.addr, "broker-off", "--http-listen-port", str(port), "--http-metrics-rocketmq-names", "false")
    conn = await connect("127.0.0.1", b.port)
    try:
        await create_topic(conn, "Off", 1)
        await wire.send_message(conn, "Off", b"x", queue_id=0)
        s = await scrape(f"http://127.0.0.1:{port}")
    finally:
        conn.close()
    assert s.value("sievemq_messages_in_total", topic="Off") == 1
    assert not [f for f in s.families if f.startswith("rocketmq_")], s.families
