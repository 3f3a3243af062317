"""Where a new consumer group starts, compared with Apache RocketMQ (docs/consume-from.md, docs/pop.md §1).

On a young queue (it starts at offset 0 and its first message is still in memory) RocketMQ starts a new group at
offset 0: a 4.x group asking for its offset is told 0, and a POP group (RocketMQ 5 clients through a proxy, initMode
MAX) is handed the messages sent before it started. sievemq must do the same by default. (The other branch, a queue
whose head is gone from memory, depends on RocketMQ reading the page cache; sievemq's own tests cover it with
``accessMessageInMemoryMaxRatio`` 0.)
"""

from __future__ import annotations

import asyncio

import pytest

from sievemq.client.message import Message
from sievemq.remoting.codes import ResponseCode
from tests.compat.sides import (
    Side,
    broker_connection,
    create_topic,
    pop_bodies,
    query_offset_answer,
    send_all,
)

TOPIC = "CompatStart"


@pytest.fixture(scope="module", autouse=True)
def young_queue(sides: tuple[Side, Side]) -> None:
    """Both brokers hold three messages on a young one-queue topic."""

    async def fill() -> None:
        for side in sides:
            await create_topic(side, TOPIC)
            await send_all(side, TOPIC, [Message(TOPIC, f"m{i}".encode()) for i in range(3)])

    asyncio.run(fill())


def _on_both(sides: tuple[Side, Side], probe: object) -> tuple[object, object]:
    async def one(side: Side) -> object:
        conn = await broker_connection(side)
        try:
            return await probe(conn)  # type: ignore[operator]
        finally:
            conn.close()

    async def both() -> tuple[object, object]:
        return await one(sides[0]), await one(sides[1])

    return asyncio.run(both())


@pytest.mark.parametrize("init_mode", [1, 0], ids=["MAX", "MIN"])
def test_a_new_pop_group_reads_a_young_queue_from_its_first_message(sides: tuple[Side, Side], init_mode: int) -> None:
    theirs, ours = _on_both(sides, lambda conn: pop_bodies(conn, f"popnew{init_mode}", TOPIC, init_mode))
    assert theirs == ["m0", "m1", "m2"], theirs
    assert ours == theirs


@pytest.mark.parametrize("zero", [None, True, False], ids=["absent", "true", "false"])
def test_a_new_4x_group_is_told_offset_zero_on_a_young_queue(sides: tuple[Side, Side], zero: bool | None) -> None:
    theirs, ours = _on_both(sides, lambda conn: query_offset_answer(conn, f"pullnew{zero}", TOPIC, zero))
    assert theirs == (-ResponseCode.QUERY_NOT_FOUND if zero is False else 0), theirs
    assert ours == theirs
