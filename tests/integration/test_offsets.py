"""Consumer offsets (query, update, pull piggyback, persistence across restarts), queue offsets, time search,
and message lookup by id and by key."""

from __future__ import annotations

import asyncio
import json
import time

from sievemq.client import api
from sievemq.protocol.msgid import UniqIdGenerator, parse_offset_msg_id
from sievemq.remoting.codes import RequestCode, ResponseCode
from tests.integration.conftest import Cluster, OpenConn
from tests.integration.helpers import (
    SUB_ALL,
    call,
    create_group,
    create_topic,
    decode_body_records,
    eventually,
    max_offset,
    min_offset,
    pull_all,
)
from tests.support import wire
from tests.support.procs import Proc

GROUP = "offset-group"
TOPIC = "OffTopic"


async def test_consumer_offsets_update_commit_and_survive_restarts(
    cluster: Cluster, ns: Proc, open_conn: OpenConn
) -> None:
    broker = cluster.broker(ns.addr)
    conn = await open_conn(broker)
    await create_topic(conn, TOPIC, queues=2)
    for i in range(10):
        await wire.send_message(conn, TOPIC, f"o{i}".encode(), queue_id=0)

    # A new group on a queue that still starts at 0 begins at 0.
    assert await min_offset(conn, TOPIC, 0) == 0
    assert await api.query_offset(conn, GROUP, TOPIC, 0) == 0
    assert await api.query_offset(conn, GROUP, TOPIC, 1) == 0

    await create_group(conn, GROUP)  # a broker takes commits of the groups it has (a heartbeat makes one)
    await api.update_offset(conn, GROUP, TOPIC, 0, 3)
    assert await api.query_offset(conn, GROUP, TOPIC, 0) == 3
    assert await api.query_offset(conn, "other-group", TOPIC, 0) == 0, "offsets are per group"

    # The pull piggyback: commitOffset with FLAG_COMMIT_OFFSET is stored...
    r = await api.pull_message(conn, GROUP, TOPIC, 0, 5, commit_offset=5)
    assert r.code == ResponseCode.SUCCESS
    assert await api.query_offset(conn, GROUP, TOPIC, 0) == 5
    # ...and without the flag it is not.
    resp = await call(
        conn,
        RequestCode.PULL_MESSAGE,
        {
            "consumerGroup": GROUP,
            "topic": TOPIC,
            "queueId": 0,
            "queueOffset": 7,
            "maxMsgNums": 1,
            "sysFlag": 0x4,
            "commitOffset": 7,
            "suspendTimeoutMillis": 0,
            "subscription": SUB_ALL,
            "subVersion": 0,
        },
    )
    assert resp.code == ResponseCode.SUCCESS
    assert await api.query_offset(conn, GROUP, TOPIC, 0) == 5

    # A clean stop persists offsets.
    conn.close()
    assert broker.stop() == 0
    broker = cluster.restart(broker)
    conn = await open_conn(broker)
    assert await api.query_offset(conn, GROUP, TOPIC, 0) == 5

    # kill -9 keeps what was persisted: the broker writes changed offsets to disk periodically.
    await api.update_offset(conn, GROUP, TOPIC, 0, 8)
    await api.update_offset(conn, GROUP, TOPIC, 1, 0)
    offsets_file = cluster.store_dir(broker) / "config" / "consumerOffset.json"
    await eventually(
        lambda: _persisted(offsets_file, f"{TOPIC}@{GROUP}") == {"0": 8, "1": 0},
        timeout=3.0,
        interval=0.05,
        what="offsets persisted by the periodic writer (every second)",
    )
    broker.kill9()
    broker = cluster.restart(broker)
    conn = await open_conn(broker)
    assert await api.query_offset(conn, GROUP, TOPIC, 0) == 8
    assert await api.query_offset(conn, GROUP, TOPIC, 1) == 0
    # The messages are still there too.
    assert [m.body for m in await pull_all(conn, TOPIC, 0)] == [f"o{i}".encode() for i in range(10)]


async def test_sync_flush_broker_has_an_answered_offset_commit_on_disk(
    cluster: Cluster, ns: Proc, open_conn: OpenConn
) -> None:
    """Under SYNC_FLUSH an UPDATE_CONSUMER_OFFSET that waits for its answer is on disk when answered:
    kill -9 right after the answer keeps it."""
    broker = cluster.broker(ns.addr, "broker-sync", flush="SYNC_FLUSH")
    conn = await open_conn(broker)
    await create_topic(conn, TOPIC, queues=1)
    for i in range(3):
        await wire.send_message(conn, TOPIC, f"s{i}".encode(), queue_id=0)
    await create_group(conn, GROUP)
    await api.update_offset(conn, GROUP, TOPIC, 0, 2)
    broker.kill9()
    broker = cluster.restart(broker)
    conn = await open_conn(broker)
    assert await api.query_offset(conn, GROUP, TOPIC, 0) == 2


def _persisted(path, key: str):  # type: ignore[no-untyped-def]
    try:
        return json.loads(path.read_text())["offsetTable"].get(key)
    except (FileNotFoundError, ValueError, KeyError):
        return None


async def test_queue_offsets_time_search_and_earliest_store_time(broker: Proc, open_conn: OpenConn) -> None:
    conn = await open_conn(broker)
    await create_topic(conn, "TimeTopic", queues=2)
    assert (await max_offset(conn, "TimeTopic", 0), await min_offset(conn, "TimeTopic", 0)) == (0, 0)
    for i in range(3):
        await wire.send_message(conn, "TimeTopic", f"t{i}".encode(), queue_id=0)
        await asyncio.sleep(0.05)  # spacing, so each message has its own store time
    assert await max_offset(conn, "TimeTopic", 0) == 3
    assert await min_offset(conn, "TimeTopic", 0) == 0
    assert await max_offset(conn, "TimeTopic", 1) == 0

    msgs = await pull_all(conn, "TimeTopic", 0)
    ts = [m.store_timestamp for m in msgs]
    assert ts == sorted(ts) and len(set(ts)) == 3, ts

    async def search(t: int, boundary: str | None = None) -> int:
        fields: dict[str, object] = {"topic": "TimeTopic", "queueId": 0, "timestamp": t}
        if boundary is not None:
            fields["boundaryType"] = boundary
        resp = await call(conn, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, fields)
        assert resp.code == ResponseCode.SUCCESS, resp
        return int(resp.ext_fields["offset"])

    assert [await search(t) for t in ts] == [0, 1, 2]
    assert await search(ts[0] - 60_000) == 0
    assert await search(ts[2] + 60_000) == 3, "after the last message: the max offset"
    # Between two messages: the later one (RocketMQ 5's lower boundary, also what "LOWER" asks); "UPPER" (any case,
    # as RocketMQ 5's clients send the enum's name): the earlier one.
    assert [await search(ts[0] + 1), await search(ts[0] + 1, "LOWER"), await search(ts[0] + 1, "upper")] == [1, 1, 0]
    assert await search(ts[2] + 60_000, "UPPER") == 2

    resp = await call(conn, RequestCode.GET_EARLIEST_MSG_STORETIME, {"topic": "TimeTopic", "queueId": 0})
    assert resp.code == ResponseCode.SUCCESS
    assert int(resp.ext_fields["timestamp"]) == ts[0]


async def test_view_message_by_id_and_query_by_key(broker: Proc, open_conn: OpenConn) -> None:
    conn = await open_conn(broker)
    uniq = UniqIdGenerator().next()
    first = await wire.send_message(
        conn, "KeyTopic", b"keyed-1", keys=["order-1", "shared"], properties={"UNIQ_KEY": uniq}, queue_id=0
    )
    await wire.send_message(conn, "KeyTopic", b"keyed-2", keys=["shared"], queue_id=0)
    await wire.send_message(conn, "OtherKeyTopic", b"other", keys=["order-1"], queue_id=0)

    # VIEW_MESSAGE_BY_ID: the msgId names this broker and the record's commit-log offset.
    host, port, phy = parse_offset_msg_id(first.msg_id)
    assert f"{host}:{port}" == broker.addr
    resp = await call(conn, RequestCode.VIEW_MESSAGE_BY_ID, {"offset": phy})
    assert resp.code == ResponseCode.SUCCESS
    (msg,) = decode_body_records(resp)
    assert (msg.topic, msg.body, msg.commit_log_offset, msg.offset_msg_id) == (
        "KeyTopic",
        b"keyed-1",
        phy,
        first.msg_id,
    )
    assert msg.keys == ["order-1", "shared"] and msg.uniq_key == uniq
    resp = await call(conn, RequestCode.VIEW_MESSAGE_BY_ID, {"offset": phy + 10**9})
    assert resp.code != ResponseCode.SUCCESS and resp.remark

    now = int(time.time() * 1000)

    async def query(key: str, topic: str = "KeyTopic", **extra: object):  # type: ignore[no-untyped-def]
        fields = {
            "topic": topic,
            "key": key,
            "maxNum": 32,
            "beginTimestamp": 0,
            "endTimestamp": now + 3_600_000,
            **extra,
        }
        return await call(conn, RequestCode.QUERY_MESSAGE, fields)

    resp = await query("order-1")
    assert resp.code == ResponseCode.SUCCESS, resp
    assert {"indexLastUpdateTimestamp", "indexLastUpdatePhyoffset"} <= set(resp.ext_fields)
    assert [m.body for m in decode_body_records(resp)] == [b"keyed-1"], "only this topic's message with the key"

    resp = await query("shared")
    assert sorted(m.body for m in decode_body_records(resp)) == [b"keyed-1", b"keyed-2"]

    resp = await query(uniq, _UNIQUE_KEY_QUERY="true")
    assert resp.code == ResponseCode.SUCCESS
    assert [m.uniq_key for m in decode_body_records(resp)] == [uniq]

    resp = await query("order-1", "OtherKeyTopic")
    assert [m.body for m in decode_body_records(resp)] == [b"other"]

    resp = await query("no-such-key")
    assert resp.code == ResponseCode.QUERY_NOT_FOUND

    # Time range outside the messages' store times finds nothing.
    resp = await query("order-1", beginTimestamp=now + 1_000_000, endTimestamp=now + 2_000_000)
    assert resp.code == ResponseCode.QUERY_NOT_FOUND
