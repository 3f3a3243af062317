"""Filtering, compared with Apache RocketMQ: the same stored messages, the same selectors, the same deliveries.

Both brokers store the corpus of ``corpus.py`` on one queue; for each SQL92 selector both are asked whether it
compiles (CHECK_CLIENT_CONFIG) and, when both accept it, which messages a pull carrying it delivers. For tag
expressions, the pull answers alone. Every selector must get the same code and the same set of messages from both.
The differences sievemq keeps on purpose (docs/protocol/sql92.md §13) are checked separately, each against
RocketMQ's own answer, so a change on either side shows.
"""

from __future__ import annotations

import asyncio

import pytest

from sievemq.client.message import Message
from sievemq.remoting.codes import ResponseCode
from tests.compat import corpus
from tests.compat.sides import (
    Side,
    broker_connection,
    create_topic,
    matched,
    selector_accepted,
    send_all,
)

MESSAGES = 300
SELECTORS = 2000
SEED = 20261204
TOPIC = "CompatFilter"


@pytest.fixture(scope="module", autouse=True)
def corpus_stored(sides: tuple[Side, Side]) -> None:
    """Both brokers hold the corpus on one queue of TOPIC."""
    msgs = [
        Message(TOPIC, m.body.encode(), tags=m.tags, keys=m.keys, properties=m.properties)
        for m in corpus.messages(MESSAGES, SEED)
    ]

    async def fill() -> None:
        for side in sides:
            await create_topic(side, TOPIC)
            await send_all(side, TOPIC, msgs)

    asyncio.run(fill())


Outcome = tuple[int, frozenset[str]]


async def _outcomes(side: Side, selectors: list[str], kind: str) -> list[Outcome]:
    conn = await broker_connection(side)
    gate = asyncio.Semaphore(8)

    async def one(expression: str) -> Outcome:
        async with gate:
            if kind == "SQL92":
                code = await selector_accepted(conn, TOPIC, expression)
                if code != ResponseCode.SUCCESS:
                    return code, frozenset()
            return await matched(conn, TOPIC, expression, kind)

    try:
        return list(await asyncio.gather(*(one(s) for s in selectors)))
    finally:
        conn.close()


def _compare(sides: tuple[Side, Side], selectors: list[str], kind: str) -> tuple[list[str], list[Outcome]]:
    """The differences, one line each, and RocketMQ's outcomes."""
    ref, ours = sides

    async def both() -> tuple[list[Outcome], list[Outcome]]:
        return await asyncio.gather(_outcomes(ref, selectors, kind), _outcomes(ours, selectors, kind))

    theirs, mine = asyncio.run(both())
    diffs = []
    for text, a, b in zip(selectors, theirs, mine, strict=True):
        if a != b:
            only_ref, only_ours = sorted(a[1] - b[1]), sorted(b[1] - a[1])
            diffs.append(f"{text!r}: RocketMQ code {a[0]}, sievemq code {b[0]}; "
                         f"only RocketMQ delivers {only_ref[:8]}, only sievemq {only_ours[:8]}")  # fmt: skip
    return diffs, theirs


def test_sql92_selectors_deliver_the_same_messages(sides: tuple[Side, Side]) -> None:
    """SELECTORS selectors x MESSAGES messages: the same compile verdict and the same delivered set from both. The
    corpus exercises both outcomes: refused selectors, and accepted ones that deliver some messages but not all (a
    comparison where everything matches nothing would prove nothing)."""
    diffs, theirs = _compare(sides, corpus.sql_selectors(SELECTORS, SEED), "SQL92")
    assert not diffs, f"{len(diffs)} selectors differ:\n" + "\n".join(diffs[:30])
    refused = sum(1 for code, _ in theirs if code != ResponseCode.SUCCESS)
    partial = sum(1 for code, got in theirs if code == ResponseCode.SUCCESS and 0 < len(got) < MESSAGES)
    assert refused >= len(corpus.INVALID) - 2 and partial >= SELECTORS // 4, (refused, partial)


def test_tag_expressions_deliver_the_same_messages(sides: tuple[Side, Side]) -> None:
    """Tag expressions, odd ones included, select the same messages."""
    diffs, _ = _compare(sides, list(corpus.TAG_EXPRESSIONS), "TAG")
    assert not diffs, "\n".join(diffs)
