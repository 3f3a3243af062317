"""The queues a started push consumer processes: each one's ProcessQueue and pull loop (a ``QueuePuller``).

A queue is taken (a rebalance gave it to the client) from its committed offset, or where ``consume_from`` says for a
queue new to the group; an orderly consumer takes it only once the broker's lock on it is ours. A queue dropped (a
rebalance took it away) stops pulling, its offset is persisted and forgotten, and an orderly consumer unlocks it
after its running batch. A broker's offset reset (RESET_CONSUMER_CLIENT_OFFSET, docs/admin.md §4) restarts the
queue's pull loop from the new offset, dropping what was fetched and not consumed. ``infos()`` describes each queue
for GET_CONSUMER_RUNNING_INFO (``client/running_info.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from sievemq.client.consume_service import ConsumeService
from sievemq.client.filter_functions import FunctionFilters
from sievemq.client.instance import ClientInstance
from sievemq.client.message import MessageQueue
from sievemq.client.offset_store import OffsetStore
from sievemq.client.orderly import OrderlyConsumeService
from sievemq.client.process_queue import ProcessQueue, now_ms
from sievemq.client.queue_puller import QueuePuller, fetch_for
from sievemq.client.running_info import PulledCounter
from sievemq.client.start_position import StartPosition, first_offset
from sievemq.client.subscription import SubscriptionEntry
from sievemq.protocol.message import MessageExt
from sievemq.protocol.running_info import ProcessQueueInfo
from sievemq.util.tasks import cancel_and_wait

log = logging.getLogger("sievemq.client.push_consumer")  # the consumer's records, as before the split


class PushQueues:
    """The owned queues of the push consumer of ``group`` (in client instance ``inst``): their messages go to
    ``service``, their offsets to ``offsets``; ``start`` says where a queue without a committed offset starts;
    ``subscription(topic)`` is the consumer's subscription of a topic now, ``functions()`` its filter functions;
    ``running()`` is False once the consumer closes."""

    def __init__(
        self,
        inst: ClientInstance,
        group: str,
        service: ConsumeService,
        offsets: OffsetStore,
        start: StartPosition,
        *,
        subscription: Callable[[str], SubscriptionEntry | None],
        functions: Callable[[], FunctionFilters | None],
        running: Callable[[], bool],
    ) -> None:
        self.inst = inst
        self.group = group
        self.service = service
        self.orderly = service if isinstance(service, OrderlyConsumeService) else None
        self.offsets = offsets
        self.start = start
        self.subscription = subscription
        self.functions = functions
        self.running = running
        self.pqs: dict[MessageQueue, ProcessQueue] = {}
        self.tasks: dict[MessageQueue, asyncio.Task[None]] = {}
        """The pull loop of each queue."""
        self.moved_back: dict[MessageQueue, tuple[ProcessQueue, int]] = {}
        """Queues a pull answer moved back (PULL_OFFSET_MOVED): the queue's process queue then, and the offset."""
        self.pulled = PulledCounter()
        """Messages the pulls brought, per topic (``ConsumeStatus.pullTPS``)."""

    async def take(self, mq: MessageQueue) -> bool:
        """Start pulling ``mq`` from its committed offset (or per ``consume_from``); False: try again next round."""
        if self.orderly is not None and mq not in await self.orderly.lock([mq]):
            return False  # another client still holds it: the next round tries again
        offset = await first_offset(self.inst, self.offsets, mq, self.start, log)
        if offset is None:
            return False
        if not self.running() or mq in self.pqs:
            return True
        self._start_pulling(mq, offset)
        return True

    async def drop(self, mq: MessageQueue) -> None:
        """Stop processing ``mq``; persist and forget its offset (a local store writes its file)."""
        pq = self.pqs.pop(mq, None)
        task = self.tasks.pop(mq, None)
        self.moved_back.pop(mq, None)
        if pq is not None:
            pq.dropped = True
        await cancel_and_wait(task)
        if self.orderly is not None:
            await self.orderly.release(mq)  # its running batch ends first: its offset counts
        if not self.service.broadcasting:
            try:
                await self.offsets.persist(mq, oneway=False)
            except Exception as e:
                log.warning("persisting the offset of released queue %s failed: %s", mq, e)
        else:
            await self.offsets.persist_all([mq])
        self.offsets.remove(mq)
        if self.orderly is not None:
            await self.orderly.unlock(mq)  # the next holder starts after what was consumed here

    async def release_all(self) -> None:
        """The consumer closes (its pull loops were stopped): persist every queue's offset, unlock the queues of an
        orderly consumer, forget them all."""
        for pq in self.pqs.values():
            pq.dropped = True
        await self.offsets.persist_all(list(self.pqs), oneway=False)
        if self.orderly is not None:
            for mq in list(self.pqs):
                await self.orderly.unlock(mq)
        self.pqs.clear()
        self.tasks.clear()

    async def reset(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        """A broker reset the group's offsets of ``topic``: each owned queue starts over from its new offset."""
        for mq, offset in sorted(offsets.items()):
            pq = self.pqs.get(mq)
            if mq.topic != topic or pq is None or not self.running():
                continue
            moved = self.moved_back.get(mq)
            if moved is not None and moved[0] is pq and moved[1] == offset:
                continue  # a sievemq broker's pull answer told this queue first (docs/admin.md §4): it moved already
            pq.dropped = True
            await cancel_and_wait(self.tasks.pop(mq, None))
            if self.orderly is not None:
                await self.orderly.release(mq)  # its running batch ends first (and commits nothing)
            if self.pqs.get(mq) is not pq or not self.running():
                continue  # released meanwhile (a rebalance)
            log.info("group %s: offset of %s reset to %d by the broker", self.group, mq, offset)
            self._start_pulling(mq, offset)

    def infos(self) -> dict[MessageQueue, ProcessQueueInfo]:
        """Each owned queue as GET_CONSUMER_RUNNING_INFO reports it: the offset held in memory, the messages waiting
        for (or in) the listener, and for an orderly consumer whether the broker's lock on it is ours."""
        out: dict[MessageQueue, ProcessQueueInfo] = {}
        for mq, pq in self.pqs.items():
            commit = self.offsets.read_memory(mq)
            if self.orderly is None:
                out[mq] = pq.info(commit)
            else:
                out[mq] = pq.info(commit, locked=self.orderly.holds(mq), last_lock_ms=self.orderly.locked_at_ms(mq))
        return out

    def _start_pulling(self, mq: MessageQueue, offset: int) -> None:
        pq = ProcessQueue(offset)
        self.offsets.update(mq, offset)
        self.pqs[mq] = pq
        fetch = fetch_for(self.inst, mq, self.group, self.service.options, self.functions)
        target = _PushQueue(mq, pq, self.offsets, self.service, self.subscription, self.moved_back, self.pulled)
        puller = QueuePuller(self.inst, mq, target, fetch, logger=log)
        self.tasks[mq] = asyncio.get_running_loop().create_task(puller.run(), name=f"pull {mq}")


class _PushQueue:
    """One queue of a push consumer as its ``QueuePuller`` sees it: messages go to the consume service, offsets to the
    offset store (the committable offset rides on pulls to the master); ``subscription(topic)`` is the consumer's
    subscription of a topic now; a pull answer that moves the queue back is noted in ``moved_back``; the messages
    pulled are counted in ``pulled``."""

    def __init__(
        self,
        mq: MessageQueue,
        pq: ProcessQueue,
        offsets: OffsetStore,
        service: ConsumeService,
        subscription: Callable[[str], SubscriptionEntry | None],
        moved_back: dict[MessageQueue, tuple[ProcessQueue, int]],
        pulled: PulledCounter,
    ) -> None:
        self.mq = mq
        self.pq = pq
        self.offsets = offsets
        self.service = service
        self._subscription = subscription
        self.moved_back = moved_back
        self.pulled = pulled

    def running(self) -> bool:
        return self.service.state == "running"

    def dropped(self) -> bool:
        return self.pq.dropped

    def subscription(self) -> SubscriptionEntry | None:
        return self._subscription(self.mq.topic)

    def next_offset(self) -> int:
        return self.pq.next_offset

    def flow_controlled(self) -> bool:
        o = self.service.options
        return self.pq.over_limits(o.max_cached_messages, o.max_cached_bytes, o.max_span)

    def commit_offset(self) -> int | None:
        commit = self.offsets.read_memory(self.mq) if not self.service.broadcasting else -1
        return commit if commit > 0 else None

    def on_messages(self, kept: list[MessageExt], next_offset: int) -> None:
        self.pq.last_pull_ms = now_ms()
        fresh = self.pq.add(kept, next_offset)
        self.pulled.add(self.mq.topic, len(fresh))
        if not fresh:
            self.offsets.update(self.mq, self.pq.commit_offset, increase_only=True)
        self.service.dispatch(self.mq, self.pq, fresh)

    def on_advance(self, next_offset: int) -> None:
        self.pq.last_pull_ms = now_ms()
        self.pq.advance(next_offset)
        self.offsets.update(self.mq, self.pq.commit_offset, increase_only=True)

    async def on_offset_moved(self, next_offset: int) -> None:
        self.pq.last_pull_ms = now_ms()
        if next_offset < self.pq.next_offset:  # moved back (an operator's reset): what is in flight no longer counts
            self.pq.reset(next_offset)
            self.moved_back[self.mq] = (self.pq, next_offset)
        else:
            self.pq.advance(next_offset)
        self.offsets.update(self.mq, next_offset)
        with contextlib.suppress(Exception):
            await self.offsets.persist(self.mq, oneway=True)
