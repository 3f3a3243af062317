"""SEND_MESSAGE / batches and CONSUMER_SEND_MSG_BACK, called directly with the services they take (no sockets)."""

from __future__ import annotations

import time

import pytest

from sievemq.broker.processors.send import SendProcessor, SendSettings
from sievemq.broker.processors.send_back import SendBackProcessor
from sievemq.errors import RemotingError
from sievemq.protocol.batch import BatchEntry, encode_batch
from sievemq.protocol.message import decode_record, properties_to_string
from sievemq.protocol.names import SCHEDULE_TOPIC, VERSION_SEND_BACK_MAX_RECONSUME, dlq_topic, retry_topic
from sievemq.protocol.reasons import Reason
from sievemq.protocol.send_header import SendMessageHeader
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.server import settled
from tests.unit.broker.conftest import BROKER, CLUSTER, HOST, Parts


def sender(p: Parts, *, auto_create: bool = True, max_message_size: int = 1024) -> SendProcessor:
    settings = SendSettings(BROKER, CLUSTER, HOST, max_message_size, auto_create, 16, 18)
    return SendProcessor(p.store, p.topics, p.groups, p.stats, settings)


def send_cmd(topic: str, body: bytes, *, code: int = RequestCode.SEND_MESSAGE_V2, version: int = 409,
             **header: object) -> RemotingCommand:  # fmt: skip
    props = header.pop("props", {})
    assert isinstance(props, dict)
    h = SendMessageHeader("p", topic, born_timestamp=int(time.time() * 1000), properties=properties_to_string(props))
    for k, v in header.items():
        setattr(h, k, v)
    cmd = RemotingCommand.request(code, h.to_fields(v2=code != RequestCode.SEND_MESSAGE), body)
    cmd.version = version
    return cmd


def stored(p: Parts, topic: str, queue_id: int = 0) -> list[object]:
    r = p.store.get_message(topic, queue_id, 0, 32, None)
    return [decode_record(rec)[0] for rec in r.records]


async def test_send_stores_with_cluster_property_and_born_host(parts: Parts) -> None:
    resp = await settled(sender(parts).send(parts.conn(), send_cmd("Orders", b"hi", queue_id=1, props={"TAGS": "A"})))
    assert resp.code == ResponseCode.SUCCESS and resp.ext_fields["queueId"] == "1"
    (m,) = stored(parts, "Orders", 1)
    assert m.body == b"hi" and m.tags == "A" and m.properties["CLUSTER"] == CLUSTER  # type: ignore[attr-defined]
    assert m.born_host == ("10.0.0.7", 40000) and m.store_host == HOST  # type: ignore[attr-defined]
    assert parts.stats.put_by_topic["Orders"] == 1 and parts.topics.get("Orders") is not None


async def test_refusals(parts: Parts) -> None:
    s = sender(parts)
    with pytest.raises(RemotingError) as e:
        await settled(s.send(parts.conn(), send_cmd("Big", b"x" * 1025)))
    assert e.value.code == ResponseCode.MESSAGE_ILLEGAL and "maxMessageSize" in e.value.remark
    with pytest.raises(RemotingError) as e:
        await settled(s.send(parts.conn(), send_cmd("Orders", b"x", queue_id=99)))
    assert (e.value.code, e.value.reason) == (ResponseCode.INVALID_PARAMETER, Reason.INVALID_HEADER)
    with pytest.raises(RemotingError) as e:
        await settled(s.send(parts.conn(), send_cmd("Orders", b"", queue_id=0)))
    assert e.value.code == ResponseCode.MESSAGE_ILLEGAL and "empty" in e.value.remark
    parts.topics.delete("TBW102")  # no template: nothing is created on first send
    s = sender(parts, auto_create=False)
    cases = [
        (send_cmd("Unknown", b"x"), ResponseCode.TOPIC_NOT_EXIST),
        (send_cmd("TBW102", b"x"), ResponseCode.INVALID_PARAMETER),
        (send_cmd(SCHEDULE_TOPIC, b"x"), ResponseCode.NO_PERMISSION),
        (send_cmd("bad/name", b"x"), ResponseCode.INVALID_PARAMETER),
    ]
    for cmd, code in cases:
        with pytest.raises(RemotingError) as e:
            await settled(s.send(parts.conn(), cmd))
        assert e.value.code == code, (cmd.ext_fields, e.value)


async def test_delay_parks_in_the_schedule_topic(parts: Parts) -> None:
    await settled(sender(parts).send(parts.conn(), send_cmd("Later", b"x", queue_id=0, props={"DELAY": "40"})))
    (m,) = stored(parts, SCHEDULE_TOPIC, 17)  # levels above the highest become the highest (18 -> queue 17)
    assert m.properties["REAL_TOPIC"] == "Later" and m.properties["DELAY"] == "18"  # type: ignore[attr-defined]


async def test_batch(parts: Parts) -> None:
    body = encode_batch([BatchEntry(0, b"a", {"TAGS": "x"}), BatchEntry(0, b"b", {})])
    resp = await settled(
        sender(parts).send(parts.conn(), send_cmd("B", body, code=RequestCode.SEND_BATCH_MESSAGE, queue_id=0))
    )
    assert resp.code == ResponseCode.SUCCESS and len(resp.ext_fields["msgId"].split(",")) == 2
    assert [m.body for m in stored(parts, "B")] == [b"a", b"b"]  # type: ignore[attr-defined]
    with pytest.raises(RemotingError, match="DELAY") as e:  # the remark names the property
        bad = encode_batch([BatchEntry(0, b"a", {"DELAY": "1"})])
        await settled(sender(parts).send(parts.conn(), send_cmd("B", bad, code=RequestCode.SEND_BATCH_MESSAGE)))
    assert e.value.code == ResponseCode.MESSAGE_ILLEGAL


async def test_a_clients_exhausted_retry_send_is_dead_lettered(parts: Parts) -> None:
    s = sender(parts)
    rt = retry_topic("g")
    cmd = send_cmd(
        rt, b"x", queue_id=0, reconsume_times=3, max_reconsume_times=3, version=VERSION_SEND_BACK_MAX_RECONSUME
    )
    await settled(s.send(parts.conn(), cmd))
    assert [m.body for m in stored(parts, dlq_topic("g"))] == [b"x"]  # type: ignore[attr-defined]
    # An old client's limit is ignored: the group's (16) applies, and the message waits for its retry.
    cmd = send_cmd(rt, b"y", queue_id=0, reconsume_times=3, max_reconsume_times=3, props={"DELAY": "4"}, version=63)
    await settled(s.send(parts.conn(), cmd))
    assert [m.body for m in stored(parts, SCHEDULE_TOPIC, 3)] == [b"y"]  # type: ignore[attr-defined]


async def test_send_back_retries_then_dead_letters(parts: Parts) -> None:
    sb = SendBackProcessor(parts.store, parts.topics, parts.groups, HOST, 18)
    m = await parts.put("Orders", b"failed", TAGS="A", UNIQ_KEY="U1")

    def back(offset: int, **f: object) -> RemotingCommand:
        cmd = RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, {"group": "g", "offset": offset, **f})
        cmd.version = VERSION_SEND_BACK_MAX_RECONSUME
        return cmd

    assert (await sb.send_back(parts.conn(), back(m.commit_log_offset))).code == ResponseCode.SUCCESS
    (r,) = [x for q in range(18) for x in stored(parts, SCHEDULE_TOPIC, q)]
    assert r.properties["REAL_TOPIC"] == retry_topic("g") and r.properties["DELAY"] == "3"  # type: ignore[attr-defined]
    assert r.properties["RETRY_TOPIC"] == "Orders" and r.properties["ORIGIN_MESSAGE_ID"] == m.offset_msg_id  # type: ignore[attr-defined]
    assert r.properties["WAIT"] == "false"  # type: ignore[attr-defined]
    assert r.reconsume_times == 1  # type: ignore[attr-defined]
    # The retried copy fails again with maxReconsumeTimes 1: dead letter, no delay.
    await sb.send_back(parts.conn(), back(r.commit_log_offset, maxReconsumeTimes=1))  # type: ignore[attr-defined]
    (d,) = stored(parts, dlq_topic("g"))
    assert d.body == b"failed" and d.reconsume_times == 2 and "DELAY" not in d.properties  # type: ignore[attr-defined]
    assert d.properties["ORIGIN_MESSAGE_ID"] == m.offset_msg_id  # type: ignore[attr-defined]  # the first one's id stays
    # delayLevel -1 asks for the dead letter at once.
    await sb.send_back(parts.conn(), back(m.commit_log_offset, delayLevel=-1))
    assert len(stored(parts, dlq_topic("g"))) == 2
    with pytest.raises(RemotingError, match="look message by offset failed") as e:  # RocketMQ 4.x's own remark
        await sb.send_back(parts.conn(), back(10**9))
    assert e.value.code == ResponseCode.SYSTEM_ERROR
