"""The codes RocketMQ's mqadmin sends that sievemq answers as RocketMQ does (docs/admin.md §10), called directly
with their services. tests/compat/test_mqadmin.py compares the same answers with Apache RocketMQ's through mqadmin."""

from __future__ import annotations

import time

import orjson
import pytest

from sievemq.broker.clients import ClientChannel
from sievemq.broker.config import BrokerConfig
from sievemq.broker.processors.admin import AdminProcessor, AdminSettings
from sievemq.broker.processors.broker_admin import BrokerAdminProcessor
from sievemq.broker.processors.client_admin import MAX_ASKING, ClientAdminProcessor
from sievemq.broker.processors.consume_stats import ConsumeStatsProcessor
from sievemq.broker.processors.query import QueryProcessor
from sievemq.errors import RemotingError
from sievemq.protocol.heartbeat import ConsumerData, Subscription
from sievemq.protocol.mq_json import loads
from sievemq.protocol.reasons import Reason
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection
from tests.unit.broker.conftest import BROKER, CLUSTER, Parts

ADDR = "10.1.2.3:10911"


def admin_of(parts: Parts, extra: dict[str, str] | None = None) -> AdminProcessor:
    async def register_now() -> None:
        return None

    return AdminProcessor(
        parts.topics, parts.groups, parts.offsets, parts.store, parts.consumers, parts.hold, parts.stats,
        parts.writer, register_now, AdminSettings(BROKER, CLUSTER, ADDR, 4),
        extra_info=lambda: dict(extra or {}),
    )  # fmt: skip


def req(code: int, fields: dict[str, object] | None = None, body: bytes = b"") -> RemotingCommand:
    return RemotingCommand.request(code, fields or {}, body)


async def test_runtime_info_has_the_entries_clusterlist_reads(parts: Parts) -> None:
    """clusterList showed "#InTPS 0.00(null,nullms)", "#PCWait null", "#Hour 0.00" and "#ACTIVATED false"
    against sievemq: the entries it reads were missing."""
    empty = await admin_of(parts, {"brokerRole": "ASYNC_MASTER"}).runtime_info(parts.conn(), req(28))
    table = orjson.loads(empty.body)["table"]
    assert table["earliestMessageTimeStamp"] == "-1" and table["commitLogMinOffset"] == "-1"
    before = int(time.time() * 1000)
    await parts.put("T", b"x")
    parts.stats.put("T", 1, 100)
    answer = await admin_of(parts, {"brokerRole": "ASYNC_MASTER"}).runtime_info(parts.conn(), req(28))
    table = orjson.loads(answer.body)["table"]
    for key in ("sendThreadPoolQueueSize", "sendThreadPoolQueueHeadWaitTimeMills", "pullThreadPoolQueueSize",
                "pullThreadPoolQueueHeadWaitTimeMills", "ackThreadPoolQueueSize",
                "ackThreadPoolQueueHeadWaitTimeMills", "pageCacheLockTimeMills"):  # fmt: skip
        assert table[key] == "0", key
    assert table["brokerActive"] == "true"
    assert before - 1000 <= int(table["earliestMessageTimeStamp"]) <= int(time.time() * 1000)
    assert table["commitLogMinOffset"] == "0" and int(table["commitLogMaxOffset"]) > 0
    assert table["msgPutTotalTodayNow"] == "1" and table["putMessageTimesTotal"] == "1"
    assert table["putMessageSizeTotal"] == "100" and table["putMessageAverageSize"] == "100.0"
    assert table["putTps"] == "  " and table["getTransferredTps"] == "  ", "no window covered yet: empty rates"
    assert table["msgPutTotalTodayMorning"] == table["msgPutTotalYesterdayMorning"] == "0"
    assert table["runtime"].startswith("[ 0 days, 0 hours, 0 minutes, ")
    assert table["brokerVersionDesc"].startswith("sievemq ")
    slave = await admin_of(parts, {"brokerRole": "SLAVE"}).runtime_info(parts.conn(), req(28))
    assert orjson.loads(slave.body)["table"]["brokerActive"] == "false"


async def test_topic_config_and_system_topics(parts: Parts) -> None:
    admin = admin_of(parts)
    await admin.create_topic(parts.conn(), req(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "T", "readQueueNums": 2,
                                                                                     "writeQueueNums": 2}))  # fmt: skip
    got = await admin.get_topic_config(parts.conn(), req(RequestCode.GET_TOPIC_CONFIG, {"topic": "T"}))
    assert orjson.loads(got.body) == {"attributes": {}, "order": False, "perm": 6, "readQueueNums": 2,
                                      "topicFilterType": "SINGLE_TAG", "topicName": "T", "topicSysFlag": 0,
                                      "writeQueueNums": 2}  # fmt: skip
    with pytest.raises(RemotingError) as e:
        await admin.get_topic_config(parts.conn(), req(RequestCode.GET_TOPIC_CONFIG, {"topic": "None"}))
    assert e.value.code == ResponseCode.TOPIC_NOT_EXIST
    system = orjson.loads((await admin.system_topics(parts.conn(), req(305))).body)["topicList"]
    assert {CLUSTER, BROKER, "TBW102", "SCHEDULE_TOPIC_XXXX", "SELF_TEST_TOPIC"} <= set(system)
    assert "T" not in system


async def test_topic_and_group_lists_create_all_or_nothing(parts: Parts) -> None:
    admin = admin_of(parts)
    rows = [{"topicName": "L1", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6}, {"topicName": "L2"}]
    body = orjson.dumps({"topicConfigList": rows})
    assert (await admin.create_topic_list(parts.conn(), req(18, body=body))).code == ResponseCode.SUCCESS
    assert parts.topics.get("L1").read_queue_nums == 2 and parts.topics.get("L2") is not None  # type: ignore[union-attr]
    for bad, reason in (([{"topicName": "ok1"}, {"topicName": "bad topic"}], Reason.INVALID_NAME),
                        ([{"topicName": "ok2"}, {"topicName": "TBW102"}], Reason.INVALID_NAME)):  # fmt: skip
        with pytest.raises(RemotingError) as e:
            await admin.create_topic_list(parts.conn(), req(18, body=orjson.dumps({"topicConfigList": bad})))
        assert (e.value.code, e.value.reason) == (ResponseCode.INVALID_PARAMETER, reason)
        assert parts.topics.get(bad[0]["topicName"]) is None, "nothing created"
    groups = orjson.dumps({"groupConfigList": [{"groupName": "G1"}, {"groupName": "G2", "retryMaxTimes": 3}]})
    assert (await admin.create_group_list(parts.conn(), req(225, body=groups))).code == ResponseCode.SUCCESS
    assert parts.groups.get("G2").retryMaxTimes == 3  # type: ignore[union-attr]
    with pytest.raises(RemotingError) as e:
        await admin.create_group_list(parts.conn(), req(225, body=orjson.dumps(
            {"groupConfigList": [{"groupName": "G3"}, {"groupName": "bad group"}]})))  # fmt: skip
    assert e.value.code == ResponseCode.INVALID_PARAMETER and parts.groups.get("G3") is None


def _channel(parts: Parts, client_id: str, peer: tuple[str, int]) -> tuple[Connection, ClientChannel]:
    conn = parts.conn(client_id, peer)
    return conn, ClientChannel(client_id, conn, "JAVA", 513, time.monotonic())


async def test_producer_connections_and_table(parts: Parts) -> None:
    _, ch = _channel(parts, "1.2.3.4@p", ("1.2.3.4", 5000))
    parts.producers.register("PG", ch)
    p = ClientAdminProcessor(parts.consumers, parts.producers)
    got = orjson.loads((await p.producer_connections(parts.conn(), req(204, {"producerGroup": "PG"}))).body)
    assert got == {"connectionSet": [{"clientAddr": "1.2.3.4:5000", "clientId": "1.2.3.4@p", "language": "JAVA",
                                      "version": 513}]}  # fmt: skip
    with pytest.raises(RemotingError) as e:
        await p.producer_connections(parts.conn(), req(204, {"producerGroup": "nobody"}))
    assert e.value.code == ResponseCode.SYSTEM_ERROR
    table = orjson.loads((await p.all_producers(parts.conn(), req(328))).body)["data"]
    (info,) = table["PG"]
    assert info["remoteIP"] == "/1.2.3.4:5000" and abs(info["lastUpdateTimestamp"] - time.time() * 1000) < 60_000


async def test_consumer_running_info_is_asked_of_the_client(parts: Parts) -> None:
    asked: list[RemotingCommand] = []

    class Client(Connection):
        async def request(self, cmd: RemotingCommand, timeout: float | None = None) -> RemotingCommand:
            asked.append(cmd)
            return cmd.response(ResponseCode.SUCCESS, body=b'{"properties":{}}')

    conn = Client()
    conn.peer = ("1.2.3.4", 5000)
    ch = ClientChannel("1.2.3.4@c", conn, "JAVA", 513, time.monotonic())
    parts.consumers.register(ch, ConsumerData("G", "CONSUME_PASSIVELY", "CLUSTERING", "CONSUME_FROM_LAST_OFFSET",
                                              [Subscription("T", "*")]))  # fmt: skip
    p = ClientAdminProcessor(parts.consumers, parts.producers)
    fields = {"consumerGroup": "G", "clientId": "1.2.3.4@c", "jstackEnable": "false"}
    got = await p.consumer_running_info(parts.conn(), req(307, fields))
    assert got.body == b'{"properties":{}}' and asked[0].code == 307 and asked[0].ext_fields == fields
    with pytest.raises(RemotingError) as e:
        await p.consumer_running_info(parts.conn(), req(307, {**fields, "clientId": "other"}))
    assert e.value.code == ResponseCode.SYSTEM_ERROR and "not online" in str(e.value)
    p.asking = MAX_ASKING
    with pytest.raises(RemotingError) as e:
        await p.consumer_running_info(parts.conn(), req(307, fields))
    assert e.value.code == ResponseCode.SYSTEM_BUSY and len(asked) == 1


async def test_broker_consume_stats_lists_every_group_with_offsets(parts: Parts) -> None:
    parts.topics.create_system_topic("T", 2)
    for _ in range(3):
        await parts.put("T", b"x", queue_id=1)
    parts.groups.update({"groupName": "G"})
    parts.offsets.commit("G", "T", 1, 2)
    p = ConsumeStatsProcessor(parts.offsets, parts.store, parts.topics, parts.consumers, BROKER,
                              group_names=lambda: parts.groups.table, broker_addr=ADDR)  # fmt: skip
    doc = loads((await p.broker_consume_stats(parts.conn(), req(317, {"isOrder": "false"}))).body)
    assert doc["brokerAddr"] == ADDR and doc["totalDiff"] == 1
    rows = [row for row in doc["consumeStatsList"] if "G" in row]
    (stats,) = rows[0]["G"]
    assert {(k.topic, k.queue_id): (v["brokerOffset"], v["consumerOffset"]) for k, v in stats["offsetTable"].items()} \
        == {("T", 0): (0, 0), ("T", 1): (3, 2)}  # fmt: skip
    ordered = loads((await p.broker_consume_stats(parts.conn(), req(317, {"isOrder": "true"}))).body)
    assert all(not v for row in ordered["consumeStatsList"] for v in row.values())


async def test_query_consume_queue(parts: Parts) -> None:
    first = await parts.put("T", b"a", TAGS="tagA")
    await parts.put("T", b"bb", TAGS="tagB")
    p = QueryProcessor(parts.store, parts.consumers)
    got = orjson.loads((await p.query_consume_queue(parts.conn(), req(321, {"topic": "T", "queueId": 0, "index": 0,
                                                                             "count": 5}))).body)  # fmt: skip
    assert (got["minQueueIndex"], got["maxQueueIndex"]) == (0, 2)
    rows = got["queueData"]
    assert rows[0]["physicOffset"] == first.commit_log_offset and len(rows) == 2
    assert rows[0]["physicSize"] == first.store_size and rows[0]["tagsCode"] == hash_tag("tagA")
    past = await p.query_consume_queue(parts.conn(), req(321, {"topic": "T", "queueId": 0, "index": 2, "count": 1}))
    assert past.code == ResponseCode.SUCCESS and not past.body and "is not exist" in (past.remark or "")
    with pytest.raises(RemotingError) as e:
        await p.query_consume_queue(parts.conn(), req(321, {"topic": "T", "queueId": 3, "index": 0, "count": 1}))
    assert e.value.code == ResponseCode.SYSTEM_ERROR
    offline = orjson.loads((await p.query_consume_queue(parts.conn(), req(321, {
        "topic": "T", "queueId": 0, "index": 0, "count": 1, "consumerGroup": "G"}))).body)  # fmt: skip
    assert offline["filterData"] == "G@T is not online!"


def hash_tag(tag: str) -> int:
    """Java's ``String.hashCode``: a tag's code in the consume queue."""
    h = 0
    for ch in tag:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


async def test_broker_config_clean_ups_and_stats(parts: Parts) -> None:
    config = BrokerConfig(broker_name=BROKER, acl_access_key="ak", acl_secret_key="sk")
    p = BrokerAdminProcessor(config, parts.topics, parts.store, parts.stats)
    got = await p.get_config(parts.conn(), req(26))
    props = dict(line.split("=", 1) for line in got.body.decode().splitlines())
    assert props["brokerName"] == BROKER and props["flushDiskType"] == "ASYNC_FLUSH"
    assert props["fileReservedTime"] == "72" and props["autoCreateTopicEnable"] == "true"
    assert "aclSecretKey" not in props and "ak" in props.values()
    assert orjson.loads(got.ext_fields["version"])["counter"] == 0
    await parts.put("Gone", b"x")
    await parts.put("SCHEDULE_TOPIC_XXXX", b"x")
    await p.clean_unused_queues(parts.conn(), req(316))
    assert "Gone" not in parts.store.topic_queues() and "SCHEDULE_TOPIC_XXXX" in parts.store.topic_queues()
    assert (await p.delete_expired_commitlog(parts.conn(), req(329))).code == ResponseCode.SUCCESS
    with pytest.raises(RemotingError):
        await p.stats_data(parts.conn(), req(315, {"statsName": "TOPIC_PUT_NUMS", "statsKey": "T"}))
    parts.stats.put("T", 3, 300)
    parts.stats.get("T", 2, 200, group="G")
    data = orjson.loads((await p.stats_data(parts.conn(), req(315, {"statsName": "TOPIC_PUT_NUMS",
                                                                     "statsKey": "T"}))).body)  # fmt: skip
    assert [data[k]["sum"] for k in ("statsMinute", "statsHour", "statsDay")] == [3, 3, 3]
    got = orjson.loads((await p.stats_data(parts.conn(), req(315, {"statsName": "GROUP_GET_NUMS",
                                                                    "statsKey": "T@G"}))).body)  # fmt: skip
    assert got["statsMinute"]["sum"] == 2 and got["statsMinute"]["avgpt"] == 2.0
