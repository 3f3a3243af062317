"""Timer and delay messages, compared with Apache RocketMQ 5.5.0: a message with ``TIMER_DELAY_SEC`` or
``TIMER_DELIVER_MS`` (RocketMQ 5's timer wheel) or a ``DELAY`` level arrives no earlier than asked, and a consumer
sees the same properties on it (times and ids normalised)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from sievemq.protocol.message import MessageExt
from sievemq.remoting.codes import ResponseCode
from sievemq.remoting.connection import Connection
from tests.compat.sides import Side, create_topic
from tests.compat.test_retries import differences, stored
from tests.compat.test_send_pull import on_both, send

TOPIC = "CompatTimer"
TIMES = {"TIMER_DELIVER_MS", "TIMER_OUT_MS", "TIMER_ENQUEUE_MS", "TIMER_DEQUEUE_MS"}
"""Properties holding times: compared as present or not."""


@pytest.fixture(scope="module", autouse=True)
def topic(sides: tuple[Side, Side]) -> None:
    async def make() -> None:
        for side in sides:
            await create_topic(side, TOPIC)

    asyncio.run(make())


def view(m: MessageExt) -> dict[str, Any]:
    props = {k: ("<time>" if k in TIMES else v) for k, v in m.properties.items() if k != "UNIQ_KEY"}
    return {"topic": m.topic, "body": m.body, "reconsumeTimes": m.reconsume_times, "props": props}


@pytest.mark.parametrize(
    ("case", "props", "wait_s"),
    [
        ("TIMER_DELAY_SEC", {"TIMER_DELAY_SEC": "2"}, 2.0),
        ("TIMER_DELIVER_MS", {}, 2.0),
        ("DELAY level 1", {"DELAY": "1"}, 1.0),
    ],
)
def test_a_timed_message_arrives_when_asked_with_the_same_properties(
    sides: tuple[Side, Side], case: str, props: dict[str, str], wait_s: float
) -> None:
    async def probe(conn: Connection) -> tuple[bool, dict[str, Any]]:
        asked = dict(props, WAIT="true", TAGS="T", KEYS="k")
        if case == "TIMER_DELIVER_MS":
            asked["TIMER_DELIVER_MS"] = str(int(time.time() * 1000) + int(wait_s * 1000))
        sent_at = time.time()
        r = await send(conn, TOPIC, case.encode(), asked)
        assert r.code == ResponseCode.SUCCESS, (r.code, r.remark)
        # the delivered copy is the next record of the topic's queue 0 that carries this body
        offset = 0
        while True:
            m = await stored(conn, TOPIC, "CompatTimerReader", offset)
            if m.body == case.encode():
                break
            offset += 1
        # store time is the broker's clock; allow 1 s for the clocks' rounding (RocketMQ's wheel ticks per second)
        return m.store_timestamp / 1000 >= sent_at + wait_s - 1.0, view(m)

    theirs, ours = on_both(sides, probe)
    assert theirs[0] and ours[0], (theirs, ours)
    if case.startswith("DELAY"):  # deliberate: RocketMQ leaves the spent level in the delivered copy (docs/compat.md)
        assert theirs[1]["props"].pop("DELAY") == "1" and "DELAY" not in ours[1]["props"], (theirs, ours)
    assert ours[1] == theirs[1], differences(case, theirs[1], ours[1])
