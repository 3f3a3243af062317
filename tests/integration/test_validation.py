"""What a broker refuses, with which code, and a remark that names the problem."""

from __future__ import annotations

import pytest

from sievemq.client import api
from sievemq.errors import RemotingError
from sievemq.protocol.reasons import REASON_FIELD, Reason
from sievemq.remoting.codes import RequestCode, ResponseCode
from tests.integration.conftest import Cluster, OpenConn
from tests.integration.helpers import call, max_offset
from tests.support import wire
from tests.support.procs import Proc


async def _send_code(  # type: ignore[no-untyped-def]
    conn, topic: str, body: bytes = b"x", **kw
) -> tuple[int, str, str | None]:
    """(code, remark, reason) of a send."""
    try:
        r = await wire.send_message(conn, topic, body, **kw)
    except RemotingError as e:
        return e.code, e.remark, e.reason
    return r.code, r.remark or "", None


async def test_invalid_topic_names_are_refused_with_a_remark(broker: Proc, open_conn: OpenConn) -> None:
    conn = await open_conn(broker)
    bad_chars = ["bad topic", "bad/topic", "topic!", "tópico", "a.b"]
    for topic in bad_chars:
        code, remark, reason = await _send_code(conn, topic)
        assert (code, reason) == (ResponseCode.INVALID_PARAMETER, Reason.INVALID_NAME), (topic, code, remark)
        assert topic in remark, remark  # the remark names the name

    code, remark, reason = await _send_code(conn, "t" * 128)
    assert (code, reason) == (ResponseCode.INVALID_PARAMETER, Reason.INVALID_NAME), (code, remark)
    assert "127" in remark, remark  # the remark names the limit
    # A multi-byte name is measured in bytes: 64 two-byte chars are 128 bytes (and illegal anyway).
    code, remark, reason = await _send_code(conn, "é" * 64)
    assert (code, reason) == (ResponseCode.INVALID_PARAMETER, Reason.INVALID_NAME), (code, remark)

    # 127 bytes of legal characters is fine, as are the other legal characters.
    for topic in ("t" * 127, "a-b_c%d|e", "Az09"):
        code, remark, _ = await _send_code(conn, topic, queue_id=0)
        assert code == ResponseCode.SUCCESS, (topic, remark)

    # Admin creation applies the same rules, and refuses the broker's own topics (29, as RocketMQ 5).
    for topic, named in (("bad topic", "bad topic"), ("t" * 128, "127"), ("SCHEDULE_TOPIC_XXXX", "system topic"),
                         ("TBW102", "system topic"), ("rmq_sys_wheel", "system topic")):  # fmt: skip
        resp = await call(
            conn,
            RequestCode.UPDATE_AND_CREATE_TOPIC,
            {
                "topic": topic,
                "defaultTopic": "TBW102",
                "readQueueNums": 1,
                "writeQueueNums": 1,
                "perm": 6,
                "topicFilterType": "SINGLE_TAG",
                "topicSysFlag": 0,
                "order": False,
            },
        )
        assert (resp.code, resp.ext_fields.get(REASON_FIELD)) == (ResponseCode.INVALID_PARAMETER, Reason.INVALID_NAME)
        assert named in (resp.remark or ""), resp


async def test_body_over_max_message_size_and_huge_properties_are_message_illegal(
    cluster: Cluster, ns: Proc, open_conn: OpenConn
) -> None:
    broker = cluster.broker(ns.addr, "broker-small", "--max-message-size", "1024")
    conn = await open_conn(broker)

    assert (await _send_code(conn, "SizeTopic", b"x" * 1024, queue_id=0))[0] == ResponseCode.SUCCESS
    # MESSAGE_ILLEGAL carries no reason (the code says it all); the remark names the size and the limit
    code, remark, _ = await _send_code(conn, "SizeTopic", b"x" * 1025, queue_id=0)
    assert code == ResponseCode.MESSAGE_ILLEGAL
    assert "1025" in remark and "1024" in remark, remark

    code, remark, _ = await _send_code(conn, "SizeTopic", b"small", queue_id=0, properties={"big": "v" * 33_000})
    assert code == ResponseCode.MESSAGE_ILLEGAL
    assert "32767" in remark, remark

    # Nothing of the refused messages was stored.
    assert await max_offset(conn, "SizeTopic", 0) == 1


async def test_batch_entry_over_max_message_size_is_message_illegal(
    cluster: Cluster, ns: Proc, open_conn: OpenConn
) -> None:
    from sievemq.protocol.batch import BatchEntry

    broker = cluster.broker(ns.addr, "broker-small", "--max-message-size", "1024")
    conn = await open_conn(broker)
    with pytest.raises(RemotingError) as ei:
        await wire.send_batch(conn, "SizeBatch", [BatchEntry(body=b"ok"), BatchEntry(body=b"x" * 2000)], queue_id=0)
    assert ei.value.code == ResponseCode.MESSAGE_ILLEGAL
    assert await max_offset(conn, "SizeBatch", 0) == 0, "no part of a refused batch is stored"


async def test_unknown_topic_with_auto_create_off_is_17_with_remark(
    cluster: Cluster, ns: Proc, open_conn: OpenConn
) -> None:
    broker = cluster.broker(ns.addr, "broker-strict", "--auto-create-topic-enable", "false")
    conn = await open_conn(broker)

    code, remark, _ = await _send_code(conn, "NeverCreated", b"x")
    assert code == ResponseCode.TOPIC_NOT_EXIST
    assert "NeverCreated" in remark and "auto-create" in remark, remark  # tells what to do

    pull = await api.pull_message(conn, "strict-group", "NeverCreated", 0, 0)
    assert pull.code == ResponseCode.TOPIC_NOT_EXIST and pull.remark

    # The refused topic was not created on the broker, so the name server has no route for it.
    nsc = await open_conn(ns)
    resp = await call(nsc, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "NeverCreated"})
    assert resp.code == ResponseCode.TOPIC_NOT_EXIST
