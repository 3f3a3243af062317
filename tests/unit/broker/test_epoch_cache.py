"""1007 GET_BROKER_EPOCH_CACHE (``sievemq.broker.processors.epoch``): RocketMQ's EpochEntryCache body from a failover
broker's term and its store, and RocketMQ's refusal outside controller mode. With mqadmin getBrokerEpoch:
tests/failover/test_mqadmin_controller.py."""

from __future__ import annotations

import orjson

from sievemq.broker.processors.epoch import NOT_CONTROLLER_MODE, OPEN_EPOCH_END, EpochProcessor, epoch_entry_cache
from sievemq.ha.term import Term
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from tests.unit.broker.conftest import Parts


def test_each_epoch_ends_where_the_next_starts_and_the_last_is_open() -> None:
    got = epoch_entry_cache("C", "broker-a", 2, [(1, 0), (3, 4096), (4, 4096), (6, 9000)], 12000)
    assert got == {
        "clusterName": "C",
        "brokerName": "broker-a",
        "brokerId": 2,
        "epochList": [
            {"epoch": 1, "startOffset": 0, "endOffset": 4096},
            {"epoch": 3, "startOffset": 4096, "endOffset": 4096},  # a master that wrote nothing
            {"epoch": 4, "startOffset": 4096, "endOffset": 9000},
            {"epoch": 6, "startOffset": 9000, "endOffset": (1 << 63) - 1},  # Java's Long.MAX_VALUE
        ],
        "maxOffset": 12000,
    }
    assert epoch_entry_cache("C", "b", 0, [], 0)["epochList"] == []


async def test_a_failover_broker_answers_from_its_term_and_another_as_rocketmq_outside_controller_mode(
    parts: Parts,
) -> None:
    await parts.put("T", b"x" * 100)
    end = parts.store.max_phy_offset
    assert end > 0
    term = Term(2, 5, 2, "10.0.0.2:10911", "10.0.0.2:10912", lambda: None, epochs=((1, 0), (5, 64)), cluster="C",
                broker_name="broker-a")  # fmt: skip
    ask = RemotingCommand.request(RequestCode.GET_BROKER_EPOCH_CACHE)
    answer = await EpochProcessor(term, parts.store, 0).epoch_cache(parts.conn(), ask)
    assert answer.code == ResponseCode.SUCCESS
    assert orjson.loads(answer.body) == {
        "clusterName": "C", "brokerName": "broker-a", "brokerId": 0, "maxOffset": end,
        "epochList": [{"epoch": 1, "startOffset": 0, "endOffset": 64},
                      {"epoch": 5, "startOffset": 64, "endOffset": OPEN_EPOCH_END}]}  # fmt: skip

    plain = await EpochProcessor(None, parts.store, 0).epoch_cache(parts.conn(), ask)
    assert (plain.code, plain.remark, plain.body) == (ResponseCode.SYSTEM_ERROR, NOT_CONTROLLER_MODE, b"")
    assert NOT_CONTROLLER_MODE == "this request only for controllerMode "
