"""Retries of 4.x consumers, compared with Apache RocketMQ: what CONSUMER_SEND_MSG_BACK (36) makes of a consumed
message (its delay, its retry topic, its reconsume count and properties), when it goes to the dead-letter queue,
and what the retry and dead-letter topics look like (docs/protocol/requests.md §11).

Both brokers get the same frames; the messages each stores are compared once what must differ is normalised: a
message id made from the broker's address and a commit-log offset is replaced by the name of the record it points
to, and times by their order.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from sievemq.client.api import pull_message, send_back
from sievemq.client.errors import RemotingError
from sievemq.protocol.message import MessageExt
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection
from tests.compat.sides import Side, create_topic
from tests.compat.test_send_pull import on_both, send

TOPIC = "CompatRetry"
DEADLINE = 120.0
"""A safety net for the delayed copies to arrive (1 s delay levels); never a measure."""


@pytest.fixture(scope="module", autouse=True)
def topic(sides: tuple[Side, Side]) -> None:
    async def make() -> None:
        for side in sides:
            await create_topic(side, TOPIC)

    asyncio.run(make())


async def stored(conn: Connection, topic: str, group: str, offset: int = 0) -> MessageExt:
    """The record at ``offset`` of queue 0 of ``topic``, once it is there (pulled as ``group``)."""
    end = time.monotonic() + DEADLINE
    while True:
        r = await pull_message(conn, group, topic, 0, offset, max_nums=1)
        if r.code == ResponseCode.SUCCESS and r.messages:
            return r.messages[0]
        if time.monotonic() > end:
            raise AssertionError(f"nothing at {topic}:0@{offset}: last answer {r.code} {r.remark}")
        await asyncio.sleep(0.1)  # polling for a state: the delayed copy is written when its level's time is up


async def topic_config(conn: Connection, topic: str) -> dict[str, Any]:
    """GET_TOPIC_CONFIG (351): the broker's config of ``topic`` (queue counts, perm, flags)."""
    resp = await conn.request(RemotingCommand.request(RequestCode.GET_TOPIC_CONFIG, {"topic": topic}), 30.0)
    assert resp.code == ResponseCode.SUCCESS, (resp.code, resp.remark)
    import orjson

    body = orjson.loads(resp.body)
    tc = body.get("topicConfig", body)
    return {k: tc.get(k) for k in ("readQueueNums", "writeQueueNums", "perm", "topicSysFlag", "order")}


def differences(what: str, theirs: Any, ours: Any) -> str:
    """Where two views differ, field by field (properties one by one)."""
    if not (isinstance(theirs, dict) and isinstance(ours, dict)):
        return f"{what}: RocketMQ {theirs!r}, sievemq {ours!r}"
    lines = [f"{what} differs:"]
    for k in sorted(set(theirs) | set(ours)):
        t, o = theirs.get(k, "<absent>"), ours.get(k, "<absent>")
        if t != o:
            lines.append(differences(f"  {k}", t, o) if isinstance(t, dict) and isinstance(o, dict) else
                         f"  {k}: RocketMQ {t!r}, sievemq {o!r}")  # fmt: skip
    return "\n".join(lines)


SPENT_DELAY = "<the spent DELAY level>"


def _view(m: MessageExt, names: dict[str, str]) -> dict[str, Any]:
    """What a consumer sees of ``m``, with ids named by ``names`` (offsetMsgId -> a record's name). RocketMQ leaves
    the spent ``DELAY`` level in a delivered copy (0 in a dead-lettered one); sievemq removes it, on purpose
    (docs/compat.md): the property is replaced by a mark here and checked apart."""
    props = {k: names.get(v, v) for k, v in m.properties.items()}
    if "DELAY" in props:
        props["DELAY"] = SPENT_DELAY
    return {"topic": m.topic, "queue": m.queue_id, "body": m.body, "flag": m.flag, "sysFlag": m.sys_flag,
            "reconsumeTimes": m.reconsume_times, "props": props}  # fmt: skip


def test_a_message_sent_back_comes_back_through_its_delay_then_goes_to_the_dlq(sides: tuple[Side, Side]) -> None:
    """Sent back with delay level 1, the message is in %RETRY%<group> a second later with one reconsume more; sent
    back again with level -1 it goes to %DLQ%<group> at once; a third message, sent back once its reconsume count
    reached the client's maxReconsumeTimes, goes to the DLQ too. The topics made on the way are compared as well."""
    group = "CompatRetryGroup"

    async def probe(conn: Connection) -> dict[str, Any]:
        props = {"TAGS": "T", "KEYS": "k1", "UNIQ_KEY": "AC11000100002A9F00000000000000E1", "WAIT": "true"}
        r = await send(conn, TOPIC, b"retry me", props, flag=3)
        assert r.code == ResponseCode.SUCCESS, (r.code, r.remark)
        original = await stored(conn, TOPIC, group, int(r.ext_fields["queueOffset"]))
        names = {original.offset_msg_id: "<original>"}
        await send_back(conn, offset=original.commit_log_offset, group=group, delay_level=1,
                        origin_msg_id=original.msg_id, origin_topic=TOPIC, max_reconsume_times=16)  # fmt: skip
        retried = await stored(conn, f"%RETRY%{group}", group)
        names[retried.offset_msg_id] = "<retried>"
        await send_back(conn, offset=retried.commit_log_offset, group=group, delay_level=-1,
                        origin_msg_id=retried.msg_id, origin_topic=TOPIC, max_reconsume_times=16)  # fmt: skip
        dead = await stored(conn, f"%DLQ%{group}", group)
        return {
            "retried": _view(retried, names),
            "dead": _view(dead, names),
            "retry topic": await topic_config(conn, f"%RETRY%{group}"),
            "dlq topic": await topic_config(conn, f"%DLQ%{group}"),
            "retried after the original": retried.store_timestamp >= original.store_timestamp,
        }

    theirs, ours = on_both(sides, probe)
    assert theirs["retried"]["reconsumeTimes"] == 1 and theirs["dead"]["topic"] == f"%DLQ%{group}", theirs
    for copy in ("retried", "dead"):  # the deliberate difference: RocketMQ keeps the spent level, sievemq drops it
        assert theirs[copy]["props"].pop("DELAY") == SPENT_DELAY and "DELAY" not in ours[copy]["props"], copy
    for key in theirs:
        assert ours[key] == theirs[key], differences(key, theirs[key], ours[key])


def test_past_max_reconsume_times_a_send_back_dead_letters(sides: tuple[Side, Side]) -> None:
    """A message whose reconsume count has reached the request's maxReconsumeTimes goes straight to the DLQ."""
    group = "CompatRetryMax"

    async def probe(conn: Connection) -> dict[str, Any]:
        r = await send(conn, TOPIC, b"give up", {"UNIQ_KEY": "AC11000100002A9F00000000000000E2", "WAIT": "true"})
        original = await stored(conn, TOPIC, group, int(r.ext_fields["queueOffset"]))
        names = {original.offset_msg_id: "<original>"}
        await send_back(conn, offset=original.commit_log_offset, group=group, delay_level=1,
                        origin_msg_id=original.msg_id, origin_topic=TOPIC, max_reconsume_times=1)  # fmt: skip
        retried = await stored(conn, f"%RETRY%{group}", group)
        names[retried.offset_msg_id] = "<retried>"
        await send_back(conn, offset=retried.commit_log_offset, group=group, delay_level=0,
                        origin_msg_id=retried.msg_id, origin_topic=TOPIC, max_reconsume_times=1)  # fmt: skip
        dead = await stored(conn, f"%DLQ%{group}", group)
        return {"dead": _view(dead, names)}

    theirs, ours = on_both(sides, probe)
    assert theirs["dead"]["reconsumeTimes"] == 2, theirs
    assert theirs["dead"]["props"].pop("DELAY") == SPENT_DELAY and "DELAY" not in ours["dead"]["props"]
    assert ours == theirs, differences("dead", theirs["dead"], ours["dead"])


@pytest.mark.parametrize(
    ("case", "fields", "deliberate"),
    [
        ("no record at that offset", {"offset": 987_654_321}, None),
        # sievemq checks every name at the edge: SYSTEM_ERROR with reason INVALID_NAME (docs/compat.md)
        ("an illegal group", {"group": "bad group"}, (ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, ResponseCode.SYSTEM_ERROR)),  # noqa: E501
    ],
)
def test_send_back_refusals(
    sides: tuple[Side, Side], case: str, fields: dict[str, Any], deliberate: tuple[int, int] | None
) -> None:
    async def probe(conn: Connection) -> int:
        args: dict[str, Any] = {"offset": 0, "group": "CompatRetryRefused", "delay_level": 1, **fields}
        try:
            await send_back(conn, timeout=30.0, **args)
        except RemotingError as e:
            return e.code
        return ResponseCode.SUCCESS

    theirs, ours = on_both(sides, probe)
    assert (theirs, ours) == (deliberate or (theirs, theirs)), (case, theirs, ours)
