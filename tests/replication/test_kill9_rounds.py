"""Twenty ``kill -9``s of a SYNC_MASTER at random moments under load: every message it acknowledged (SEND_OK) is in
the slave, read back from the slave alone."""

from __future__ import annotations

import asyncio
import contextlib
import random

from sievemq import Message, Producer
from sievemq.client.message import SendStatus
from tests.support.replica_sets import ReplicaSets, in_step, read_all

ROUNDS = 20
SENDERS = 3
TOPIC = "Kill9T"


async def _send_until_killed(p: Producer, prefix: str, acked: set[bytes]) -> None:
    i = 0
    while True:
        body = f"{prefix}-{i}".encode()
        i += 1
        try:
            r = await p.send(Message(TOPIC, body), timeout=2.0)
        except Exception:
            await asyncio.sleep(0.05)  # the master is gone: nothing acknowledged
            continue
        if r.status == SendStatus.SEND_OK:
            acked.add(body)


async def test_no_acknowledged_message_is_lost_over_twenty_kill9s_of_the_master(rsets: ReplicaSets) -> None:
    rng = random.Random(13)
    slave = rsets.broker("slave", "SLAVE", 1).start()
    acked: set[bytes] = set()
    for n in range(ROUNDS):
        master = rsets.broker("master", "SYNC_MASTER").start()
        await in_step(rsets.namesrv, timeout=30.0)
        async with Producer(rsets.namesrv, "kill9-p", retry_times=0, send_timeout=2.0) as p:
            senders = [asyncio.create_task(_send_until_killed(p, f"r{n}s{k}", acked)) for k in range(SENDERS)]
            await asyncio.sleep(rng.uniform(0.2, 1.0))
            master.kill9()
            await asyncio.sleep(0.2)
            for t in senders:
                t.cancel()
            for t in senders:
                with contextlib.suppress(asyncio.CancelledError):
                    await t
    got = {m.body for m in await read_all(slave.addr, TOPIC)}
    lost = acked - got
    print(f"{ROUNDS} kill -9 rounds: {len(acked)} acknowledged, {len(got)} on the slave, {len(lost)} lost")
    assert len(acked) > ROUNDS * 10, "too few sends acknowledged for the test to mean anything"
    assert not lost, sorted(lost)[:10]
