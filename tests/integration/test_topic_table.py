"""kill -9 while topics are created one at a time (17) and in lists (18): every answered creation survives the
restart, compactions included, and config/topics.json stays RocketMQ's TopicConfigSerializeWrapper
(docs/topic-table.md)."""

from __future__ import annotations

import asyncio
import json

import orjson

from sievemq.errors import SieveError
from sievemq.protocol.route import TopicConfig
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.connection import Connection
from tests.integration.conftest import Cluster, OpenConn
from tests.integration.helpers import call, eventually
from tests.support.procs import Proc

LIST = 1000
ROUNDS = (2500, 3000, 3500)
"""Topics answered before each kill -9 (about 9,000 in all: the journal passes 1 MiB, so a compaction runs)."""


async def _singles(conn: Connection, prefix: str, created: list[str], stop: asyncio.Event) -> None:
    i = 0
    while not stop.is_set():
        name = f"{prefix}_S{i:05d}"
        fields = {"topic": name, "readQueueNums": 4, "writeQueueNums": 4, "perm": 6, "topicFilterType": "SINGLE_TAG"}
        try:
            resp = await call(conn, RequestCode.UPDATE_AND_CREATE_TOPIC, fields)
        except (SieveError, TimeoutError):
            return  # the broker died under us: not answered
        assert resp.code == ResponseCode.SUCCESS, resp
        created.append(name)
        i += 1


async def _lists(conn: Connection, prefix: str, created: list[str], stop: asyncio.Event) -> None:
    j = 0
    while not stop.is_set():
        names = [f"{prefix}_L{j:03d}_{k:04d}" for k in range(LIST)]
        body = orjson.dumps({"topicConfigList": [TopicConfig(n, 4, 4).to_json() for n in names]})
        try:
            resp = await call(conn, RequestCode.UPDATE_AND_CREATE_TOPIC_LIST, body=body)
        except (SieveError, TimeoutError):
            return
        assert resp.code == ResponseCode.SUCCESS, resp
        created.extend(names)
        j += 1


async def _names(conn: Connection) -> set[str]:
    resp = await call(conn, RequestCode.GET_TOPIC_NAME_LIST)
    assert resp.code == ResponseCode.SUCCESS, resp
    return set(orjson.loads(resp.body)["topicList"])


async def test_kill9_while_creating_topics_keeps_every_answered_one(cluster: Cluster, open_conn: OpenConn) -> None:
    ns = cluster.namesrv()
    broker: Proc = cluster.broker(ns.addr, "broker-t", "--max-topics", "20000")
    created: list[str] = []
    for n, target in enumerate(ROUNDS):
        conn = await open_conn(broker)
        stop = asyncio.Event()
        goal = len(created) + target
        tasks = [asyncio.create_task(f(conn, f"R{n}", created, stop)) for f in (_singles, _lists)]
        while len(created) < goal:  # the state waited for: this many creations answered
            done = [t for t in tasks if t.done()]
            assert not done, [t.exception() for t in done]
            await asyncio.wait(tasks, timeout=0.05)
        broker.kill9()
        stop.set()
        await asyncio.wait_for(asyncio.gather(*tasks), 30.0)
        answered = set(created)
        broker = cluster.restart(broker)
        held = await _names(await open_conn(broker))
        missing = sorted(answered - held)
        assert not missing, f"round {n}: {len(missing)} answered topics lost, e.g. {missing[:5]}"

    config = cluster.store_dir(broker) / "config"

    def generations() -> list[int]:
        return sorted(int(p.name.rsplit(".", 1)[1]) for p in config.glob("topics.json.journal.*"))

    # the restarted broker compacts what it replayed (the journal passed 1 MiB, or 2 s without changes): a state
    await eventually(lambda: not generations() or generations()[0] > 0, timeout=30.0,
                     what="a compaction retiring the generations it covers")  # fmt: skip
    doc = json.loads((config / "topics.json").read_text())  # a compaction wrote it: a kill -9 never stops cleanly
    assert set(doc) == {"dataVersion", "topicConfigTable"}
    one = created[0]
    assert doc["topicConfigTable"][one] == {"order": False, "perm": 6, "readQueueNums": 4,
                                            "topicFilterType": "SINGLE_TAG", "topicName": one, "topicSysFlag": 0,
                                            "writeQueueNums": 4}  # fmt: skip
    assert broker.stop() == 0
    assert not list(config.glob("topics.json.journal.*")), "a clean stop compacts the journal into topics.json"
    on_disk = json.loads((config / "topics.json").read_text())["topicConfigTable"]
    assert set(created) <= set(on_disk)
    broker = cluster.restart(broker)
    assert set(created) <= await _names(await open_conn(broker))
