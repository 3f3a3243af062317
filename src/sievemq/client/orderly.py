"""Orderly consumption (``PushConsumer(orderly=True)``): per queue, one batch at a time, in queue order, while this
client holds the broker's lock on the queue (docs/orderly.md).

- A queue is taken only once LOCK_BATCH_MQ gave it to this client; every ``LOCK_INTERVAL`` seconds the locks of all
  owned queues are renewed (the broker frees a lock not renewed for 60 s; this client stops consuming a queue whose
  lock it has not confirmed for ``LOCK_VALID`` seconds). A queue taken away by a rebalance finishes its running
  batch, commits its offset and is unlocked, so the next holder starts right after the last message consumed here.
- A batch the listener fails (RECONSUME_LATER or an exception) is consumed again in place after ``suspend``
  seconds, nothing after it in the queue going first; once a message has failed ``max_reconsume_times`` times it
  goes to the group's dead-letter queue (``%DLQ%<group>``) and the queue moves on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Unpack

from sievemq.client import api
from sievemq.client.consume_service import ConsumeParts, ConsumeService, Listener
from sievemq.client.message import ConsumeResult, MessageQueue, restore_retry_topic
from sievemq.client.options import ConsumeOptions
from sievemq.client.process_queue import ProcessQueue
from sievemq.protocol.message import MessageExt, PropertyKey
from sievemq.protocol.names import is_retry_topic
from sievemq.util.tasks import Background, spawn

__all__ = ["LOCK_INTERVAL", "LOCK_VALID", "OrderlyConsumeService"]

log = logging.getLogger(__name__)

LOCK_INTERVAL = 20.0
"""Seconds between two renewals of the locks of the owned queues (RocketMQ's)."""
LOCK_VALID = 30.0
"""Seconds a confirmed lock counts on this side (the broker keeps it 60 s)."""
_WAIT_FOR_LOCK = 0.2


@dataclass
class _Lane:
    """The messages of one queue waiting for the listener, in offset order, and the task consuming them."""

    msgs: deque[MessageExt] = field(default_factory=deque)
    task: asyncio.Task[None] | None = None
    busy: bool = False


class OrderlyConsumeService(ConsumeService):
    """The consuming half of an orderly PushConsumer (see the module docstring)."""

    def __init__(
        self,
        group: str,
        listener: Listener,
        options: ConsumeOptions,
        *,
        owned_queues: Callable[[], Iterable[MessageQueue]],
        **parts: Unpack[ConsumeParts],
    ) -> None:
        """``owned_queues()``: the queues the consumer holds now (their locks are renewed)."""
        super().__init__(group, listener, options, **parts)
        self.owned_queues = owned_queues
        self._lanes: dict[MessageQueue, _Lane] = {}
        self._locked: dict[MessageQueue, float] = {}  # queue -> when the broker last confirmed our lock
        self._confirmed: dict[MessageQueue, float] = {}  # the same, kept once the lock is lost (running info)
        self._renewal = Background(f"keep-locks {group}")

    def start(self) -> None:
        """Renew the locks of the owned queues every ``LOCK_INTERVAL`` seconds."""
        self._renewal.start(self.keep_locks())

    async def stop(self) -> None:
        """The consumer closes: no batch starts again, the lock renewal and the local retries end."""
        await super().stop()
        await self._renewal.stop()

    # ------------------------------------------------------------------------------------------ locks
    def holds(self, mq: MessageQueue) -> bool:
        """True while this client's lock on ``mq`` counts."""
        at = self._locked.get(mq)
        return at is not None and time.monotonic() - at < LOCK_VALID

    def locked_at_ms(self, mq: MessageQueue) -> int:
        """When the broker last confirmed this client's lock on ``mq``, milliseconds since 1970 (0: never)."""
        at = self._confirmed.get(mq)
        return 0 if at is None else int((time.time() - (time.monotonic() - at)) * 1000)

    async def lock(self, queues: list[MessageQueue]) -> set[MessageQueue]:
        """LOCK_BATCH_MQ on each queue's master; the queues held now (the others stop consuming)."""
        by_broker: dict[str, list[MessageQueue]] = {}
        for mq in queues:
            by_broker.setdefault(mq.broker_name, []).append(mq)
        held: set[MessageQueue] = set()
        group = self.group
        for broker, mqs in by_broker.items():
            addr = self.inst.broker_addr(broker, master_only=True)
            if addr is None:
                continue
            try:
                conn = await self.inst.conn(addr)
                ok = await api.lock_batch_mq(conn, group, self.inst.client_id, [m.to_json() for m in mqs],
                                             self.inst.config.request_timeout)  # fmt: skip
            except Exception as e:
                log.warning("locking queues of group %s on %s failed: %s", group, broker, e)
                continue
            got = {(q.get("topic"), q.get("queueId")) for q in ok}
            held.update(m for m in mqs if (m.topic, m.queue_id) in got)
        now = time.monotonic()
        for mq in queues:
            if mq in held:
                self._locked[mq] = self._confirmed[mq] = now
            elif self._locked.pop(mq, None) is not None:
                log.warning("group %s lost the lock of %s: its consumption pauses", group, mq)
        return held

    async def unlock(self, mq: MessageQueue) -> None:
        """UNLOCK_BATCH_MQ for ``mq`` (after its last batch here finished)."""
        self._locked.pop(mq, None)
        addr = self.inst.broker_addr(mq.broker_name, master_only=True)
        if addr is None:
            return
        try:
            conn = await self.inst.conn(addr)
            await api.unlock_batch_mq(conn, self.group, self.inst.client_id, [mq.to_json()],
                                      self.inst.config.request_timeout)  # fmt: skip
        except Exception as e:
            log.warning("unlocking %s failed (the broker frees it within 60 s): %s", mq, e)

    async def keep_locks(self) -> None:
        """Renew the locks of the owned queues every ``LOCK_INTERVAL`` seconds (a background task)."""
        while True:
            await asyncio.sleep(LOCK_INTERVAL)
            with contextlib.suppress(Exception):
                await self.lock(sorted(self.owned_queues()))

    async def release(self, mq: MessageQueue, timeout: float = 5.0) -> None:
        """A rebalance took ``mq`` away: let its running batch finish (up to ``timeout``), forget what waits."""
        lane = self._lanes.pop(mq, None)
        if lane is None:
            return
        lane.msgs.clear()
        if lane.task is not None and lane.busy:
            with contextlib.suppress(TimeoutError, asyncio.CancelledError, Exception):
                await asyncio.wait_for(asyncio.shield(lane.task), timeout)

    # ------------------------------------------------------------------------------------------ consuming
    def dispatch(self, mq: MessageQueue, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        """Queue freshly pulled messages of ``mq`` behind those waiting; one task consumes them in order."""
        if not msgs:
            return
        lane = self._lanes.setdefault(mq, _Lane())
        lane.msgs.extend(msgs)
        if lane.task is None or lane.task.done():
            lane.task = spawn(self._run(mq, pq, lane), self.consume_tasks, "consume-orderly")

    async def _run(self, mq: MessageQueue, pq: ProcessQueue, lane: _Lane) -> None:
        size = self.options.consume_batch_size
        while lane.msgs and not pq.dropped and self.state == "running":
            if not self.holds(mq):
                await asyncio.sleep(_WAIT_FOR_LOCK)
                continue
            batch = [lane.msgs[i] for i in range(min(size, len(lane.msgs)))]
            lane.busy = True
            try:
                done = await self._consume_in_place(mq, pq, batch)
            finally:
                lane.busy = False
            if not done or pq.dropped:
                continue
            for _ in batch:
                lane.msgs.popleft()
            offset = pq.complete(m.queue_offset for m in batch)
            self.offsets.update(mq, offset, increase_only=True)

    async def _consume_in_place(self, mq: MessageQueue, pq: ProcessQueue, batch: list[MessageExt]) -> bool:
        """One try of ``batch``; True when the queue may move past it (consumed, or dead-lettered)."""
        now = str(int(time.time() * 1000))
        for m in batch:
            if is_retry_topic(mq.topic):
                restore_retry_topic(m, self.group)
            m.properties[PropertyKey.CONSUME_START_TIME] = now
        async with self.sem:
            status = await self.call_listener(batch)
        if status is ConsumeResult.SUCCESS or pq.dropped:
            return status is ConsumeResult.SUCCESS
        if all(m.reconsume_times >= self.options.max_reconsume_times for m in batch):
            sent = [await self._dead_letter(m) for m in batch]
            if all(sent):
                return True
        else:
            for m in batch:
                m.reconsume_times += 1
        await asyncio.sleep(self.options.suspend)
        return False

    async def _dead_letter(self, msg: MessageExt) -> bool:
        """Send ``msg`` through the retry topic with its reconsume count at the limit: the broker puts it in the
        group's DLQ (RocketMQ's orderly consumers do the same)."""
        out = self.retry_outgoing(msg, msg.reconsume_times, None)
        try:
            await self.inner.send_outgoing(out)
        except Exception as e:
            log.warning("dead-lettering %s failed: %s; it is consumed again", msg.msg_id, e)
            return False
        log.warning("message %s failed %d times: sent to %%DLQ%%%s", msg.msg_id, msg.reconsume_times, self.group)
        return True
