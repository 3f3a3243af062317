"""ConsumerRunningInfo (GET_CONSUMER_RUNNING_INFO 307) as RocketMQ's fastjson writes it and its Java classes read it:
``ConsumerRunningInfo``, ``ProcessQueueInfo``, ``ConsumeStatus``, ``SubscriptionData`` (field names, types, order)."""

from __future__ import annotations

import orjson

from sievemq.protocol import mq_json
from sievemq.protocol.heartbeat import Subscription
from sievemq.protocol.mq_json import QueueKey
from sievemq.protocol.running_info import (
    PROP_CONSUME_ORDERLY,
    PROP_CONSUME_TYPE,
    ConsumerRunningInfo,
    ConsumeStatus,
    ProcessQueueInfo,
    namesrv_property,
)

PQ_FIELDS = {  # ProcessQueueInfo's fields and their Java types
    "commitOffset": int, "cachedMsgMinOffset": int, "cachedMsgMaxOffset": int, "cachedMsgCount": int,
    "cachedMsgSizeInMiB": int, "transactionMsgMinOffset": int, "transactionMsgMaxOffset": int,
    "transactionMsgCount": int, "locked": bool, "tryUnlockTimes": int, "lastLockTimestamp": int, "droped": bool,
    "lastPullTimestamp": int, "lastConsumeTimestamp": int,
}  # fmt: skip
STATUS_FIELDS = {"pullRT": float, "pullTPS": float, "consumeRT": float, "consumeOKTPS": float,
                 "consumeFailedTPS": float, "consumeFailedMsgs": int}  # fmt: skip
SUB_FIELDS = {"classFilterMode", "topic", "subString", "tagsSet", "codeSet", "subVersion", "expressionType"}


def _info() -> ConsumerRunningInfo:
    subs = [Subscription("T", "b || a", sub_version=7, tags=frozenset({"a", "b"})),
            Subscription("%RETRY%G", "*", sub_version=8)]  # fmt: skip
    queues = {
        QueueKey("T", "broker-a", 1): ProcessQueueInfo(commit_offset=5, cached_min_offset=5, cached_max_offset=6,
                                                       cached_count=2, locked=True, last_pull_ms=1700000000001),
        QueueKey("T", "broker-a", 0): ProcessQueueInfo(commit_offset=3),
    }  # fmt: skip
    props = {PROP_CONSUME_TYPE: "CONSUME_PASSIVELY", PROP_CONSUME_ORDERLY: "false", "consumerGroup": "G"}
    return ConsumerRunningInfo(props, subs, queues, {"T": ConsumeStatus(pull_tps=1.5), "%RETRY%G": ConsumeStatus()})


def test_the_body_is_what_fastjson_writes() -> None:
    pq0 = ('{"cachedMsgCount":0,"cachedMsgMaxOffset":0,"cachedMsgMinOffset":0,"cachedMsgSizeInMiB":0,'
           '"commitOffset":3,"droped":false,"lastConsumeTimestamp":0,"lastLockTimestamp":0,"lastPullTimestamp":0,'
           '"locked":false,"transactionMsgCount":0,"transactionMsgMaxOffset":0,"transactionMsgMinOffset":0,'
           '"tryUnlockTimes":0}')  # fmt: skip
    pq1 = ('{"cachedMsgCount":2,"cachedMsgMaxOffset":6,"cachedMsgMinOffset":5,"cachedMsgSizeInMiB":0,'
           '"commitOffset":5,"droped":false,"lastConsumeTimestamp":0,"lastLockTimestamp":0,'
           '"lastPullTimestamp":1700000000001,"locked":true,"transactionMsgCount":0,"transactionMsgMaxOffset":0,'
           '"transactionMsgMinOffset":0,"tryUnlockTimes":0}')  # fmt: skip
    zero = ('{"consumeFailedMsgs":0,"consumeFailedTPS":0.0,"consumeOKTPS":0.0,"consumeRT":0.0,"pullRT":0.0,'
            '"pullTPS":0.0}')  # fmt: skip
    expected = (
        '{"mqPopTable":{},"mqTable":{'
        '{"brokerName":"broker-a","queueId":0,"topic":"T"}:' + pq0 + ","
        '{"brokerName":"broker-a","queueId":1,"topic":"T"}:' + pq1 + "},"
        '"properties":{"PROP_CONSUMEORDERLY":"false","PROP_CONSUME_TYPE":"CONSUME_PASSIVELY","consumerGroup":"G"},'
        '"statusTable":{"%RETRY%G":' + zero + ',"T":' + zero.replace('"pullTPS":0.0', '"pullTPS":1.5') + "},"
        '"subscriptionSet":['
        '{"classFilterMode":false,"codeSet":[],"expressionType":"TAG","subString":"*","subVersion":8,"tagsSet":[],'
        '"topic":"%RETRY%G"},'
        '{"classFilterMode":false,"codeSet":[97,98],"expressionType":"TAG","subString":"b || a","subVersion":7,'
        '"tagsSet":["a","b"],"topic":"T"}],'
        '"userConsumerInfo":{}}'
    )
    assert _info().encode().decode() == expected


def test_every_field_of_the_java_classes_with_its_type() -> None:
    doc = mq_json.loads(_info().with_jstack("stacks").encode())
    assert set(doc) == {"properties", "subscriptionSet", "mqTable", "mqPopTable", "statusTable", "userConsumerInfo",
                        "jstack"}  # fmt: skip
    assert doc["jstack"] == "stacks"
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in doc["properties"].items())  # a Properties
    for key, pq in doc["mqTable"].items():
        assert isinstance(key, QueueKey)
        assert {k: type(v) for k, v in pq.items()} == PQ_FIELDS
    for status in doc["statusTable"].values():
        assert {k: type(v) for k, v in status.items()} == STATUS_FIELDS
    for sub in doc["subscriptionSet"]:
        assert set(sub) == SUB_FIELDS


def test_jstack_is_left_out_unless_asked() -> None:
    assert "jstack" not in orjson.loads(ConsumerRunningInfo({}).encode())


def test_subscriptions_are_one_per_topic_and_expression_in_java_string_order() -> None:
    subs = [Subscription("b", "*"), Subscription("B", "*"), Subscription("a", "x"), Subscription("b", "*", 9)]
    got = orjson.loads(ConsumerRunningInfo({}, subs).encode())["subscriptionSet"]
    assert [(s["topic"], s["subVersion"]) for s in got] == [("B", 0), ("a", 0), ("b", 0)]  # TreeSet: topic@subString


def test_name_servers_end_with_a_semicolon_each() -> None:
    assert namesrv_property(["127.0.0.1:9876", "10.0.0.1:9876"]) == "127.0.0.1:9876;10.0.0.1:9876;"
    assert namesrv_property([]) == ""
