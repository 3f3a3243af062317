"""Sending and pulling, compared with Apache RocketMQ: what a message looks like after the round trip, what a send
answers (its message id too), batches (compressed too), and what each broker refuses with which code.

Every request here is the frame a RocketMQ client sends (SEND_MESSAGE_V2, SEND_BATCH_MESSAGE, PULL_MESSAGE), sent
as is to both brokers. What may differ is normalised: the broker's address inside a message id and a commit-log
offset. A refusal where sievemq deliberately answers otherwise is listed in ``DELIBERATE`` with its reason, as
docs/compat.md lists it; any other difference fails.
"""

from __future__ import annotations

import asyncio
import time
import zlib
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import orjson
import pytest

from sievemq.client.api import pull_message
from sievemq.protocol.batch import BatchEntry, encode_batch
from sievemq.protocol.message import MessageExt, properties_to_string
from sievemq.protocol.send_header import SendMessageHeader
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection
from tests.compat.sides import Side, broker_connection, create_topic

T = TypeVar("T")
TOPIC = "CompatSend"
"""One queue: every message sent here is read back in order from queue 0."""
BATCH_TOPIC = "CompatBatch"
QUEUES_TOPIC = "CompatQueues"
"""Four queues (queue-id checks)."""
COMPRESSED = 0x1
"""The sysFlag bit of a compressed body (zlib, RocketMQ's default compression type)."""
MAX_MESSAGE_SIZE = 4 * 1024 * 1024
"""Both brokers' default ``maxMessageSize``."""


def on_both(sides: tuple[Side, Side], probe: Callable[[Connection], Awaitable[T]]) -> tuple[T, T]:
    """``probe`` run on a fresh connection to RocketMQ's broker, then to sievemq's: (theirs, ours)."""

    async def one(side: Side) -> T:
        conn = await broker_connection(side)
        try:
            return await probe(conn)
        finally:
            conn.close()

    async def both() -> tuple[T, T]:
        return await one(sides[0]), await one(sides[1])

    return asyncio.run(both())


@pytest.fixture(scope="module", autouse=True)
def topics(sides: tuple[Side, Side]) -> None:
    async def make() -> None:
        for side in sides:
            await create_topic(side, TOPIC)
            await create_topic(side, BATCH_TOPIC)
            await create_topic(side, QUEUES_TOPIC, queues=4)

    asyncio.run(make())


async def send(
    conn: Connection,
    topic: str,
    body: bytes,
    props: dict[str, str] | str,
    *,
    queue_id: int = 0,
    sys_flag: int = 0,
    flag: int = 0,
    group: str = "compat_producer",
    batch: bool = False,
) -> RemotingCommand:
    """One send request as RocketMQ's Java client frames it; the answer whatever its code."""
    header = SendMessageHeader(producer_group=group, topic=topic, queue_id=queue_id, sys_flag=sys_flag, flag=flag,
                               born_timestamp=int(time.time() * 1000), batch=batch,
                               properties=props if isinstance(props, str) else properties_to_string(props))  # fmt: skip
    code = RequestCode.SEND_BATCH_MESSAGE if batch else RequestCode.SEND_MESSAGE_V2
    return await conn.request(RemotingCommand.request(code, header.to_fields(), body=body), 60.0)


async def pull_from(conn: Connection, topic: str, offset: int, count: int, queue_id: int = 0) -> list[MessageExt]:
    """``count`` records of a queue of ``topic`` from ``offset`` (no filter), once they are there: RocketMQ builds
    its consume queues after the send is answered (sievemq before), so a pull right after a send may find nothing
    yet."""
    got: list[MessageExt] = []
    end = time.monotonic() + 60.0  # a safety net, never a measure
    while len(got) < count:
        r = await pull_message(conn, "compat_reader", topic, queue_id, offset + len(got), max_nums=32)
        if r.code == ResponseCode.SUCCESS:
            got += r.messages
            continue
        assert r.code in (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY), (r.code, r.remark)
        assert time.monotonic() < end, f"{topic}:{queue_id}@{offset + len(got)} not there: {r.code} {r.remark}"
        await asyncio.sleep(0.05)  # polling for a state
    return got[:count]


def host_of_msg_id(msg_id: str) -> tuple[str, int, int]:
    """(ip, port, commit-log offset) of an offsetMsgId: 4 address bytes, 4 port bytes, 8 offset bytes, in hex."""
    raw = bytes.fromhex(msg_id)
    assert len(raw) == 16, msg_id
    return ".".join(str(b) for b in raw[:4]), int.from_bytes(raw[4:8], "big"), int.from_bytes(raw[8:], "big")


# ------------------------------------------------------------------------------------------- round trips
SENT: list[tuple[bytes, int, dict[str, str]]] = [
    (b"plain", 0, {"WAIT": "true"}),
    (b"tagged", 7, {"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "7F00000100002A9F0000000000000001", "WAIT": "true"}),
    (b"no-wait", 0, {"WAIT": "false", "TAGS": "B"}),
    (b"user", -1, {"color": "red", "size": "10", "note": "a=b c:d;e", "unicode": "\u00e9t\u00e9 \u4e2d"}),
    (b"empty-value", 0, {"k": "", "j": "v"}),
    (b"reserved-lookalikes", 0, {"MIN_OFFSET": "5", "CLUSTER": "Spoofed", "MSG_REGION": "Elsewhere"}),
    (b"\x00\xff binary", 2**31 - 1, {"TAGS": "T|U", "KEYS": ""}),
]


def _normalised(m: MessageExt, generated: bool) -> tuple[bytes, int, int, dict[str, str]]:
    props = dict(m.properties)
    if generated:  # each broker makes its own UNIQ_KEY: compare its shape only
        key = props.pop("UNIQ_KEY", "")
        props["UNIQ_KEY"] = "<32 hex>" if len(key) == 32 and all(c in "0123456789ABCDEF" for c in key) else key
    return m.body, m.flag, m.sys_flag, props


def test_a_message_comes_back_as_rocketmq_gives_it_back(sides: tuple[Side, Side]) -> None:
    """Body, flag, sysFlag and properties of each pulled message, as the broker stored them."""

    async def probe(conn: Connection) -> list[tuple[bytes, int, int, dict[str, str]]]:
        first = -1
        for body, flag, props in SENT:
            r = await send(conn, TOPIC, body, props, flag=flag)
            assert r.code == ResponseCode.SUCCESS, (body, r.code, r.remark)
            first = int(r.ext_fields["queueOffset"]) if first < 0 else first
        pulled = await pull_from(conn, TOPIC, first, len(SENT))
        return [_normalised(m, "UNIQ_KEY" not in props) for m, (_b, _f, props) in zip(pulled, SENT, strict=True)]

    theirs, ours = on_both(sides, probe)
    assert [t[0] for t in theirs] == [s[0] for s in SENT]
    for sent, t, o in zip(SENT, theirs, ours, strict=True):
        assert o == t, (sent, t, o)


def test_a_compressed_body_is_stored_as_sent(sides: tuple[Side, Side]) -> None:
    """A client compresses a large body and sets the flag; the broker stores both as they came."""
    text = b"sievemq " * 1000
    packed = zlib.compress(text)

    async def probe(conn: Connection) -> tuple[int, bytes, int]:
        r = await send(conn, TOPIC, packed, {"WAIT": "true"}, sys_flag=COMPRESSED)
        assert r.code == ResponseCode.SUCCESS, (r.code, r.remark)
        (m,) = await pull_from(conn, TOPIC, int(r.ext_fields["queueOffset"]), 1)
        return m.sys_flag, m.body, len(m.body)

    theirs, ours = on_both(sides, probe)
    assert theirs[0] & COMPRESSED and theirs[1] == packed, theirs[:1]
    assert ours == theirs


def test_what_a_send_answers(sides: tuple[Side, Side]) -> None:
    """The answer's fields, the message id (the broker's address and the record's commit-log offset) and the
    transaction id a single send carries."""

    async def probe(conn: Connection) -> dict[str, Any]:
        r = await send(conn, QUEUES_TOPIC, b"x", {"UNIQ_KEY": "AC11000100002A9F00000000000000AB", "WAIT": "true"},
                       queue_id=2)  # fmt: skip
        assert r.code == ResponseCode.SUCCESS, (r.code, r.remark)
        f = dict(r.ext_fields)
        ip, port, offset = host_of_msg_id(f.pop("msgId"))
        (m,) = await pull_from(conn, QUEUES_TOPIC, int(f["queueOffset"]), 1, queue_id=2)
        host = conn.peer  # the broker's address as this connection reaches it
        return {**f, "msgId host": (ip, port) == (host[0], host[1]), "msgId offset": offset == m.commit_log_offset,
                "record's offsetMsgId": m.offset_msg_id == r.ext_fields["msgId"], "remark": r.remark}  # fmt: skip

    theirs, ours = on_both(sides, probe)
    assert theirs["queueId"] == "2" and theirs["transactionId"] == "AC11000100002A9F00000000000000AB", theirs
    assert ours == theirs


def test_batches_round_trip_with_their_own_properties(sides: tuple[Side, Side]) -> None:
    entries = [
        BatchEntry(0, b"b0", {"TAGS": "A", "UNIQ_KEY": "AC11000100002A9F0000000000000B00", "WAIT": "true"}),
        BatchEntry(3, b"b1", {"KEYS": "k", "UNIQ_KEY": "AC11000100002A9F0000000000000B01", "WAIT": "false"}),
        BatchEntry(0, b"b2", {"UNIQ_KEY": "AC11000100002A9F0000000000000B02", "p": "q"}),
    ]

    async def probe(conn: Connection) -> tuple[int, int, list[tuple[bytes, int, int, dict[str, str]]]]:
        r = await send(conn, BATCH_TOPIC, encode_batch(entries), {"WAIT": "true"}, batch=True)
        assert r.code == ResponseCode.SUCCESS, (r.code, r.remark)
        ids = r.ext_fields["msgId"].split(",")
        pulled = await pull_from(conn, BATCH_TOPIC, int(r.ext_fields["queueOffset"]), len(entries))
        assert ids == [m.offset_msg_id for m in pulled]
        return len(ids), int(r.ext_fields["queueOffset"]), [_normalised(m, False) for m in pulled]

    theirs, ours = on_both(sides, probe)
    assert theirs[0] == 3, theirs
    assert ours == theirs


def test_a_compressed_batch_is_taken_where_rocketmq_fails(sides: tuple[Side, Side]) -> None:
    """A batch body compressed whole, with the compressed flag (RocketMQ's Java client never sends one; other clients
    may): RocketMQ's broker fails on it (SYSTEM_ERROR); sievemq inflates it and stores each entry as a plain batch's
    (a deliberate difference, docs/compat.md)."""
    entries = [BatchEntry(0, f"z{i}".encode() * 200, {"UNIQ_KEY": f"AC11000100002A9F00000000000C{i:04X}"})
               for i in range(3)]  # fmt: skip

    async def probe(conn: Connection) -> tuple[int, list[tuple[bytes, int, int, dict[str, str]]]]:
        r = await send(conn, BATCH_TOPIC, zlib.compress(encode_batch(entries)), {}, batch=True, sys_flag=COMPRESSED)
        if r.code != ResponseCode.SUCCESS:
            return r.code, []
        pulled = await pull_from(conn, BATCH_TOPIC, int(r.ext_fields["queueOffset"]), len(entries))
        return r.code, [_normalised(m, False) for m in pulled]

    theirs, ours = on_both(sides, probe)
    assert theirs == (ResponseCode.SYSTEM_ERROR, []), theirs
    assert ours == (ResponseCode.SUCCESS, [(e.body, e.flag, 0, e.properties) for e in entries]), ours


# ------------------------------------------------------------------------------------------- refusals
BIG_PROPERTIES = {"big": "v" * 33_000}
R = ResponseCode
REFUSALS: dict[str, tuple[dict[str, Any], int]] = {
    "illegal character in topic": ({"topic": "bad topic"}, R.INVALID_PARAMETER),
    "topic of 128 characters": ({"topic": "t" * 128}, R.INVALID_PARAMETER),
    "topic of 127 characters": ({"topic": "t" * 127}, R.SUCCESS),
    "the auto-create template topic": ({"topic": "TBW102"}, R.SUCCESS),
    "the delay topic": ({"topic": "SCHEDULE_TOPIC_XXXX"}, R.NO_PERMISSION),
    "a retry topic's name with no group": ({"topic": "%RETRY%"}, R.SUBSCRIPTION_GROUP_NOT_EXIST),
    "the retry topic of a new group (auto-create on)": ({"topic": "%RETRY%CompatNewGroup"}, R.SUCCESS),
    "queue id = write queues": ({"topic": QUEUES_TOPIC, "queue_id": 4}, R.INVALID_PARAMETER),
    "queue id -1 (the broker picks)": ({"topic": QUEUES_TOPIC, "queue_id": -1}, R.SUCCESS),
    "queue id -2": ({"topic": QUEUES_TOPIC, "queue_id": -2}, R.SUCCESS),
    "empty body": ({"body": b""}, R.SYSTEM_ERROR),
    "body of maxMessageSize": ({"body": b"x" * MAX_MESSAGE_SIZE}, R.SUCCESS),
    "body of maxMessageSize + 1": ({"body": b"x" * (MAX_MESSAGE_SIZE + 1)}, R.MESSAGE_ILLEGAL),
    "properties over 32767 bytes": ({"props": BIG_PROPERTIES}, R.MESSAGE_ILLEGAL),
    "illegal producer group": ({"group": "bad group"}, R.SUCCESS),
    "an unknown topic (auto-create on)": ({"topic": "CompatAutoCreated"}, R.SUCCESS),
}
"""Each case's request and Apache RocketMQ 5.5.0's code for it (observed), which sievemq answers too unless the
case is in ``DELIBERATE``."""
DELIBERATE: dict[str, tuple[int, int, str]] = {
    "the auto-create template topic": (
        ResponseCode.SUCCESS,
        ResponseCode.INVALID_PARAMETER,
        "RocketMQ's broker stores a message sent to TBW102 (its own clients refuse to send one); sievemq refuses it",
    ),
    "queue id -2": (
        ResponseCode.SUCCESS,
        ResponseCode.SYSTEM_ERROR,
        "RocketMQ picks a queue for any negative id; sievemq takes -1 only and refuses other negative ids",
    ),
    "empty body": (
        ResponseCode.SYSTEM_ERROR,
        ResponseCode.MESSAGE_ILLEGAL,
        "RocketMQ's broker fails on an empty body (its clients refuse to send one); sievemq says what is wrong",
    ),
    "illegal producer group": (
        ResponseCode.SUCCESS,
        ResponseCode.INVALID_PARAMETER,
        "RocketMQ's broker does not check the producer group's name; sievemq checks every name at the edge",
    ),
}
"""Refusals where sievemq answers otherwise on purpose: (RocketMQ's code, sievemq's code, why); docs/compat.md."""


@pytest.mark.parametrize("case", list(REFUSALS))
def test_what_each_broker_refuses(sides: tuple[Side, Side], case: str) -> None:
    request, observed = REFUSALS[case]
    spec = {"topic": TOPIC, "body": b"x", "props": {"WAIT": "true"}, **request}

    async def probe(conn: Connection) -> int:
        r = await send(conn, spec["topic"], spec["body"], spec["props"], queue_id=spec.get("queue_id", 0),
                       group=spec.get("group", "compat_producer"))  # fmt: skip
        return r.code

    theirs, ours = on_both(sides, probe)
    assert theirs == observed, f"RocketMQ now answers {theirs} (observed: {observed})"
    if case in DELIBERATE:
        expected_theirs, expected_ours, _why = DELIBERATE[case]
        assert (theirs, ours) == (expected_theirs, expected_ours), "the documented difference changed"
    else:
        assert ours == theirs, (case, theirs, ours)


@pytest.mark.parametrize(
    ("what", "name", "observed"),
    [
        ("topic", "bad topic", R.INVALID_PARAMETER),
        ("topic", "t" * 128, R.INVALID_PARAMETER),
        ("topic", "TBW102", R.INVALID_PARAMETER),
        ("topic", "SCHEDULE_TOPIC_XXXX", R.INVALID_PARAMETER),
        ("topic", "CompatCreated", R.SUCCESS),
        ("group", "bad group", R.INVALID_PARAMETER),
        ("group", "CompatCreatedGroup", R.SUCCESS),
    ],
)
def test_what_creating_a_topic_or_group_answers(sides: tuple[Side, Side], what: str, name: str, observed: int) -> None:
    """UPDATE_AND_CREATE_TOPIC (17) and UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200): an illegal name or one of the
    broker's own topics is INVALID_PARAMETER on both."""

    async def probe(conn: Connection) -> int:
        if what == "topic":
            fields = {"topic": name, "defaultTopic": "TBW102", "readQueueNums": 1, "writeQueueNums": 1, "perm": 6,
                      "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False}  # fmt: skip
            cmd = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, fields)
        else:
            body = orjson.dumps({"groupName": name})
            cmd = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body)
        return (await conn.request(cmd, 30.0)).code

    theirs, ours = on_both(sides, probe)
    assert theirs == observed, f"RocketMQ now answers {theirs} (observed: {observed})"
    assert ours == theirs
