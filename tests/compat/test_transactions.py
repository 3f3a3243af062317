"""Transactions of the Java client, compared with Apache RocketMQ: the same TransactionMQProducer (rocketmq-client
5.5.0, tests/interop's Java driver) against both brokers, with the same short check settings (the defaults are
compared in test_broker_defaults.py). What the producer observes (send answers, the local states, every check-back:
how many per message and the half message each carries) and what a consumer gets afterwards must be the same; so
must what becomes of a transaction nobody ever answers (``transactionCheckMax`` checks, then the half message goes
to TRANS_CHECK_MAX_TIME_TOPIC).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from sievemq.client.api import pull_message
from sievemq.protocol.message import MessageExt
from sievemq.protocol.names import TRANS_CHECK_MAX_TIME_TOPIC
from sievemq.remoting.codes import ResponseCode
from tests.compat.conftest import BROKER, CLUSTER
from tests.compat.sides import Side, broker_connection, create_topic, rocketmq_side, sievemq_side
from tests.interop.clients import DriverResult, ensure_clients_installed, run_driver, start_driver, unique_name

KIND = "java5"
"""rocketmq-client 5.5.0 (the 4.x remoting API of RocketMQ 5)."""
CHECK_MAX = 3
SETTINGS = {"transactionCheckInterval": 1000, "transactionCheckMax": CHECK_MAX}
"""Both brokers check a half message once it is older than ``transactionTimeOut`` (the default 6 s: RocketMQ 5
writes the commit and rollback records in batches every 3 s, ``transactionOpBatchInterval``, and checks a half message
it has not seen ended yet), then every second, at most 3 times."""
DEADLINE = 180.0
"""A safety net for waits on a state; never a measure."""


@pytest.fixture(scope="module")
def tx_sides(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Side, Side]]:
    """(Apache RocketMQ, sievemq) with the check settings above."""
    ensure_clients_installed()
    tmp = tmp_path_factory.mktemp("compat-tx")
    flags = ("--transaction-check-interval", "1000", "--transaction-check-max", str(CHECK_MAX))
    names = {"brokerClusterName": CLUSTER, "brokerName": BROKER}
    with rocketmq_side(tmp, **names, **SETTINGS) as ref, sievemq_side(tmp, *flags) as ours:
        yield ref, ours


def new_topic(sides: tuple[Side, Side]) -> str:
    """A topic of one queue made on both brokers (the same name on both, so that what names it compares)."""
    topic = unique_name("CompatTx")

    async def make() -> None:
        for side in sides:
            await create_topic(side, topic)

    asyncio.run(make())
    return topic


def transaction(side: Side, topic: str, group: str, *args: str) -> DriverResult:
    return run_driver(KIND, ["transaction", "--namesrv", side.namesrv, "--topic", topic, "--group", group,
                             "--send-timeout-ms", "15000", *args], timeout=DEADLINE + 60)  # fmt: skip


def norm(props: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """Properties without the message id (UNIQ_KEY, which differs by run), any value equal to it shown as
    ``<id>``."""
    uniq = props.get("UNIQ_KEY")
    return tuple(sorted((k, "<id>" if v == uniq else v) for k, v in props.items() if k != "UNIQ_KEY"))


def checks_seen(res: DriverResult) -> list[tuple[Any, ...]]:
    """Each check-back as the producer saw it: (keys, its count, the answer, topic, queue, body, the half message's
    properties)."""
    return sorted((e["keys"], e["times"], e["answer"], e["topic"], e["queue_id"], e["body"], norm(e["props"]))
                  for e in res.of("checked"))  # fmt: skip


def test_commit_rollback_and_check_back(tx_sides: tuple[Side, Side]) -> None:
    """COMMIT, ROLLBACK and UNKNOW local states; each UNKNOW one is checked back, answered UNKNOW twice then
    COMMIT: the same checks, carrying the same half message, and the same messages delivered."""

    topic, group = new_topic(tx_sides), unique_name("CompatTxP")

    def scenario(side: Side) -> dict[str, Any]:
        res = transaction(side, topic, group, "--count", "6", "--plan", "commit,rollback,unknown", "--key-prefix", "tx",
                          "--tags", "TagA", "--unknown-checks", "2", "--linger", "1", "--timeout", str(DEADLINE))
        assert res.ok, res.describe()
        sent = sorted((e["keys"], e["status"], e["local_state"]) for e in res.of("sent"))

        got = asyncio.run(records(side, topic, 4))
        return {"sent": sent, "checks": checks_seen(res), "delivered": sorted(shown(m) for m in got)}

    ref, ours = (scenario(s) for s in tx_sides)
    assert ref["sent"] == ours["sent"]
    assert ref["checks"] == ours["checks"]
    assert ref["delivered"] == ours["delivered"]
    assert [(row[0], row[1]) for row in ours["checks"]] == [(k, n) for k in ("tx2", "tx5") for n in (1, 2, 3)]
    assert [row[0] for row in ours["delivered"]] == ["body-0", "body-2", "body-3", "body-5"]


def shown(m: MessageExt) -> tuple[Any, ...]:
    return m.body.decode(), m.topic, m.queue_id, m.sys_flag, m.reconsume_times, norm(m.properties)


async def records(side: Side, topic: str, want: int, real_topic: str | None = None) -> list[MessageExt]:
    """Queue 0 of ``topic`` once it holds ``want`` records (only those whose ``REAL_TOPIC`` is ``real_topic``, when
    given)."""
    conn = await broker_connection(side)
    try:
        end = time.monotonic() + DEADLINE
        while True:
            r = await pull_message(conn, "CompatTxPeek", topic, 0, 0, max_nums=64)
            got = r.messages if r.code == ResponseCode.SUCCESS else []
            if real_topic is not None:
                got = [m for m in got if m.properties.get("REAL_TOPIC") == real_topic]
            if len(got) >= want:
                return got
            assert time.monotonic() < end, f"{side.name}: {len(got)} of {want} in {topic}; last {r.code} {r.remark}"
            await asyncio.sleep(0.1)  # polling for a state: a commit, or the broker's next check round
    finally:
        conn.close()


def test_a_transaction_nobody_answers_is_checked_then_set_aside(tx_sides: tuple[Side, Side]) -> None:
    """UNKNOW forever: ``transactionCheckMax`` check-backs, then a copy of the half message is stored in
    TRANS_CHECK_MAX_TIME_TOPIC (where an operator finds it), the same on both."""
    topic, group = new_topic(tx_sides), unique_name("CompatTxP")

    def scenario(side: Side) -> dict[str, Any]:
        args = ["transaction", "--namesrv", side.namesrv, "--topic", topic, "--group", group, "--send-timeout-ms",
                "15000", "--count", "2", "--plan", "unknown", "--key-prefix", "u", "--unknown-checks", "1000",
                "--timeout", str(DEADLINE)]  # fmt: skip
        with start_driver(KIND, args) as d:
            d.wait_for("sent", timeout=DEADLINE, predicate=lambda e: e["keys"] == "u1")
            aside = asyncio.run(records(side, TRANS_CHECK_MAX_TIME_TOPIC, 2, real_topic=topic))
            for key in ("u0", "u1"):  # a check-back is handled on the producer's own threads: it may say so later
                last = (key, CHECK_MAX)
                d.wait_for("checked", timeout=DEADLINE, predicate=lambda e, last=last: (e["keys"], e["times"]) == last)
            d.stop()
        return {"checks": checks_seen(d.result()), "aside": sorted(shown(m) for m in aside)}

    ref, ours = (scenario(s) for s in tx_sides)
    assert ref["aside"] == ours["aside"]
    assert ref["checks"] == ours["checks"]
    assert Counter(row[0] for row in ours["checks"]) == {"u0": CHECK_MAX, "u1": CHECK_MAX}
