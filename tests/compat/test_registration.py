"""Compressed and split registrations across the two implementations (docs/registration.md): a sievemq broker
registering compressed and split with Apache RocketMQ 5.5.0's name server, and RocketMQ 5.5.0's broker with
``compressedRegister`` and ``enableSplitRegistration`` (and its incremental registration of a new topic)
registering with sievemq's name server."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from sievemq.protocol import mq_json
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.connection import Connection, connect
from tests.integration.helpers import call, create_topic, eventually, route_or_none
from tests.support.procs import Proc, broker_proc, namesrv_proc
from tests.support.rocketmq import Reference, rocketmq

SV_TOPICS = 2500
"""Topics of the sievemq broker: compressed (1000 or more) in three parts of 1000."""


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Reference, Proc]]:
    """RocketMQ 5.5.0 (its name server, and its broker registering compressed and split with sievemq's name server,
    in parts of 4 topics) and that sievemq name server."""
    tmp = tmp_path_factory.mktemp("registration")
    ns = namesrv_proc(tmp, "sv-ns")
    ns.start()
    try:
        broker = {"brokerName": "rmq-split", "namesrvAddr": ns.addr, "compressedRegister": True,
                  "enableSplitRegistration": True, "splitRegistrationSize": 4}  # fmt: skip
        with rocketmq(tmp, broker=broker) as ref:
            yield ref, ns
    finally:
        ns.stop()


async def _connect(addr: str) -> Connection:
    host, port = addr.rsplit(":", 1)
    return await connect(host, int(port))


def _preload(store: Path, count: int) -> None:
    (store / "config").mkdir(parents=True, exist_ok=True)
    table = {f"scale-{i:06d}": {"topicName": f"scale-{i:06d}", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6}
             for i in range(count)}  # fmt: skip
    doc = {"dataVersion": {"counter": 1, "timestamp": 1_700_000_000_000}, "topicConfigTable": table}
    (store / "config" / "topics.json").write_bytes(orjson.dumps(doc))


async def test_sievemq_broker_compressed_and_split_seen_by_rocketmq_namesrv(
    mixed: tuple[Reference, Proc], tmp_path: Path
) -> None:
    ref, _ = mixed
    _preload(tmp_path / "sv-split", SV_TOPICS)
    br = broker_proc(tmp_path, ref.namesrv, "sv-split", "--enable-split-registration", "true",
                     "--split-registration-size", "1000", "--max-topics", "5000")  # fmt: skip
    await asyncio.to_thread(br.start)
    ns = await _connect(ref.namesrv)
    try:
        for topic in ("scale-000000", f"scale-{SV_TOPICS // 2:06d}", f"scale-{SV_TOPICS - 1:06d}"):
            route = await eventually(lambda t=topic: route_or_none(ns, t), timeout=30.0, what=f"route of {topic}")
            assert [(q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm) for q in route.queue_datas] == [
                ("sv-split", 4, 4, 6)
            ]
            assert route.broker_datas[0].broker_addrs == {0: br.addr}
        listed = set(orjson.loads((await call(ns, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)).body)["topicList"])
        assert {f"scale-{i:06d}" for i in range(SV_TOPICS)} <= listed
        bc = await _connect(br.addr)
        try:
            await create_topic(bc, "SvAddedLater", queues=2)  # a new version: every part again
        finally:
            bc.close()
        route = await eventually(lambda: route_or_none(ns, "SvAddedLater"), timeout=30.0, what="the new topic")
        assert route.queue_datas[0].write_queue_nums == 2
    finally:
        ns.close()
        br.stop()


async def test_rocketmq_broker_compressed_and_split_routable_from_sievemq_namesrv(
    mixed: tuple[Reference, Proc],
) -> None:
    ref, sv_ns = mixed
    rb = await _connect(ref.broker)
    ns = await _connect(sv_ns.addr)
    try:
        resp = await call(rb, RequestCode.GET_ALL_TOPIC_CONFIG)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        theirs = set(mq_json.loads(resp.body)["topicConfigTable"])
        assert len(theirs) > 8, "enough topics for several parts of 4"

        async def listed() -> set[str]:
            r = await call(ns, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
            return set(orjson.loads(r.body)["topicList"]) if r.code == ResponseCode.SUCCESS else set()

        await eventually(lambda: _covers(listed(), theirs), timeout=30.0, what="every part's topics")
        # a topic created there: RocketMQ registers only it (registerIncrementBrokerData), the others stay
        await create_topic(rb, "RmqMadeLater", queues=3)
        route = await eventually(lambda: route_or_none(ns, "RmqMadeLater"), timeout=30.0, what="the new topic")
        assert [(q.broker_name, q.write_queue_nums) for q in route.queue_datas] == [("rmq-split", 3)]
        assert theirs <= await listed(), "the incremental registration dropped the other topics"
        tbw = await route_or_none(ns, "TBW102")
        assert tbw is not None and tbw.broker_datas[0].broker_addrs == {0: ref.broker}
    finally:
        rb.close()
        ns.close()


async def _covers(got: asyncio.Future[set[str]] | object, want: set[str]) -> bool:
    return want <= await got  # type: ignore[operator,misc]
