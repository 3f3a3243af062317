"""Every request code that takes a topic or group name, with hostile names: refused with reason INVALID_NAME before
anything is touched; the store folder (and everything beside it) stays exactly as it was.

Also: out-of-range numbers are refused at the edge (INVALID_HEADER) and can never poison a registration.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from sievemq.protocol.reasons import REASON_FIELD
from sievemq.remoting.codes import RequestCode as C
from sievemq.remoting.codes import ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection
from sievemq.store.checkpoint import Checkpoint
from tests.integration.conftest import Cluster, OpenConn
from tests.integration.helpers import create_topic, eventually
from tests.support import wire

HOSTILE = ["..", "/x", "a/../..", "../x", "/", ".", "a\x00b", "x" * 300, "a\nb", "RealTopic\n", "%RETRY%..", "名字"]
"""Each is illegal by RocketMQ's rules (characters %|a-zA-Z0-9_-, at most 127 bytes for a topic, 255 for a group)."""

T, G = "{topic}", "{group}"


def _hb(topic: str, group: str) -> bytes:
    return orjson.dumps({"clientID": "c1", "producerDataSet": [{"groupName": group}], "consumerDataSet": [
        {"groupName": group, "subscriptionDataSet": [{"topic": topic, "subString": "*"}]}]})  # fmt: skip


def _lock(topic: str, group: str) -> bytes:
    return orjson.dumps({"consumerGroup": group, "clientId": "c1",
                         "mqSet": [{"topic": topic, "brokerName": "broker-h", "queueId": 0}]})  # fmt: skip


def _check(topic: str, group: str) -> bytes:
    sub = {"topic": topic, "subString": "a > 1", "expressionType": "SQL92"}
    return orjson.dumps({"group": group, "clientId": "c1", "subscriptionData": sub})


BROKER_REQUESTS: list[tuple[int, dict[str, Any], Any]] = [
    (C.SEND_MESSAGE, {"producerGroup": G, "topic": T, "defaultTopic": "TBW102", "defaultTopicQueueNums": 4,
                      "queueId": 0, "sysFlag": 0, "bornTimestamp": 1, "flag": 0, "properties": ""}, b"x"),
    (C.SEND_MESSAGE_V2, {"a": G, "b": T, "c": "TBW102", "d": 4, "e": 0, "f": 0, "g": 1, "h": 0, "i": ""}, b"x"),
    (C.SEND_BATCH_MESSAGE, {"a": G, "b": T, "c": "TBW102", "d": 4, "e": 0, "f": 0, "g": 1, "h": 0, "m": True}, b"x"),
    (C.PULL_MESSAGE, {"consumerGroup": G, "topic": T, "queueId": 0, "queueOffset": 0, "maxMsgNums": 1, "sysFlag": 0,
                      "commitOffset": 0, "suspendTimeoutMillis": 0, "subVersion": 0}, None),
    (C.QUERY_MESSAGE, {"topic": T, "key": "k", "maxNum": 1, "beginTimestamp": 0, "endTimestamp": 1}, None),
    (C.QUERY_CONSUMER_OFFSET, {"consumerGroup": G, "topic": T, "queueId": 0}, None),
    (C.UPDATE_CONSUMER_OFFSET, {"consumerGroup": G, "topic": T, "queueId": 0, "commitOffset": 1}, None),
    (C.UPDATE_AND_CREATE_TOPIC, {"topic": T, "readQueueNums": 1, "writeQueueNums": 1, "perm": 6}, None),
    (C.SEARCH_OFFSET_BY_TIMESTAMP, {"topic": T, "queueId": 0, "timestamp": 1}, None),
    (C.GET_MAX_OFFSET, {"topic": T, "queueId": 0}, None),
    (C.GET_MIN_OFFSET, {"topic": T, "queueId": 0}, None),
    (C.GET_EARLIEST_MSG_STORETIME, {"topic": T, "queueId": 0}, None),
    (C.HEART_BEAT, {}, _hb),
    (C.UNREGISTER_CLIENT, {"clientID": "c1", "producerGroup": G, "consumerGroup": G}, None),
    (C.CONSUMER_SEND_MSG_BACK, {"offset": 0, "group": G, "delayLevel": 1, "originTopic": T}, None),
    (C.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": G}, None),
    (C.LOCK_BATCH_MQ, {}, _lock),
    (C.UNLOCK_BATCH_MQ, {}, _lock),
    (C.CHECK_CLIENT_CONFIG, {}, _check),
    (C.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, lambda t, g: orjson.dumps({"groupName": g})),
    (C.DELETE_SUBSCRIPTIONGROUP, {"groupName": G}, None),
    (C.DELETE_TOPIC_IN_BROKER, {"topic": T}, None),
    (C.GET_GROUP_STATUS, {"group": G}, None),
    (C.GET_GROUP_FILTERS, {"group": G}, None),
    (C.EXPLAIN_SELECTOR, {"topic": T, "expression": "a > 1"}, None),
]  # fmt: skip

NAMESRV_REQUESTS: list[tuple[int, dict[str, Any], Any]] = [
    (C.GET_ROUTEINFO_BY_TOPIC, {"topic": T}, None),
    (C.DELETE_TOPIC_IN_NAMESRV, {"topic": T}, None),
    (C.REGISTER_BROKER, {"brokerName": G, "brokerAddr": "127.0.0.1:1", "clusterName": G, "brokerId": 0}, None),
    (C.UNREGISTER_BROKER, {"brokerName": G, "brokerAddr": "127.0.0.1:1", "clusterName": G, "brokerId": 0}, None),
    (C.REGISTER_BROKER, {"brokerName": "b", "brokerAddr": "127.0.0.1:1", "clusterName": "c", "brokerId": 0},
     lambda t, g: orjson.dumps({"topicConfigSerializeWrapper": {"topicConfigTable": {t: {"topicName": t}}}})),
]  # fmt: skip


async def _on_disk(conn: Connection, store: Path) -> bool:
    """Whether what the broker wrote so far has all reached the disk, so that no flush round or config save is left
    to change a file: the checkpoint covers the commit log's end for the commit log, the consume queues and the
    index, and the topics file holds RealTopic."""
    resp = await conn.request(RemotingCommand.request(C.GET_BROKER_RUNTIME_INFO, {}), 5.0)
    end = int(orjson.loads(resp.body)["table"]["commitLogMaxOffset"])
    cp = Checkpoint.decode((store / "checkpoint").read_bytes())
    topics = store / "config" / "topics.json"
    return (cp is not None and min(cp.physic_offset, cp.logics_offset, cp.index_offset) >= end
            and topics.exists() and b"RealTopic" in topics.read_bytes())  # fmt: skip


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Every path under ``root`` with its size and modification time (ns)."""
    out = {}
    for p in root.rglob("*"):
        st = p.lstat()
        out[str(p.relative_to(root))] = (st.st_size if p.is_file() else 0, st.st_mtime_ns if p.is_file() else 0)
    return out


def _fill(fields: dict[str, Any], name: str, hostile_in: str) -> dict[str, Any]:
    """The request's fields with ``name`` in the slot ``hostile_in`` ("topic" or "group"), a legal name elsewhere."""
    topic = name if hostile_in == "topic" else "RealTopic"
    group = name if hostile_in == "group" else "RealGroup"
    return {k: (topic if v == T else group if v == G else v) for k, v in fields.items()}


def _slots(fields: dict[str, Any], body: Any) -> list[str]:
    """Where a hostile name can go in a request: its topic, its group (a body builder takes both)."""
    if callable(body):
        return [slot for slot in ("topic", "group") if _uses(body, slot)]
    return [slot for slot, mark in (("topic", T), ("group", G)) if mark in fields.values()]


def _uses(body: Any, slot: str) -> bool:
    """True when the body builder puts the ``slot`` argument into the body."""
    a, b = body("A_TOPIC_MARK", "A_GROUP_MARK"), body("OTHER_TOPIC", "OTHER_GROUP")
    mark = b"A_TOPIC_MARK" if slot == "topic" else b"A_GROUP_MARK"
    return mark in a and mark not in b


async def _walk(conn: Connection, requests: list[tuple[int, dict[str, Any], Any]]) -> list[str]:
    problems = []
    for code, fields, body in requests:
        for slot in _slots(fields, body):
            for name in HOSTILE:
                f = _fill(fields, name, slot)
                topic, group = (name, "RealGroup") if slot == "topic" else ("RealTopic", name)
                b = body(topic, group) if callable(body) else body or b""
                resp = await conn.request(RemotingCommand.request(code, f, b), 5.0)
                reason = resp.ext_fields.get(REASON_FIELD)
                if resp.code == ResponseCode.SUCCESS or reason != "INVALID_NAME":
                    problems.append(f"{C(code).name} with {slot}={name[:12]!r}: [{resp.code}] {reason} {resp.remark}")
    return problems


async def test_hostile_names_are_refused_and_touch_nothing(cluster: Cluster, open_conn: OpenConn) -> None:
    ns = cluster.namesrv()
    broker = cluster.broker(ns.addr, "broker-h")
    store = cluster.store_dir(broker)
    (store.parent / "beside-the-store").mkdir()
    (store.parent / "beside-the-store" / "keep.txt").write_text("keep")
    conn = await open_conn(broker)
    await create_topic(conn, "RealTopic", queues=1)
    r = await wire.send_message(conn, "RealTopic", b"before", queue_id=0)
    assert r.code == ResponseCode.SUCCESS
    await eventually(lambda: _on_disk(conn, store), timeout=20, interval=0.1, what="the send and the topic on disk")
    before = snapshot(store.parent)

    problems = await _walk(conn, BROKER_REQUESTS)
    nconn = await open_conn(ns)
    problems += await _walk(nconn, NAMESRV_REQUESTS)
    assert not problems, "\n".join(problems[:40])

    after = snapshot(store.parent)
    changed = sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p)
                     and not p.endswith(("checkpoint", ".log")) and "/index/" not in p)  # fmt: skip
    assert not changed, f"paths changed by refused requests: {changed[:20]}"
    assert broker.popen is not None and broker.popen.poll() is None
    route = await wire.get_route(nconn, "RealTopic")
    assert [b.broker_name for b in route.broker_datas] == ["broker-h"]


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"topicSysFlag": 10**30}, "topicSysFlag"),
        ({"perm": 10**30}, "perm"),
        ({"perm": 99}, "perm"),
        ({"readQueueNums": 2**31}, "readQueueNums"),
        ({"writeQueueNums": -1}, "writeQueueNums"),
        ({"topicSysFlag": "9" * 5000}, "topicSysFlag"),
    ],
)
async def test_out_of_range_numbers_never_reach_the_topic_table(
    cluster: Cluster, open_conn: OpenConn, fields: dict[str, Any], field: str
) -> None:
    ns = cluster.namesrv()
    broker = cluster.broker(ns.addr, "broker-n")
    conn = await open_conn(broker)
    base = {"topic": "Poison", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6}
    resp = await conn.request(RemotingCommand.request(C.UPDATE_AND_CREATE_TOPIC, {**base, **fields}), 5.0)
    assert resp.code == ResponseCode.SYSTEM_ERROR and resp.ext_fields.get(REASON_FIELD) == "INVALID_HEADER", resp
    assert field in (resp.remark or "")
    # The broker keeps registering: a topic created afterwards appears in the routes, after a restart too.
    await create_topic(conn, "Fine", queues=2)
    nconn = await open_conn(ns)
    assert [b.broker_name for b in (await wire.get_route(nconn, "Fine")).broker_datas] == ["broker-n"]
    broker.stop()
    broker = cluster.restart(broker)
    conn = await open_conn(broker)
    assert (await wire.send_message(conn, "Fine", b"x", queue_id=0)).code == ResponseCode.SUCCESS
