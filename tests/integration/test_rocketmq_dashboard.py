"""The requests apache/rocketmq-dashboard makes of a sievemq cluster, kept as tests (docs/compat.md, "The official
dashboard").

No build of the dashboard is published to Maven Central, so it was built from its source (2.1.1-SNAPSHOT, its
RocketMQ 5.3.3 admin client) and run by hand against `sievemq dev` while every page was used; each request it sent
was recorded with its fields, and the ones below are what its cluster, topic, consumer, message, message-trace and
OPS pages need. The fields are the dashboard's own (its ``ReqT``, ``bname``, ``lo`` extras included); the checks are
on the answer fields its pages read.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

from sievemq import Message, Producer, PushConsumer
from sievemq.acl.signature import RequestSigner
from sievemq.client.options import ClientOptions
from sievemq.remoting.codes import RequestCode as C
from sievemq.remoting.codes import ResponseCode
from sievemq.remoting.connection import Connection
from tests.integration.conftest import Cluster, OpenConn
from tests.integration.helpers import call, eventually
from tests.support.procs import Proc

TOPIC, GROUP = "DashT", "DashG"


async def ok(conn: Connection, code: int, fields: dict[str, Any] | None = None, body: bytes = b"") -> bytes:
    """The answer's body to a request the dashboard sends; AssertionError unless it succeeded."""
    resp = await call(conn, code, fields, body)
    assert resp.code == ResponseCode.SUCCESS, (code, resp.code, resp.remark)
    return resp.body


async def _traffic(namesrv: str) -> tuple[str, PushConsumer]:
    """Ten messages (five TagA) sent with traces on, and a consumer of TagA that has consumed them."""
    got: list[Any] = []
    async with Producer(namesrv, "DashP", options=ClientOptions(trace=True)) as p:
        ids = [(await p.send(Message(TOPIC, f"m{i}".encode(), tags="TagA" if i % 2 else "TagB",
                                     keys=[f"k{i}"]))).msg_id for i in range(10)]  # fmt: skip
    consumer = PushConsumer(namesrv, GROUP, consume_from="first")
    consumer.subscribe(TOPIC, "TagA")

    @consumer.listener
    async def on(msgs: list[Any]) -> None:
        got.extend(msgs)

    await consumer.start()
    await eventually(lambda: len({m.msg_id for m in got}) >= 5, what="the consumer reading its five messages")
    return ids[-1], consumer


async def test_the_dashboards_pages_get_what_they_read(ns: Proc, broker: Proc, open_conn: OpenConn) -> None:
    n, b = await open_conn(ns), await open_conn(broker)
    msg_id, consumer = await _traffic(ns.addr)
    try:
        # Cluster page: the cluster, then each broker's runtime figures
        info = orjson.loads(await ok(n, C.GET_BROKER_CLUSTER_INFO))
        assert info["brokerAddrTable"]["broker-a"]["brokerAddrs"]["0"] == broker.addr
        assert "broker-a" in info["clusterAddrTable"]["DefaultCluster"]
        table = orjson.loads(await ok(b, C.GET_BROKER_RUNTIME_INFO))["table"]
        for key in ("msgPutTotalTodayNow", "msgGetTotalTodayNow", "msgPutTotalTodayMorning", "msgGetTotalTodayMorning",
                    "msgPutTotalYesterdayMorning", "msgGetTotalYesterdayMorning", "putTps", "getTransferredTps",
                    "brokerVersionDesc"):  # fmt: skip
            assert key in table, key
        # Topic page: every topic (the name server's, less its "system topics" (304) and the broker's own (305)),
        # and each topic's type from the broker's configs
        assert TOPIC in orjson.loads(await ok(n, C.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))["topicList"]
        system = orjson.loads(await ok(n, C.GET_SYSTEM_TOPIC_LIST_FROM_NS))
        assert {"DefaultCluster", "broker-a"} <= set(system["topicList"]) and system["brokerAddr"] == broker.addr
        assert "TBW102" in orjson.loads(await ok(b, C.GET_SYSTEM_TOPIC_LIST_FROM_BROKER))["topicList"]
        await ok(b, C.UPDATE_AND_CREATE_TOPIC, {
            "readQueueNums": "4", "perm": "6", "writeQueueNums": "4", "topicFilterType": "SINGLE_TAG",
            "topic": "DashNew", "attributes": "+message.type=NORMAL", "force": "false", "defaultTopic": "TBW102",
            "order": "false", "topicSysFlag": "0"})  # fmt: skip
        configs = orjson.loads(await ok(b, C.GET_ALL_TOPIC_CONFIG))["topicConfigTable"]
        assert configs["DashNew"]["attributes"] == {"message.type": "NORMAL"}  # listed as NORMAL, not UNSPECIFIED
        one = orjson.loads(await ok(b, C.GET_TOPIC_CONFIG, {"topic": "DashNew"}))
        assert one["attributes"] == {"message.type": "NORMAL"} and one["writeQueueNums"] == 4
        refused = await call(b, C.UPDATE_AND_CREATE_TOPIC, {"topic": "DashNew", "attributes": "+queue.type=BatchCQ"})
        assert refused.code == ResponseCode.SYSTEM_ERROR and refused.ext_fields.get("reason") == "INVALID_HEADER"
        route = orjson.loads(await ok(n, C.GET_ROUTEINFO_BY_TOPIC, {"ReqT": "0", "topic": TOPIC}))
        assert route["queueDatas"][0]["brokerName"] == "broker-a"
        stats = orjson.loads(await ok(b, C.VIEW_BROKER_STATS_DATA, {"statsName": "TOPIC_PUT_NUMS", "statsKey": TOPIC}))
        assert stats["statsDay"]["sum"] == 10
        assert GROUP in orjson.loads(await ok(b, C.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": TOPIC}))["groupList"]
        # Consumer page: the groups, their clients and subscriptions, their progress, one client's running info
        groups = orjson.loads(await ok(b, C.GET_ALL_SUBSCRIPTIONGROUP_CONFIG))["subscriptionGroupTable"]
        assert GROUP in groups
        conns = orjson.loads(await ok(b, C.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": GROUP}))
        client_id = conns["connectionSet"][0]["clientId"]
        assert conns["subscriptionTable"][TOPIC]["subString"] == "TagA"
        progress = await ok(b, C.GET_CONSUME_STATS, {"topic": TOPIC, "consumerGroup": GROUP})
        assert b'"consumerOffset"' in progress and f'"topic":"{TOPIC}"'.encode() in progress
        running = await ok(b, C.GET_CONSUMER_RUNNING_INFO,
                           {"clientId": client_id, "jstackEnable": "false", "consumerGroup": GROUP})  # fmt: skip
        assert b'"subscriptionSet"' in running and b'"mqTable"' in running
        await ok(b, C.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=orjson.dumps({
            "groupName": "DashNewG", "consumeEnable": True, "consumeFromMinEnable": True,
            "consumeBroadcastEnable": True, "retryQueueNums": 1, "retryMaxTimes": 16, "brokerId": 0,
            "whichBrokerWhenConsumeSlowly": 1, "attributes": {}}))  # fmt: skip
        await ok(b, C.DELETE_SUBSCRIPTIONGROUP, {"groupName": "DashNewG", "cleanOffset": "true"})
        # "Reset offset" to the first message, through the broker (the consumer follows)
        reset = await ok(b, C.INVOKE_BROKER_TO_RESET_OFFSET, {"queueId": "-1", "offset": "-1", "topic": TOPIC,
                                                              "isForce": "true", "group": GROUP, "timestamp": "0"})
        assert b'"offsetTable"' in reset
        # Message page: by time, by key and by id; the message-trace page: the trace records keyed by the id
        first = await ok(b, C.SEARCH_OFFSET_BY_TIMESTAMP, {"queueId": "0", "boundaryType": "LOWER", "timestamp": "0",
                                                           "bname": "broker-a", "ReqT": "0", "topic": TOPIC})
        assert first == b""
        by_id = await ok(b, C.QUERY_MESSAGE, {"maxNum": "32", "beginTimestamp": "0", "key": msg_id,
                                              "_UNIQUE_KEY_QUERY": "true", "topic": TOPIC,
                                              "endTimestamp": "9223372036854775807"})  # fmt: skip
        assert msg_id.encode() in by_id

        async def traced() -> bool:
            resp = await call(b, C.QUERY_MESSAGE, {"maxNum": "32", "beginTimestamp": "0", "key": msg_id,
                                                   "topic": "RMQ_SYS_TRACE_TOPIC",
                                                   "endTimestamp": "9223372036854775807"})  # fmt: skip
            return resp.code == ResponseCode.SUCCESS and msg_id.encode() in resp.body

        await eventually(traced, what="the send's trace record, found by the message id as the dashboard looks it up")
    finally:
        await asyncio.wait_for(consumer.close(), 30)


async def test_the_dashboards_acl_page_manages_users_and_policies(cluster: Cluster, ns: Proc,
                                                                  open_conn: OpenConn) -> None:  # fmt: skip
    """Its ACL page (ACL 2.0 on, the dashboard signing as a super user), with its own fields and bodies: listing with
    empty filters, creating, changing and deleting a user and a policy."""
    init = orjson.dumps({"username": "rocketmq2", "password": "12345678"}).decode()
    broker = cluster.broker(ns.addr, "broker-a", "--authentication-enabled", "true", "--authorization-enabled",
                            "true", "--init-authentication-user", init)  # fmt: skip
    b = await open_conn(broker)
    b.rpc_hook = RequestSigner("rocketmq2", "12345678", strict=False)  # as RocketMQ's AclClientRPCHook signs
    users = orjson.loads(await ok(b, C.AUTH_LIST_USER, {"filter": ""}))
    assert [u["username"] for u in users] == ["rocketmq2"] and users[0]["userType"] == "Super"
    assert await ok(b, C.AUTH_LIST_ACL, {"subjectFilter": "", "resourceFilter": ""}) == b"", "none: no body (RocketMQ)"
    await ok(b, C.AUTH_CREATE_USER, {"username": "alice"}, orjson.dumps(
        {"password": "alice-pass-1", "userStatus": "enable", "userType": "Normal", "username": "alice"}))
    policy = {"policies": [{"entries": [{"actions": ["Pub", "Sub"], "decision": "Allow", "resource": "Topic:orders",
                                         "sourceIps": ["127.0.0.1"]}], "policyType": "Custom"}],
              "subject": "User:alice"}  # fmt: skip
    await ok(b, C.AUTH_CREATE_ACL, {"subject": "User:alice"}, orjson.dumps(policy))
    acls = orjson.loads(await ok(b, C.AUTH_LIST_ACL, {"subjectFilter": "", "resourceFilter": ""}))
    assert acls[0]["subject"] == "User:alice"
    assert acls[0]["policies"][0]["entries"][0]["resource"] == "Topic:orders"
    await ok(b, C.AUTH_UPDATE_USER, {"username": "alice"}, orjson.dumps(
        {"password": "alice-pass-2", "userStatus": "disable", "userType": "Normal", "username": "alice"}))
    users = orjson.loads(await ok(b, C.AUTH_LIST_USER, {"filter": ""}))
    assert {u["username"]: u["userStatus"] for u in users} == {"alice": "disable", "rocketmq2": "enable"}
    await ok(b, C.AUTH_DELETE_ACL, {"subject": "User:alice", "resource": "Topic:orders"})
    await ok(b, C.AUTH_DELETE_USER, {"username": "alice"})
    assert await ok(b, C.AUTH_LIST_ACL, {"subjectFilter": "", "resourceFilter": ""}) == b""
    assert [u["username"] for u in orjson.loads(await ok(b, C.AUTH_LIST_USER, {"filter": ""}))] == ["rocketmq2"]
