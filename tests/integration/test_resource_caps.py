"""One client cannot make a broker hold topics and consumer groups without end (``maxTopics``,
``maxSubscriptionGroups``): with auto-creation on, every send to a new topic made a topic (a 6 MB consume-queue file
per queue that holds messages: 2,000 sends to new topics took 12 GB of disk and 4,000 file descriptors before these
limits), and every request of a new group made a group. Past the limits the creation is refused with a stable
reason, nothing is stored, and the topics and groups that exist go on working."""

from __future__ import annotations

from sievemq.client import api
from sievemq.errors import RemotingError
from sievemq.protocol.heartbeat import ConsumerData, HeartbeatData, Subscription
from sievemq.protocol.reasons import REASON_FIELD, Reason
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.connection import Connection
from tests.integration.conftest import Cluster, OpenConn
from tests.integration.helpers import SUB_ALL, call, pull_all
from tests.support.wire import send_message


async def _send(conn: Connection, topic: str, body: bytes = b"x") -> tuple[int, str]:
    try:
        await send_message(conn, topic, body, queue_id=0)
    except RemotingError as e:
        return e.code, e.reason or ""
    return ResponseCode.SUCCESS, ""


async def test_topics_past_max_topics_are_not_created_and_the_others_go_on(cluster: Cluster,
                                                                           open_conn: OpenConn) -> None:  # fmt: skip
    ns = cluster.namesrv()
    broker = cluster.broker(ns.addr, "broker-capped", "--max-topics", "3")
    conn = await open_conn(broker)
    for topic in ("CapA", "CapB", "CapC"):
        assert await _send(conn, topic) == (ResponseCode.SUCCESS, ""), topic
    code, reason = await _send(conn, "CapD")
    assert (code, reason) == (ResponseCode.SYSTEM_ERROR, Reason.TOO_MANY_TOPICS), (code, reason)
    resp = await call(conn, RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "CapE", "readQueueNums": 1,
                                                                  "writeQueueNums": 1, "perm": 6})  # fmt: skip
    assert resp.ext_fields.get(REASON_FIELD) == Reason.TOO_MANY_TOPICS and "maxTopics (3)" in (resp.remark or ""), resp
    assert await _send(conn, "CapA", b"still") == (ResponseCode.SUCCESS, "")
    assert [m.body for m in await pull_all(conn, "CapA", 0)] == [b"x", b"still"]
    # groups' retry topics do not count: a group still gets its retry topic
    consumer = ConsumerData("CapG", "CONSUME_PASSIVELY", "CLUSTERING", "CONSUME_FROM_LAST_OFFSET",
                            [Subscription("CapA", "*")])  # fmt: skip
    hb = HeartbeatData("cap-client", [], [consumer])
    await api.heartbeat(conn, hb)
    topics = (await call(conn, RequestCode.GET_ALL_TOPIC_CONFIG)).body.decode()
    assert "%RETRY%CapG" in topics and "CapD" not in topics and "CapE" not in topics
    # room again after a delete
    resp = await call(conn, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "CapC"})
    assert resp.code == ResponseCode.SUCCESS, resp
    assert await _send(conn, "CapD") == (ResponseCode.SUCCESS, "")


async def test_groups_past_max_subscription_groups_are_refused_and_the_others_go_on(
    cluster: Cluster, open_conn: OpenConn
) -> None:
    ns = cluster.namesrv()
    broker = cluster.broker(ns.addr, "broker-capped-groups", "--max-subscription-groups", "2")
    conn = await open_conn(broker)
    assert await _send(conn, "CapT") == (ResponseCode.SUCCESS, "")
    for group in ("G1", "G2"):
        r = await api.pull_message(conn, group, "CapT", 0, 0, max_nums=32, subscription=SUB_ALL)
        assert r.code in (ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND), (group, r.code, r.remark)
    r = await api.pull_message(conn, "G3", "CapT", 0, 0, max_nums=32, subscription=SUB_ALL)
    assert (r.code, r.reason) == (ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, Reason.TOO_MANY_GROUPS), (r.code, r.remark)
    assert "maxSubscriptionGroups (2)" in (r.remark or ""), r.remark  # names the setting to raise
    # a heartbeat naming a group past the limit still succeeds for the client's other groups
    hb = HeartbeatData("cap-client", [], [
        ConsumerData(g, "CONSUME_PASSIVELY", "CLUSTERING", "CONSUME_FROM_LAST_OFFSET", [Subscription("CapT", "*")])
        for g in ("G1", "G4")
    ])  # fmt: skip
    answer = await api.heartbeat(conn, hb)
    assert not answer.refused, answer
    consumers = await call(conn, RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "G1"})
    assert consumers.code == ResponseCode.SUCCESS and b"cap-client" in consumers.body, consumers
    nobody = await call(conn, RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "G4"})
    assert nobody.code != ResponseCode.SUCCESS or b"cap-client" not in nobody.body, "G4 was registered"
    assert [m.body for m in await pull_all(conn, "CapT", 0, group="G2")] == [b"x"], "an existing group reads on"
