"""How a long-polling POP that found nothing waits (docs/pop.md §1, §5): for a matching message on its queues (the
broker's ``PullHoldService``), the next lease deadline, and, for an orderly POP, on each locked queue until its lock
ends or an ack, change or dead letter frees it or moves that end (``LeaseWaiters``): the next batch of a FIFO queue
goes out as soon as the previous one is done, not when the poll times out. A lease that falls due sooner than the
wait was to end (a change of invisible time, a 5.x PushConsumer's nack, or a short lease) moves the wait's end to
its deadline (``deadlines``): the message is handed out again then, as RocketMQ's revive wakes long-polling POPs."""

from __future__ import annotations

import asyncio
import time

from sievemq.broker.long_polling import CqMatch, PullHoldService
from sievemq.broker.pop import orderly
from sievemq.broker.pop.book import PopBook, QueueKey

__all__ = ["LeaseWaiters", "wait_for_pop"]


class LeaseWaiters:
    """Futures per (group, topic, queue), woken by ``changed``."""

    def __init__(self) -> None:
        self._waiting: dict[QueueKey, list[asyncio.Future[None]]] = {}

    def watch(self, key: QueueKey) -> asyncio.Future[None]:
        """A future done at the queue's next lease change."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(key, []).append(fut)
        return fut

    def release(self, key: QueueKey, fut: asyncio.Future[None]) -> None:
        """Forget ``fut`` (after it woke or the wait timed out)."""
        futs = self._waiting.get(key)
        if futs is None:
            return
        futs[:] = [f for f in futs if f is not fut]
        if not futs:
            del self._waiting[key]

    def watched(self, key: QueueKey) -> bool:
        """True when a POP waits on the queue."""
        return key in self._waiting

    def changed(self, key: QueueKey) -> None:
        """A lease of the queue ended or changed: wake its waiters."""
        for fut in self._waiting.get(key, ()):
            if not fut.done():
                fut.set_result(None)

    def waiting(self) -> int:
        """How many POPs wait."""
        return sum(len(f) for f in self._waiting.values())


async def wait_for_pop(
    book: PopBook,
    hold: PullHoldService,
    waiters: LeaseWaiters,
    keys: list[QueueKey],
    *,
    match: CqMatch | None,
    order: bool,
    attempt_id: str,
    now: int,
    end: int,
    deadlines: LeaseWaiters | None = None,
) -> None:
    """Wait until a message ``match`` accepts arrives on one of the queues, a lease of them falls due, a locked
    queue (``order``) is freed or its lock moves, or ``end`` (epoch ms). A POP that is not orderly also watches
    ``deadlines``: a lease made due sooner (``PopService`` wakes it) shortens the wait."""
    while await _wait_once(book, hold, waiters, keys, match=match, order=order, attempt_id=attempt_id, now=now,
                           end=end, deadlines=None if order else deadlines):  # fmt: skip
        now = int(time.time() * 1000)
        if now >= end:
            return


async def _wait_once(
    book: PopBook,
    hold: PullHoldService,
    waiters: LeaseWaiters,
    keys: list[QueueKey],
    *,
    match: CqMatch | None,
    order: bool,
    attempt_id: str,
    now: int,
    end: int,
    deadlines: LeaseWaiters | None,
) -> bool:
    """One wait of ``wait_for_pop``; True when only a lease made due sooner ended it (then wait again, to then)."""
    wait_ms = end - now
    held: list[tuple[QueueKey, asyncio.Future[None]]] = []
    watched: list[tuple[QueueKey, asyncio.Future[None]]] = []
    sooner: list[tuple[QueueKey, asyncio.Future[None]]] = []
    for key in keys:
        qs = book.queue(*key)
        if qs is None:
            continue
        until = orderly.locked_until(qs, now, attempt_id) if order else None
        if until is not None:  # new messages cannot go out before the lock ends
            wait_ms = min(wait_ms, until - now + 5)
            watched.append((key, waiters.watch(key)))
            continue
        deadline = qs.next_deadline()
        if deadline is not None:
            wait_ms = min(wait_ms, deadline - now + 5)
        held.append((key, hold.hold(key[1], key[2], qs.cursor, match)))
        if deadlines is not None:
            sooner.append((key, deadlines.watch(key)))
    futures = [f for _, f in held] + [f for _, f in watched] + [f for _, f in sooner]
    try:
        if futures:
            done, _ = await asyncio.wait(futures, timeout=max(0, wait_ms) / 1000.0,
                                         return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
            return bool(done) and done <= {f for _, f in sooner}
        if order:  # no queue state to wait on (none readable): do not spin until ``end``
            await asyncio.sleep(max(0, wait_ms) / 1000.0)
        return False
    finally:
        for key, fut in held:
            hold.release(key[1], key[2], fut)
        for key, fut in watched:
            waiters.release(key, fut)
        for key, fut in sooner:
            assert deadlines is not None
            deadlines.release(key, fut)
