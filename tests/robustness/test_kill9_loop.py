"""``kill -9`` at random moments, 20 rounds, under SYNC_FLUSH: not one acknowledged message is lost or changed."""

from __future__ import annotations

import asyncio
import random

from sievemq.errors import SieveError
from sievemq.remoting.codes import ResponseCode
from sievemq.remoting.connection import Connection, connect
from tests.integration.conftest import Cluster, OpenConn
from tests.integration.helpers import create_topic, pull_all
from tests.support import wire

ROUNDS = 20
TOPIC = "KillLoop"
QUEUES = 3
SEGMENT = 64 * 1024


async def _send(conn: Connection, tag: str, q: int, acked: dict[tuple[int, int], bytes], stop: asyncio.Event) -> None:
    i = 0
    while not stop.is_set():
        body = f"{tag}-{i}-".encode() + bytes([i % 251]) * (50 + (i * 37) % 700)
        try:
            r = await wire.send_message(conn, TOPIC, body, queue_id=q, timeout=5.0)
        except SieveError:
            return  # killed under us: never acknowledged
        assert r.code == ResponseCode.SUCCESS, r
        key = (r.queue_id, r.queue_offset)
        assert key not in acked, f"queue offset {key} acknowledged twice"
        acked[key] = body
        i += 1


async def test_twenty_kill9_rounds_lose_nothing_acknowledged(cluster: Cluster, open_conn: OpenConn) -> None:
    rnd = random.Random(20)
    ns = cluster.namesrv()
    broker = cluster.broker(ns.addr, "broker-k", flush="SYNC_FLUSH", segment=SEGMENT)
    await create_topic(await open_conn(broker), TOPIC, queues=QUEUES)
    acked: dict[tuple[int, int], bytes] = {}
    per_round = []
    for n in range(ROUNDS):
        conns = [await connect("127.0.0.1", broker.port) for _ in range(QUEUES)]
        stop = asyncio.Event()
        before = len(acked)
        tasks = [asyncio.create_task(_send(c, f"r{n}s{q}", q, acked, stop)) for q, c in enumerate(conns)]
        settle = asyncio.get_running_loop().time() + 10.0  # a restarted broker on a busy machine may answer late
        while len(acked) == before and asyncio.get_running_loop().time() < settle:
            await asyncio.sleep(0.01)
        await asyncio.sleep(rnd.uniform(0.15, 0.6))
        broker.kill9()  # mid-stream: some sends are in flight, unanswered
        await asyncio.wait_for(asyncio.gather(*tasks), 10.0)
        stop.set()
        for c in conns:
            c.close()
        per_round.append(len(acked) - before)
        broker = cluster.restart(broker)

    conn = await open_conn(broker)
    lost, changed = [], []
    for q in range(QUEUES):
        stored = {m.queue_offset: m.body for m in await pull_all(conn, TOPIC, q)}
        assert sorted(stored) == list(range(len(stored))), f"queue {q} has holes"
        for (qid, off), body in acked.items():
            if qid != q:
                continue
            if off not in stored:
                lost.append((qid, off))
            elif stored[off] != body:
                changed.append((qid, off))
    print(f"\nkill -9 loop: {ROUNDS} rounds, {len(acked):,} acknowledged (per round {min(per_round)}-{max(per_round)}),"
          f" {len(lost)} lost, {len(changed)} changed")  # fmt: skip
    assert min(per_round) > 0, "a round acknowledged nothing: the kill came before any send"
    assert not lost, f"{len(lost)} acknowledged messages lost, e.g. {lost[:5]}"
    assert not changed, f"{len(changed)} acknowledged messages changed, e.g. {changed[:5]}"
