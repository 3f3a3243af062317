"""A chaos workload for automatic failover: producers that record every send and its outcome, a consumer group that
records every delivery, and the final read of the set, in a ``History`` for the checker (``tests/support/chaos``).

Acknowledgements are kept raw while the run lasts and become ``SendOk`` events at the end (``finish``), when the
set's epoch history is known: the epoch of an acknowledged message is the one whose start its commit-log offset
(from its offsetMsgId) is at or after, so that two masters acknowledging in one epoch show as split brain.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from sievemq import ConsumeResult, Message, MessageExt, Producer, PushConsumer
from sievemq.admin.api import AdminClient
from sievemq.client.message import SendStatus
from sievemq.errors import RemotingError
from sievemq.protocol.msgid import parse_offset_msg_id
from tests.support.chaos import History, Verdict, check
from tests.support.failover_sets import FailoverSet
from tests.support.replica_sets import read_all, until

__all__ = ["GROUP", "QUEUES", "TOPIC", "Workload", "acks", "finish", "three", "workload"]

TOPIC = "ChaosT"
GROUP = "chaos-g"
QUEUES = 4


@dataclass(frozen=True)
class _Ack:
    key: str
    t: float
    addr: str
    queue_id: int
    queue_offset: int
    msg_id: str
    commit_offset: int


class Workload:
    """``producers`` senders to ``topic`` (one message every ``pause`` seconds each) and one consumer group."""

    def __init__(self, namesrv: str, topic: str, group: str, history: History, *, producers: int = 2,
                 pause: float = 0.01, orderly: bool = False) -> None:  # fmt: skip
        """``orderly``: each producer sends to one queue (``shard_key``) and the group consumes orderly."""
        self.namesrv = namesrv
        self.topic = topic
        self.group = group
        self.history = history
        self.producers = producers
        self.pause = pause
        self.orderly = orderly
        self.acks: list[_Ack] = []
        self.delivered: set[str] = set()
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._consumer: PushConsumer | None = None

    async def start(self) -> None:
        """Start the consumer, then the producers."""
        c = PushConsumer(self.namesrv, self.group, instance_name="chaos-c", consume_from="first", pull_timeout=4.0,
                         pull_suspend=1.0, poll_namesrv_interval=1.0, rebalance_interval=2.0, persist_interval=1.0,
                         request_timeout=3.0, orderly=self.orderly)  # fmt: skip
        c.subscribe(self.topic)
        c.listener(self._on_messages)
        await c.start()
        self._consumer = c
        for n in range(self.producers):
            self._tasks.append(asyncio.create_task(self._produce(f"p{n}")))

    async def _on_messages(self, msgs: list[MessageExt]) -> ConsumeResult:
        for m in msgs:
            key = m.body.decode()
            self.history.delivered(key, group=self.group, consumer="chaos-c", broker_name="broker-a",
                                   queue_id=m.queue_id, queue_offset=m.queue_offset)  # fmt: skip
            self.delivered.add(key)
        return ConsumeResult.SUCCESS

    async def _produce(self, name: str) -> None:
        # the default route poll (30 s): a producer finds a new master by itself when its sends fail
        async with Producer(self.namesrv, f"chaos-{name}", send_timeout=3.0,
                            retry_times=0) as p:  # fmt: skip
            i = 0
            while not self._stop.is_set():
                key = f"{name}-{i}"
                i += 1
                self.history.send_attempt(key, name, topic=self.topic)
                try:
                    r = await p.send(Message(self.topic, key.encode()), shard_key=name if self.orderly else None)
                except RemotingError as e:
                    self.history.send_failed(key, code=e.code, reason=str(e)[:200])
                    await asyncio.sleep(0.1)
                    continue
                except Exception as e:  # a timeout, a closed connection: the message may be stored or not
                    self.history.send_failed(key, code=None, reason=f"{type(e).__name__}: {e}"[:200])
                    await asyncio.sleep(0.1)
                    continue
                t = time.monotonic()
                if r.status != SendStatus.SEND_OK:  # stored on the master, not confirmed by its replicas
                    self.history.send_failed(key, code=None, reason=str(r.status))
                else:
                    host, port, commit = parse_offset_msg_id(r.offset_msg_id)
                    self.acks.append(_Ack(key, t, f"{host}:{port}", r.message_queue.queue_id, r.queue_offset,
                                          r.offset_msg_id, commit))  # fmt: skip
                await asyncio.sleep(self.pause)

    def consumer_state(self) -> str:
        """Where the group's consumer is, per queue (for a failure's message)."""
        c = self._consumer
        if c is None:
            return "closed"
        try:
            queues = c._queues.pqs  # diagnostics only: the next offset each owned queue pulls from
            return repr({f"{mq.topic}/{mq.queue_id}": pq.next_offset for mq, pq in queues.items()})
        except Exception as e:
            return f"unknown ({e!r})"

    def acked_since(self, t: float) -> int:
        """Acknowledgements received after ``t``."""
        return sum(1 for a in self.acks if a.t > t)

    async def stop_producing(self) -> None:
        """Stop the producers (their last sends are answered first)."""
        self._stop.set()
        for task in self._tasks:
            with contextlib.suppress(Exception):
                await task

    async def close(self) -> None:
        """Stop everything."""
        await self.stop_producing()
        if self._consumer is not None:
            await self._consumer.close()
            self._consumer = None

    async def finish(self, master_addr: str, epochs: tuple[tuple[int, int], ...], queues: int) -> None:
        """Record the acknowledgements with their epochs, and the final read of the master's queues."""
        for a in self.acks:
            epoch = max((e for e, start in epochs if start <= a.commit_offset), default=None)
            self.history.send_ok(a.key, broker_addr=a.addr, broker_name="broker-a", epoch=epoch, queue_id=a.queue_id,
                                 queue_offset=a.queue_offset, msg_id=a.msg_id, t=a.t)  # fmt: skip
        for m in await read_all(master_addr, self.topic, queues):
            self.history.stored(m.body.decode(), broker_name="broker-a", queue_id=m.queue_id,
                                queue_offset=m.queue_offset, broker_addr=master_addr)  # fmt: skip
        self.history.final_read(("broker-a",))


@contextlib.asynccontextmanager
async def workload(fset: FailoverSet, *, orderly: bool = False) -> AsyncIterator[tuple[History, Workload]]:
    """A history and a started workload on ``TOPIC`` (stopped on exit)."""
    h = History()
    w = Workload(fset.namesrv, TOPIC, GROUP, h, orderly=orderly)
    await w.start()
    try:
        yield h, w
    finally:
        await w.close()


async def three(fset: FailoverSet, *extra: str) -> int:
    """Brokers 1, 2 and 3 up (with ``extra`` flags), all in sync, the topic made; the master's id."""
    for bid in (1, 2, 3):
        fset.broker(bid, *extra).start()
    st = await fset.wait_in_sync(1, 2, 3)
    async with AdminClient(fset.namesrv) as admin:
        await admin.create_topic(TOPIC, queues=QUEUES)
    return st.master_id


async def acks(w: Workload, since: float, n: int, what: str, timeout: float = 60.0) -> None:
    """Wait until ``n`` sends were acknowledged after ``since``."""

    async def enough() -> bool:
        return w.acked_since(since) >= n

    await until(enough, timeout, what)


async def finish(fset: FailoverSet, w: Workload, h: History, *, sync: bool = True) -> Verdict:
    """Stop producing, wait until the group has every acknowledged message the master holds, read the master and
    judge the history (order per queue too for an orderly workload)."""
    await w.stop_producing()
    acked = {a.key for a in w.acks}

    missing: list[str] = []

    async def settled() -> bool:  # every acknowledged message the master holds is delivered (a lost one is judged)
        if acked <= w.delivered:
            return True
        st = await fset.current()
        stored = {m.body.decode(): (m.queue_id, m.queue_offset) for m in await read_all(st.master_address, TOPIC,
                                                                                        QUEUES)}  # fmt: skip
        missing[:] = [f"{k}@{stored[k]}" for k in sorted(acked & stored.keys() - w.delivered)]
        return not missing

    try:
        await until(settled, 90.0, "every acknowledged message the master holds delivered to the group")
    except AssertionError as e:
        e.add_note(f"{len(missing)} not delivered (key@(queue, offset)): {missing[:20]}; the consumer: "
                   f"{w.consumer_state()}")
        raise
    await w.close()
    st = await fset.current()
    await w.finish(st.master_address, st.epochs, QUEUES)
    verdict = check(h, sync=sync, expected_groups=[GROUP], orderly=w.orderly)
    print(verdict.summary())  # the figures (pytest -s, or -rP)
    return verdict
