"""Queue locks of orderly consumers (LOCK_BATCH_MQ 41, UNLOCK_BATCH_MQ 42), compared with Apache RocketMQ 5.5.0:
which queues each client of a group gets when two ask for the same ones, what an unlock frees, and that a lock
is per group."""

from __future__ import annotations

import asyncio
from typing import Any

from sievemq.client.api import lock_batch_mq, unlock_batch_mq
from sievemq.remoting.connection import Connection
from tests.compat.conftest import BROKER
from tests.compat.sides import Side, create_topic
from tests.compat.test_send_pull import on_both

TOPIC = "CompatLocks"


def queues(*ids: int) -> list[dict[str, Any]]:
    return [{"topic": TOPIC, "brokerName": BROKER, "queueId": i} for i in ids]


def held(answer: list[dict[str, Any]]) -> list[int]:
    return sorted(q["queueId"] for q in answer)


def test_two_clients_lock_unlock_and_relock(sides: tuple[Side, Side]) -> None:
    for side in sides:
        asyncio.run(create_topic(side, TOPIC, queues=4))

    async def probe(conn: Connection) -> list[list[int]]:
        g, other = "CompatLockGroup", "CompatLockOther"
        steps = [
            held(await lock_batch_mq(conn, g, "10.0.0.1@1", queues(0, 1), 30.0)),  # A takes 0, 1
            held(await lock_batch_mq(conn, g, "10.0.0.2@2", queues(0, 1, 2), 30.0)),  # B gets only 2
            held(await lock_batch_mq(conn, g, "10.0.0.1@1", queues(0, 1, 2, 3), 30.0)),  # A keeps 0, 1, takes 3
            held(await lock_batch_mq(conn, other, "10.0.0.2@2", queues(0, 1), 30.0)),  # another group: its own locks
        ]
        await unlock_batch_mq(conn, g, "10.0.0.1@1", queues(0), 30.0)
        steps.append(held(await lock_batch_mq(conn, g, "10.0.0.2@2", queues(0, 1), 30.0)))  # B gets the freed 0
        await unlock_batch_mq(conn, g, "10.0.0.2@2", queues(1), 30.0)  # not B's: changes nothing
        steps.append(held(await lock_batch_mq(conn, g, "10.0.0.1@1", queues(0, 1), 30.0)))  # A still has 1 only
        return steps

    theirs, ours = on_both(sides, probe)
    assert theirs == [[0, 1], [2], [0, 1, 3], [0, 1], [0], [1]], theirs
    assert ours == theirs
