"""What the client answers to GET_CONSUMER_RUNNING_INFO (307): the consumers' properties under RocketMQ's names, the
per-queue state a ProcessQueue reports, the pull rate, and BrokerRequests' answer (no sockets: consumers that were
never started)."""

from __future__ import annotations

import time

import orjson

from sievemq.client.broker_requests import BrokerRequests
from sievemq.client.members import ConsumerLike
from sievemq.client.process_queue import ProcessQueue
from sievemq.client.pull_consumer import PullConsumer
from sievemq.client.push_consumer import PushConsumer
from sievemq.client.request_reply import ReplyWaiters
from sievemq.client.running_info import CLIENT_VERSION, PulledCounter, java_time
from sievemq.protocol.message import MessageExt
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand


def _requests(*consumers: ConsumerLike) -> BrokerRequests:
    return BrokerRequests("127.0.0.1@c", {}, {c.group: c for c in consumers}, ReplyWaiters(),
                          rebalance_now=lambda: None, relay=lambda: None, background=set())  # fmt: skip


def _ask(requests: BrokerRequests, group: str, jstack: bool = False) -> RemotingCommand:
    fields = {"consumerGroup": group, "clientId": "127.0.0.1@c", "jstackEnable": str(jstack).lower()}
    return requests.running_info(RemotingCommand.request(RequestCode.GET_CONSUMER_RUNNING_INFO, fields))


def _push(**kw: object) -> PushConsumer:
    c = PushConsumer("127.0.0.1:1", "G", instance_name="c", concurrency=4, pull_batch_size=16, suspend=2.5,
                     max_cached_mib=7, **kw)  # type: ignore[arg-type]  # fmt: skip
    c.subscribe("T", "b || a")
    return c


def test_a_push_consumer_tells_its_settings_under_rocketmqs_names() -> None:
    doc = orjson.loads(_ask(_requests(_push(orderly=True)), "G").body)
    p = doc["properties"]
    assert p["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY" and p["PROP_CONSUMEORDERLY"] == "true"
    assert p["PROP_THREADPOOL_CORE_SIZE"] == "4" and p["consumeThreadMax"] == "4"
    assert p["PROP_NAMESERVER_ADDR"] == "127.0.0.1:1;" and p["namesrvAddr"] == "127.0.0.1:1"
    assert p["PROP_CLIENT_VERSION"] == CLIENT_VERSION and p["PROP_CONSUMER_START_TIMESTAMP"] == "0"
    assert p["pullBatchSize"] == "16" and p["suspendCurrentQueueTimeMillis"] == "2500"
    assert p["pullThresholdSizeForQueue"] == "7" and p["messageModel"] == "CLUSTERING"
    assert p["consumerGroup"] == "G" and p["instanceName"] == "c" and p["heartbeatBrokerInterval"] == "30000"
    assert p["consumeFromWhere"] == "CONSUME_FROM_LAST_OFFSET" and len(p["consumeTimestamp"]) == 14
    assert [(s["topic"], s["subString"]) for s in doc["subscriptionSet"]] == [("%RETRY%G", "*"), ("T", "b || a")]
    assert set(doc["statusTable"]) == {"%RETRY%G", "T"} and doc["mqTable"] == {}
    assert "jstack" not in doc


def test_a_broadcasting_consumer_has_no_retry_subscription() -> None:
    doc = orjson.loads(_ask(_requests(_push(broadcasting=True)), "G").body)
    assert doc["properties"]["messageModel"] == "BROADCASTING"
    assert [s["topic"] for s in doc["subscriptionSet"]] == ["T"]


def test_a_pull_consumer_is_consume_actively() -> None:
    c = PullConsumer("127.0.0.1:1", "P", instance_name="c", auto_commit=True, pull_batch_size=8)
    c.subscribe("T")
    doc = orjson.loads(_ask(_requests(c), "P").body)
    p = doc["properties"]
    assert p["PROP_CONSUME_TYPE"] == "CONSUME_ACTIVELY" and "PROP_CONSUMEORDERLY" not in p
    assert p["autoCommit"] == "true" and p["pullBatchSize"] == "8" and p["autoCommitIntervalMillis"] == "5000"
    assert [s["topic"] for s in doc["subscriptionSet"]] == ["T"]


def test_a_group_without_a_consumer_here_is_a_system_error_with_rocketmqs_remark() -> None:
    got = _ask(_requests(_push()), "other")
    assert got.code == ResponseCode.SYSTEM_ERROR
    assert got.remark == "The Consumer Group <other> not exist in this consumer"


async def test_jstack_lists_the_threads_and_tasks_when_asked() -> None:
    doc = orjson.loads(_ask(_requests(_push()), "G", jstack=True).body)
    assert '"MainThread"' in doc["jstack"] and "Stack for <Task" in doc["jstack"]
    assert "test_jstack_lists_the_threads_and_tasks_when_asked" in doc["jstack"]


def test_a_process_queue_reports_what_waits_and_since_when_it_stood_still() -> None:
    pq = ProcessQueue(10)
    before = int(time.time() * 1000)
    pq.last_consume_ms = 0  # long idle
    pq.add([MessageExt("T", b"x" * (1 << 20), queue_offset=o) for o in (10, 11, 12)], 13)
    info = pq.info(10, locked=True, last_lock_ms=5)
    assert (info.cached_min_offset, info.cached_max_offset, info.cached_count, info.cached_size_mib) == (10, 12, 3, 3)
    assert info.commit_offset == 10 and info.locked and info.last_lock_ms == 5 and not info.dropped
    assert info.last_consume_ms >= before  # messages arrived at an idle queue: it moves from now on
    pq.last_consume_ms = 0
    pq.add([MessageExt("T", b"", queue_offset=13)], 14)
    assert pq.info(10).last_consume_ms == 0  # more arrived behind waiting ones: still standing still
    pq.complete([10])
    assert pq.info(11).last_consume_ms >= before and pq.info(11).cached_count == 3


def test_the_pull_rate_counts_the_last_minute() -> None:
    now = [100.0]
    counter = PulledCounter(lambda: now[0])
    assert counter.tps("T") == 0.0
    now[0] = 110.0
    counter.add("T", 20)
    assert counter.tps("T") == 2.0  # 20 messages in the 10 s since it began
    now[0] = 170.0
    counter.add("T", 30)
    assert counter.tps("T") == 50 / 60
    now[0] = 171.0
    assert counter.tps("T") == 30 / 60  # the first batch is more than a minute old
    assert counter.tps("U") == 0.0


def test_java_time_is_local_yyyymmddhhmmss() -> None:
    ms = int(time.mktime((2024, 3, 5, 6, 7, 8, 0, 0, -1)) * 1000)
    assert java_time(ms) == "20240305060708"
