"""Consumer offsets, compared with Apache RocketMQ: what UPDATE_CONSUMER_OFFSET (15) accepts and what
QUERY_CONSUMER_OFFSET (14) then answers, for ordinary commits and for the odd ones (a queue the topic does not have,
an offset past the queue's end or before its start, a topic or a group the broker does not know).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from sievemq.admin.api import AdminClient
from sievemq.client.message import Message
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection
from tests.compat.sides import Side, create_topic, send_all
from tests.compat.test_send_pull import on_both

TOPIC = "CompatOffsets"
STORED = 5
"""Messages in queue 0 of the topic (its max offset)."""


@pytest.fixture(scope="module", autouse=True)
def topic(sides: tuple[Side, Side]) -> None:
    async def make() -> None:
        for side in sides:
            await create_topic(side, TOPIC, queues=2)
            await send_all(side, TOPIC, [Message(TOPIC, f"o{i}".encode()) for i in range(STORED)])

    asyncio.run(make())


async def commit(conn: Connection, group: str, topic: str, queue_id: int, offset: int) -> int:
    """UPDATE_CONSUMER_OFFSET, two-way: the code answered."""
    fields = {"consumerGroup": group, "topic": topic, "queueId": queue_id, "commitOffset": offset}
    resp = await conn.request(RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, fields), 30.0)
    return resp.code


async def query(conn: Connection, group: str, topic: str, queue_id: int) -> tuple[int, int | None]:
    """QUERY_CONSUMER_OFFSET with ``setZeroIfNotFound=false``: (code, offset or None)."""
    fields = {"consumerGroup": group, "topic": topic, "queueId": queue_id, "setZeroIfNotFound": "false"}
    resp = await conn.request(RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, fields), 30.0)
    offset = resp.ext_fields.get("offset")
    return resp.code, (int(offset) if resp.code == ResponseCode.SUCCESS and offset is not None else None)


CASES: dict[str, dict[str, Any]] = {
    "an offset inside the queue": {"offset": 3},
    "the queue's end": {"offset": STORED},
    "past the queue's end": {"offset": STORED + 100},
    "zero": {"offset": 0},
    "a queue the topic does not have": {"queue": 7, "offset": 1},
    "a topic the broker does not know": {"topic": "CompatNoSuchTopic", "offset": 1},
    "a group the broker does not know": {"no group": True, "offset": 1},
    "a negative queue id": {"queue": -1, "offset": 1},
}


async def create_group(side: Side, group: str) -> None:
    """The group on the side's broker (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP), as a consumer's first heartbeat or an
    operator makes it."""
    async with AdminClient(side.namesrv) as admin:
        await admin.update_group(group, {}, broker=side.broker)


DELIBERATE = {
    "a queue the topic does not have": (
        (ResponseCode.SUCCESS, (ResponseCode.SUCCESS, 1)),
        (ResponseCode.INVALID_PARAMETER, (ResponseCode.QUERY_NOT_FOUND, None)),
    ),
}
"""(RocketMQ's answers, sievemq's): RocketMQ stores an offset of any queue id, so one client can grow the offset
table without end; sievemq refuses a queue the topic does not have (docs/compat.md)."""


@pytest.mark.parametrize("case", list(CASES))
def test_a_commit_and_what_is_read_back(sides: tuple[Side, Side], case: str) -> None:
    spec = {"topic": TOPIC, "queue": 0, **CASES[case]}
    group = "CompatOffsets" + "".join(w[:3] for w in case.split())
    for side in sides:
        if not spec.get("no group"):
            asyncio.run(create_group(side, group))

    async def probe(conn: Connection) -> tuple[int, tuple[int, int | None]]:
        code = await commit(conn, group, spec["topic"], spec["queue"], spec["offset"])
        return code, await query(conn, group, spec["topic"], spec["queue"])

    theirs, ours = on_both(sides, probe)
    if case in DELIBERATE:
        assert (theirs, ours) == DELIBERATE[case], (case, theirs, ours)
    else:
        assert ours == theirs, (case, theirs, ours)


def test_a_later_commit_replaces_an_earlier_one_even_backwards(sides: tuple[Side, Side]) -> None:
    for side in sides:
        asyncio.run(create_group(side, "CompatOffsetsBack"))

    async def probe(conn: Connection) -> list[tuple[int, int | None]]:
        seen = []
        for offset in (4, 2, 5):
            await commit(conn, "CompatOffsetsBack", TOPIC, 0, offset)
            seen.append(await query(conn, "CompatOffsetsBack", TOPIC, 0))
        return seen

    theirs, ours = on_both(sides, probe)
    assert [o for _c, o in theirs] == [4, 2, 5], theirs
    assert ours == theirs
