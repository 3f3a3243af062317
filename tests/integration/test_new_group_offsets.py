"""QUERY_CONSUMER_OFFSET for a group without a committed offset, on the wire (real brokers; broker/offset_rules.py):
RocketMQ's answer by default (0 for a young queue), QUERY_NOT_FOUND when the request says setZeroIfNotFound=false,
and with newGroupStartsAtEnd for groups new to the topic."""

from __future__ import annotations

from sievemq.remoting.codes import RequestCode, ResponseCode
from tests.integration.conftest import Cluster, OpenConn
from tests.integration.helpers import call, create_group, create_topic
from tests.support import wire

TOPIC = "YoungTopic"


async def _query(conn, group: str, queue_id: int, **extra: str) -> tuple[int, str | None]:  # type: ignore[no-untyped-def]
    fields = {"consumerGroup": group, "topic": TOPIC, "queueId": queue_id, **extra}
    resp = await call(conn, RequestCode.QUERY_CONSUMER_OFFSET, fields)
    return resp.code, resp.ext_fields.get("offset")


async def _young_topic(conn) -> None:  # type: ignore[no-untyped-def]
    await create_topic(conn, TOPIC, queues=2)
    for q in (0, 1):
        for i in range(3):
            await wire.send_message(conn, TOPIC, f"m{i}".encode(), queue_id=q)


async def test_rocketmq_rule_by_default_and_set_zero_if_not_found(cluster: Cluster, open_conn: OpenConn) -> None:
    ns = cluster.namesrv()
    conn = await open_conn(cluster.broker(ns.addr))
    await _young_topic(conn)
    assert await _query(conn, "new-group", 0) == (ResponseCode.SUCCESS, "0"), "a young queue: offset 0"
    assert (await _query(conn, "new-group", 0, setZeroIfNotFound="false"))[0] == ResponseCode.QUERY_NOT_FOUND
    assert await _query(conn, "new-group", 0, setZeroIfNotFound="true") == (ResponseCode.SUCCESS, "0")
    await create_group(conn, "new-group")  # a broker takes commits of the groups it has (a heartbeat makes one)
    resp = await call(conn, RequestCode.UPDATE_CONSUMER_OFFSET,
                      {"consumerGroup": "new-group", "topic": TOPIC, "queueId": 0, "commitOffset": 2})  # fmt: skip
    assert resp.code == ResponseCode.SUCCESS
    assert await _query(conn, "new-group", 0, setZeroIfNotFound="false") == (ResponseCode.SUCCESS, "2")


async def test_new_group_starts_at_end(cluster: Cluster, open_conn: OpenConn) -> None:
    ns = cluster.namesrv()
    conn = await open_conn(cluster.broker(ns.addr, "broker-a", "--new-group-starts-at-end", "true"))
    await _young_topic(conn)
    assert (await _query(conn, "g", 0))[0] == ResponseCode.QUERY_NOT_FOUND, "a new group is told it has no offset"
    assert (await _query(conn, "g", 1))[0] == ResponseCode.QUERY_NOT_FOUND
    await create_group(conn, "g")
    resp = await call(conn, RequestCode.UPDATE_CONSUMER_OFFSET,
                      {"consumerGroup": "g", "topic": TOPIC, "queueId": 0, "commitOffset": 3})  # fmt: skip
    assert resp.code == ResponseCode.SUCCESS
    assert await _query(conn, "g", 0) == (ResponseCode.SUCCESS, "3")
    assert await _query(conn, "g", 1) == (ResponseCode.SUCCESS, "0"), (
        "a group that has offsets of the topic reads a queue it has none of (added later) from its first message"
    )
    assert (await _query(conn, "g", 1, setZeroIfNotFound="false"))[0] == ResponseCode.QUERY_NOT_FOUND
