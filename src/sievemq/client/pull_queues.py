"""The queues a pull consumer fetches, and the buffer ``poll()`` reads.

Each queue has a position (the next offset ``poll()`` hands out), a fetch offset (the next one its fetch loop asks
for) and a generation: a seek (or a stop) starts a new generation, and what a loop of an older one fetched is
dropped. A fetch loop pauses while the buffer holds ``max_cached_messages`` of its queue's messages; ``poll()``
takes buffered messages in arrival order and moves each queue's position past what it hands out, and past offsets
with nothing to hand out once the buffer holds none of the queue's messages. ``infos()`` describes each queue for
GET_CONSUMER_RUNNING_INFO.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from sievemq.client.errors import ClientStateError
from sievemq.client.instance import ClientInstance
from sievemq.client.message import MessageQueue
from sievemq.client.process_queue import now_ms
from sievemq.client.queue_puller import PullSettings, QueuePuller, fetch_for
from sievemq.client.subscription import SubscriptionEntry
from sievemq.protocol.message import MessageExt
from sievemq.protocol.running_info import ProcessQueueInfo
from sievemq.util.tasks import cancel_and_wait

log = logging.getLogger("sievemq.client.pull_consumer")  # the consumer's records, as before the split


class FetchSettings(PullSettings, Protocol):
    """How a pull consumer fetches (a ``PullConsumer``): its pulls, and how many messages of a queue the buffer
    holds at most (read when a queue's fetch loop starts)."""

    @property
    def max_cached_messages(self) -> int:
        """Buffered messages of one queue at which its fetch loop pauses."""
        ...


@dataclass
class QueueState:
    """One fetched queue."""

    mq: MessageQueue
    position: int
    """Next offset poll() hands out."""
    fetch_offset: int
    """Next offset the pull loop asks for."""
    generation: int = 0
    buffered: int = 0
    task: asyncio.Task[None] | None = None
    entry: SubscriptionEntry | None = None
    moved_back: int | None = None
    """The offset a pull answer moved this queue back to (PULL_OFFSET_MOVED), until a seek."""
    last_pull_ms: int = field(default_factory=now_ms)
    """When a pull of the queue was last answered."""
    last_consume_ms: int = field(default_factory=now_ms)
    """When ``poll()`` last handed out messages of the queue."""


@dataclass
class _Batch:
    mq: MessageQueue
    generation: int
    msgs: list[MessageExt] = field(default_factory=list)


class _Buffer:
    """Fetched batches waiting for ``poll()``, in arrival order, and the event ``poll()`` waits on."""

    def __init__(self) -> None:
        self.batches: deque[_Batch] = deque()
        self.event = asyncio.Event()

    def add(self, batch: _Batch) -> None:
        """A fetch loop's batch (wakes a waiting ``poll()``)."""
        self.batches.append(batch)
        self.event.set()

    def clear(self) -> None:
        """Drop every batch."""
        self.batches.clear()

    async def wait(self, timeout: float) -> None:
        """Until a batch arrives or ``timeout`` seconds pass."""
        self.event.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self.event.wait()

    def take(self, queues: dict[MessageQueue, QueueState], limit: int) -> list[MessageExt]:
        """Up to ``limit`` messages in queue order (batches of dropped or re-sought queues are skipped); each
        queue's position moves past what it hands out."""
        out: list[MessageExt] = []
        while self.batches and len(out) < limit:
            batch = self.batches[0]
            st = queues.get(batch.mq)
            if st is None or st.generation != batch.generation:
                self.batches.popleft()
                continue
            room = limit - len(out)
            part, rest = batch.msgs[:room], batch.msgs[room:]
            if rest:
                batch.msgs = rest
            else:
                self.batches.popleft()
            st.buffered -= len(part)
            st.last_consume_ms = now_ms()
            st.position = part[-1].queue_offset + 1
            if not rest and st.buffered == 0:
                st.position = max(st.position, st.fetch_offset)
            out.extend(part)
        return out


class PullQueues:
    """The queues the pull consumer of ``group`` fetches (with ``settings``) and the buffer ``poll()`` reads;
    ``running()`` is False once the consumer closes."""

    def __init__(self, group: str, settings: FetchSettings, running: Callable[[], bool]) -> None:
        self.group = group
        self.settings = settings
        self.running = running
        self.states: dict[MessageQueue, QueueState] = {}
        self.ready = _Buffer()

    def state(self, mq: MessageQueue) -> QueueState:
        """The state of a fetched queue; ClientStateError for another."""
        st = self.states.get(mq)
        if st is None:
            raise ClientStateError(f"{mq} is not assigned to this consumer")
        return st

    def add(self, inst: ClientInstance, mq: MessageQueue, offset: int, entry: SubscriptionEntry) -> None:
        """Fetch ``mq`` from ``offset`` with the subscription ``entry``."""
        st = QueueState(mq, offset, offset, entry=entry)
        self.states[mq] = st
        self._start(inst, st)

    async def remove(self, mq: MessageQueue) -> QueueState | None:
        """Stop fetching ``mq``; its last state (None when it was not fetched)."""
        st = self.states.pop(mq, None)
        if st is not None:
            await self._stop(st)
        return st

    async def remove_all(self) -> None:
        """Stop fetching every queue; the buffer is emptied."""
        for st in list(self.states.values()):
            await self._stop(st)
        self.states.clear()
        self.ready.clear()

    def seek(self, mq: MessageQueue, offset: int, inst: ClientInstance | None) -> None:
        """Hand out ``mq``'s messages from ``offset`` next (buffered ones are discarded); its fetch loop starts over
        there through ``inst`` (None: the consumer is not running, no loop starts)."""
        st = self.state(mq)
        if offset < 0:
            raise ValueError("offset must be >= 0")
        st.generation += 1
        st.moved_back = None
        if st.task is not None:
            st.task.cancel()
        st.position = st.fetch_offset = offset
        st.buffered = 0
        if inst is not None:
            self._start(inst, st)

    async def poll(self, timeout: float, limit: int) -> list[MessageExt]:
        """Up to ``limit`` buffered messages (waiting up to ``timeout`` seconds for some); positions move past them."""
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            out = self.ready.take(self.states, limit)
            if out:
                return out
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return []
            await self.ready.wait(remaining)

    def infos(self, commit_offset: Callable[[MessageQueue], int]) -> dict[MessageQueue, ProcessQueueInfo]:
        """Each fetched queue as GET_CONSUMER_RUNNING_INFO reports it: ``commit_offset(mq)`` (the offset store's), and
        the messages buffered for ``poll()``."""
        buffered: dict[MessageQueue, list[MessageExt]] = {}
        for batch in self.ready.batches:
            st = self.states.get(batch.mq)
            if st is not None and st.generation == batch.generation:
                buffered.setdefault(batch.mq, []).extend(batch.msgs)
        out: dict[MessageQueue, ProcessQueueInfo] = {}
        for mq, st in self.states.items():
            msgs = buffered.get(mq, [])
            out[mq] = ProcessQueueInfo(
                commit_offset=commit_offset(mq),
                cached_min_offset=msgs[0].queue_offset if msgs else 0,
                cached_max_offset=msgs[-1].queue_offset if msgs else 0,
                cached_count=len(msgs),
                cached_size_mib=sum(len(m.body) for m in msgs) // (1024 * 1024),
                last_pull_ms=st.last_pull_ms,
                last_consume_ms=st.last_consume_ms,
            )
        return out

    def _start(self, inst: ClientInstance, st: QueueState) -> None:
        assert st.entry is not None
        target = _Fetching(st, st.generation, self.ready, self.running, self.settings.max_cached_messages)
        puller = QueuePuller(inst, st.mq, target, fetch_for(inst, st.mq, self.group, self.settings), logger=log)
        st.task = asyncio.get_running_loop().create_task(puller.run(), name=f"fetch {st.mq}")

    async def _stop(self, st: QueueState) -> None:
        st.generation += 1
        task, st.task = st.task, None
        await cancel_and_wait(task)


class _Fetching:
    """One queue's fetch loop (one ``generation`` of it) as its ``QueuePuller`` sees it: messages go to ``buffer``,
    which ``poll()`` reads; the position moves past offsets with nothing to hand out once the buffer holds none of
    them; no pull while the buffer holds ``max_cached`` of the queue's messages."""

    def __init__(
        self, st: QueueState, generation: int, buffer: _Buffer, running: Callable[[], bool], max_cached: int
    ) -> None:
        self.st = st
        self.generation = generation
        self.buffer = buffer
        self._running = running
        self.max_cached = max_cached

    def running(self) -> bool:
        return self._running()

    def dropped(self) -> bool:
        return self.st.generation != self.generation

    def subscription(self) -> SubscriptionEntry | None:
        return self.st.entry

    def next_offset(self) -> int:
        return self.st.fetch_offset

    def flow_controlled(self) -> bool:
        return self.st.buffered >= self.max_cached

    def commit_offset(self) -> int | None:
        return None  # positions are committed by commit() (or auto_commit), never on pulls

    def on_messages(self, kept: list[MessageExt], next_offset: int) -> None:
        st = self.st
        st.last_pull_ms = now_ms()
        st.fetch_offset = next_offset
        if kept:
            st.buffered += len(kept)
            self.buffer.add(_Batch(st.mq, self.generation, kept))
        elif st.buffered == 0:
            st.position = max(st.position, st.fetch_offset)

    def on_advance(self, next_offset: int) -> None:
        st = self.st
        st.last_pull_ms = now_ms()
        st.fetch_offset = next_offset
        if st.buffered == 0:
            st.position = st.fetch_offset

    async def on_offset_moved(self, next_offset: int) -> None:
        if next_offset < self.st.fetch_offset:
            self.st.moved_back = next_offset
        self.on_advance(next_offset)
