"""Edges of the broker's behaviour that real clients run into: the pull status table, permissions, system topics,
one-way offset commits, other clients' heartbeat dialects, big messages, C/JS-style property strings."""

from __future__ import annotations

import asyncio
import signal
import time
import zlib

import orjson
import pytest

from sievemq.client import api
from sievemq.errors import ConnectionClosedError, RemotingError
from sievemq.protocol.batch import BatchEntry
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from tests.integration.conftest import Cluster, OpenConn
from tests.integration.helpers import (
    call,
    create_group,
    create_topic,
    decode_body_records,
    eventually,
    max_offset,
    pull_all,
    route_or_none,
    wait_held,
)
from tests.support import wire
from tests.support.procs import Proc

GROUP = "edge-group"


async def test_pull_status_table(broker: Proc, open_conn: OpenConn) -> None:
    """docs/protocol/requests.md §6: codes and nextBeginOffset for every position of the request offset."""
    conn = await open_conn(broker)
    await create_topic(conn, "StatusTopic", queues=2)
    for i in range(3):
        await wire.send_message(conn, "StatusTopic", f"s{i}".encode(), queue_id=0)

    async def pull(qid: int, offset: int) -> tuple[int, int]:
        r = await api.pull_message(conn, GROUP, "StatusTopic", qid, offset)
        return r.code, r.next_begin_offset

    assert await pull(0, 1) == (ResponseCode.SUCCESS, 3)
    assert await pull(0, 3) == (ResponseCode.PULL_NOT_FOUND, 3), "offset == max"
    assert await pull(0, 10) == (ResponseCode.PULL_OFFSET_MOVED, 3), "offset > max"
    assert await pull(1, 0) == (ResponseCode.PULL_NOT_FOUND, 0), "empty queue, offset 0"
    assert await pull(1, 5) == (ResponseCode.PULL_OFFSET_MOVED, 0), "empty queue, offset != 0"

    # An offset past the end is answered at once, even when the pull may be suspended.
    t0 = time.monotonic()
    r = await api.pull_message(conn, GROUP, "StatusTopic", 0, 10, suspend_ms=5000)
    assert r.code == ResponseCode.PULL_OFFSET_MOVED and time.monotonic() - t0 < 1.0

    # A queue id beyond readQueueNums is an error with a remark.
    r = await api.pull_message(conn, GROUP, "StatusTopic", 2, 0)
    assert r.code == ResponseCode.SYSTEM_ERROR and r.remark and "queueId" in r.remark
    # Pulled messages carry what RocketMQ 5's broker stores: WAIT as sent, and its CLUSTER, MSG_REGION, TRACE_ON.
    (m,) = (await api.pull_message(conn, GROUP, "StatusTopic", 0, 0, max_nums=1)).messages
    assert m.properties.get("WAIT") == "true" and m.properties.get("CLUSTER") == "DefaultCluster"
    assert (m.properties.get("MSG_REGION"), m.properties.get("TRACE_ON")) == ("DefaultRegion", "true")


async def test_permissions_and_system_topics(broker: Proc, open_conn: OpenConn) -> None:
    conn = await open_conn(broker)
    await create_topic(conn, "ReadOnly", queues=1, perm=4)
    await create_topic(conn, "WriteOnly", queues=1, perm=2)

    with pytest.raises(RemotingError) as ei:
        await wire.send_message(conn, "ReadOnly", b"x", queue_id=0)
    assert ei.value.code == ResponseCode.NO_PERMISSION
    assert (await wire.send_message(conn, "WriteOnly", b"x", queue_id=0)).code == ResponseCode.SUCCESS
    r = await api.pull_message(conn, GROUP, "WriteOnly", 0, 0)
    assert r.code == ResponseCode.NO_PERMISSION and r.remark

    for topic in ("SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "SELF_TEST_TOPIC"):
        with pytest.raises(RemotingError) as ei:
            await wire.send_message(conn, topic, b"x")
        assert ei.value.code == ResponseCode.NO_PERMISSION, topic
    with pytest.raises(RemotingError) as ei:
        await wire.send_message(conn, "TBW102", b"x")
    assert ei.value.code != ResponseCode.SUCCESS

    with pytest.raises(RemotingError) as ei:
        await wire.send_message(conn, "WriteOnly", b"x", queue_id=5)
    assert ei.value.code == ResponseCode.INVALID_PARAMETER and "queueId" in ei.value.remark


async def test_one_way_offset_commit_and_negative_offsets(broker: Proc, open_conn: OpenConn) -> None:
    conn = await open_conn(broker)
    await wire.send_message(conn, "OnewayTopic", b"x", queue_id=0)
    await create_group(conn, GROUP)
    fields = {"consumerGroup": GROUP, "topic": "OnewayTopic", "queueId": 0, "commitOffset": 1}
    conn.send_oneway(RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, fields))
    await eventually(lambda: _eq(api.query_offset(conn, GROUP, "OnewayTopic", 0), 1), what="one-way commit stored")
    # ali-ons persists -1 for untouched queues: ignored.
    await api.update_offset(conn, GROUP, "OnewayTopic", 0, -1)
    assert await api.query_offset(conn, GROUP, "OnewayTopic", 0) == 1


async def test_cpp_and_js_style_heartbeats_register_their_subscriptions(broker: Proc, open_conn: OpenConn) -> None:
    """C++ sends enums as ordinals and subVersion as a string and omits empty sets; ali-ons sends names."""
    conn = await open_conn(broker)
    await create_topic(conn, "DialectTopic", queues=1)
    for i, tag in enumerate(["TagA", "TagB", "TagC"]):
        await wire.send_message(conn, "DialectTopic", f"d{i}".encode(), tags=tag, queue_id=0)
    cpp = {
        "clientID": "10.0.0.9@cpp",
        "consumerDataSet": [
            {
                "groupName": "cpp-group",
                "consumeType": 1,
                "messageModel": 1,
                "consumeFromWhere": 0,
                "subscriptionDataSet": [
                    {
                        "topic": "DialectTopic",
                        "subString": "TagA || TagC",
                        "tagsSet": ["TagA", "TagC"],
                        "codeSet": [0, 0],
                        "subVersion": "1700000000000",
                    }
                ],
            }
        ],
        "producerDataSet": [],
    }
    js = {
        "clientID": "10.0.0.9@js",
        "consumerDataSet": [
            {
                "groupName": "js-group",
                "consumeType": "CONSUME_PASSIVELY",
                "messageModel": "CLUSTERING",
                "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                "unitMode": False,
                "subscriptionDataSet": [
                    {
                        "topic": "DialectTopic",
                        "subString": "TagB",
                        "tagsSet": ["TagB"],
                        "codeSet": [2598920],
                        "subVersion": 1700000000000,
                        "classFilterMode": False,
                    }
                ],
            }
        ],
        "producerDataSet": [{"groupName": "js-producer"}],
    }
    for body in (cpp, js):
        resp = await call(conn, RequestCode.HEART_BEAT, body=orjson.dumps(body) + b"\n")
        assert resp.code == ResponseCode.SUCCESS, resp
        assert resp.version >= 232, "clients read the broker version from the heartbeat response"
    r = await api.pull_message(conn, "cpp-group", "DialectTopic", 0, 0, subscription=None)
    assert [m.body for m in r.messages] == [b"d0", b"d2"], "tag codes recomputed from the tags, not codeSet"
    r = await api.pull_message(conn, "js-group", "DialectTopic", 0, 0, subscription=None)
    assert [m.body for m in r.messages] == [b"d1"]
    assert await api.consumer_ids(conn, "cpp-group") == ["10.0.0.9@cpp"]


async def test_c_style_property_strings_and_born_host(broker: Proc, open_conn: OpenConn) -> None:
    """C and ali-ons end every property pair with 0x02; the born host is the producer's TCP address."""
    conn = await open_conn(broker)
    fields = {
        "a": "pg",
        "b": "CStyle",
        "c": "TBW102",
        "d": 4,
        "e": 0,
        "f": 0,
        "g": int(time.time() * 1000),
        "h": 0,
        "i": "TAGS\x01TagA\x02KEYS\x01ck1 ck2\x02WAIT\x01true\x02",
    }
    resp = await call(conn, RequestCode.SEND_MESSAGE_V2, fields, b"c-style")
    assert resp.code == ResponseCode.SUCCESS, resp
    r = await api.pull_message(conn, GROUP, "CStyle", 0, 0, subscription="TagA")
    (m,) = r.messages
    assert m.tags == "TagA" and m.keys == ["ck1", "ck2"] and m.properties.get("WAIT") == "true"
    assert m.msg_id and len(m.msg_id) == 32, "the broker made a UNIQ_KEY for a message sent without one"
    assert m.born_host == ("127.0.0.1", conn.local[1])
    assert f"{m.store_host[0]}:{m.store_host[1]}" == broker.addr


async def test_big_message_round_trip(cluster: Cluster, ns: Proc, open_conn: OpenConn) -> None:
    broker = cluster.broker(ns.addr, "broker-big", segment=8 * 1024 * 1024)
    conn = await open_conn(broker)
    body = bytes(range(256)) * (3 * 1024 * 4)  # 3 MiB
    sent = await wire.send_message(conn, "BigTopic", body, queue_id=0, timeout=10)
    small = await wire.send_message(conn, "BigTopic", b"small", queue_id=0)
    msgs = await pull_all(conn, "BigTopic", 0)
    assert [m.body for m in msgs] == [body, b"small"]
    assert [m.offset_msg_id for m in msgs] == [sent.msg_id, small.msg_id]
    # Over the default 4 MiB limit: refused, connection fine.
    with pytest.raises(RemotingError) as ei:
        await wire.send_message(conn, "BigTopic", b"x" * (4 * 1024 * 1024 + 1), queue_id=0, timeout=10)
    assert ei.value.code == ResponseCode.MESSAGE_ILLEGAL
    assert await max_offset(conn, "BigTopic", 0) == 2


async def test_send_back_of_an_unknown_offset_and_illegal_batches(broker: Proc, open_conn: OpenConn) -> None:
    conn = await open_conn(broker)
    await wire.send_message(conn, "EdgeTopic", b"x", queue_id=0)
    resp = await call(conn, RequestCode.CONSUMER_SEND_MSG_BACK, {"offset": 10**9, "group": GROUP, "delayLevel": 1})
    assert resp.code == ResponseCode.SYSTEM_ERROR and resp.remark

    with pytest.raises(RemotingError) as ei:
        await wire.send_batch(conn, "EdgeTopic", [BatchEntry(body=b"a", properties={"DELAY": "1"})], queue_id=0)
    assert ei.value.code == ResponseCode.MESSAGE_ILLEGAL
    with pytest.raises(RemotingError) as ei:
        await wire.send_batch(conn, f"%RETRY%{GROUP}", [BatchEntry(body=b"a")], queue_id=0)
    assert ei.value.code == ResponseCode.MESSAGE_ILLEGAL
    with pytest.raises(RemotingError) as ei:
        await wire.send_batch(conn, "EdgeTopic", [], queue_id=0)
    assert ei.value.code == ResponseCode.MESSAGE_ILLEGAL
    assert await max_offset(conn, "EdgeTopic", 0) == 1


async def test_query_message_respects_max_num(broker: Proc, open_conn: OpenConn) -> None:
    conn = await open_conn(broker)
    for i in range(5):
        await wire.send_message(conn, "ManyKeys", f"k{i}".encode(), keys=["same"], queue_id=0)
    fields = {
        "topic": "ManyKeys",
        "key": "same",
        "maxNum": 2,
        "beginTimestamp": 0,
        "endTimestamp": int(time.time() * 1000) + 60_000,
    }
    resp = await call(conn, RequestCode.QUERY_MESSAGE, fields)
    assert resp.code == ResponseCode.SUCCESS
    assert len(decode_body_records(resp)) == 2


async def test_broker_stops_cleanly_on_sigint_and_unregisters(cluster: Cluster, ns: Proc, open_conn: OpenConn) -> None:
    broker = cluster.broker(ns.addr)
    conn = await open_conn(broker)
    await wire.send_message(conn, "SigintTopic", b"x", queue_id=0)
    nsc = await open_conn(ns)
    await eventually(lambda: route_or_none(nsc, "SigintTopic"), what="route")
    # A held pull is answered when the broker stops, not left hanging.
    pull = asyncio.create_task(api.pull_message(conn, GROUP, "SigintTopic", 0, 1, suspend_ms=20_000, timeout=30))
    await wait_held(conn, pull)
    assert broker.popen is not None
    broker.popen.send_signal(signal.SIGINT)
    assert await asyncio.to_thread(broker.popen.wait, 15) == 0
    assert not (cluster.store_dir(broker) / "abort").exists()
    # The held pull does not outlive the broker: answered (19) or its connection closed, not left hanging.
    done, _ = await asyncio.wait({pull}, timeout=5.0)
    assert done, "a held pull hung after the broker stopped"
    if pull.exception() is None:
        assert pull.result().code == ResponseCode.PULL_NOT_FOUND
    else:
        assert isinstance(pull.exception(), ConnectionClosedError), repr(pull.exception())
    # It unregistered: the route is gone at once.
    assert await route_or_none(nsc, "SigintTopic") is None


async def _eq(aw, expected) -> bool:  # type: ignore[no-untyped-def]
    return bool(await aw == expected)


async def test_topic_admin_values_are_taken_as_given(broker: Proc, open_conn: OpenConn) -> None:
    """UPDATE_AND_CREATE_TOPIC stores what the admin asked for: perm 0 (topic closed) must not become 6
    (read+write), and readQueueNums 0 must not silently become the default 8."""
    conn = await open_conn(broker)

    async def create(topic: str, read_n: int, write_n: int, perm: int) -> RemotingCommand:
        return await call(
            conn,
            RequestCode.UPDATE_AND_CREATE_TOPIC,
            {
                "topic": topic,
                "defaultTopic": "TBW102",
                "readQueueNums": read_n,
                "writeQueueNums": write_n,
                "perm": perm,
                "topicFilterType": "SINGLE_TAG",
                "topicSysFlag": 0,
                "order": False,
            },
        )

    async def config(topic: str) -> dict[str, object] | None:
        table = orjson.loads((await call(conn, RequestCode.GET_ALL_TOPIC_CONFIG)).body)["topicConfigTable"]
        return table.get(topic)  # type: ignore[no-any-return]

    assert (await create("PermRead", 2, 2, 4)).code == ResponseCode.SUCCESS
    assert (await config("PermRead") or {}).get("perm") == 4

    resp = await create("PermZero", 2, 2, 0)
    assert resp.code == ResponseCode.SUCCESS, resp
    tc = await config("PermZero")
    assert tc is not None and tc["perm"] == 0, f"perm 0 was stored as {tc}"
    with pytest.raises(RemotingError) as ei:
        await wire.send_message(conn, "PermZero", b"x", queue_id=0)
    assert ei.value.code == ResponseCode.NO_PERMISSION

    resp = await create("ReadZero", 0, 2, 6)
    tc = await config("ReadZero")
    if resp.code == ResponseCode.SUCCESS:
        assert tc is not None and tc["readQueueNums"] == 0, f"readQueueNums 0 was stored as {tc}"
    else:
        assert "queue" in (resp.remark or "") and tc is None, (resp, tc)


async def test_compressed_bodies_pass_through_and_multi_tag_topics_are_flagged(
    broker: Proc, open_conn: OpenConn
) -> None:
    conn = await open_conn(broker)
    raw_body = b"compress me " * 1000
    body = zlib.compress(raw_body)
    fields = {
        "a": "pg",
        "b": "Zipped",
        "c": "TBW102",
        "d": 4,
        "e": 0,
        "f": 1,
        "g": int(time.time() * 1000),
        "h": 0,
        "i": "TAGS\x01z",
    }
    resp = await call(conn, RequestCode.SEND_MESSAGE_V2, fields, body)
    assert resp.code == ResponseCode.SUCCESS, resp
    (m,) = await pull_all(conn, "Zipped", 0)
    assert m.sys_flag & 0x1 and m.body == body, "the broker stores compressed bodies untouched"
    assert zlib.decompress(m.body) == raw_body

    await create_topic(conn, "MultiTag", queues=1, filter_type="MULTI_TAG")
    await wire.send_message(conn, "MultiTag", b"mt", tags="TagA", queue_id=0)
    (m,) = await pull_all(conn, "MultiTag", 0)
    assert m.sys_flag & 0x2, "MULTI_TAG topics set MULTI_TAGS_FLAG on stored messages"


async def test_longest_topic_name_round_trips(broker: Proc, open_conn: OpenConn) -> None:
    conn = await open_conn(broker)
    topic = "T" * 126 + "z"  # 127 bytes: the record's topic length is a signed byte
    sent = await wire.send_message(conn, topic, b"long-topic", queue_id=0)
    (m,) = await pull_all(conn, topic, 0)
    assert (m.topic, m.body, m.offset_msg_id) == (topic, b"long-topic", sent.msg_id)
