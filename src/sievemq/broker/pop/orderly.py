"""Orderly POP (docs/pop.md §5): what a POP with ``order`` may hand out of one queue. Pure: no I/O, no clock.

A FIFO consumer group must see the messages of a queue one batch at a time, in queue order:

- While any message the queue handed out is still leased and not due (its invisible time has not run out), the
  queue is **locked**: an orderly POP hands out nothing from it. The lock ends when every such message is acked
  (or dead-lettered), or when the last of their deadlines passes.
- When it is not locked, the leased messages come first, in queue order, each as its own next delivery (attempt +
  1 when its lease ran out); one whose last attempt ran out goes to the dead-letter topic instead and the queue
  moves on. New messages follow only when every leased message is in the batch, so nothing overtakes a message
  that is still to be consumed.
- A retry of the POP that leased the queue's latest messages (the same non-empty attempt id, e.g. a receive whose
  answer was lost) is not locked out: it is handed those messages again, their attempt unchanged.

``plan`` decides; ``broker/pop/service.py`` does (reads the messages, writes the lease and dead records).
"""

from __future__ import annotations

from dataclasses import dataclass

from sievemq.broker.pop.book import QueueState

__all__ = ["OrderlyPlan", "locked_until", "plan"]


def locked_until(qs: QueueState, now: int, attempt_id: str = "") -> int | None:
    """When the queue's lock ends if nothing is acked (the latest deadline of its leases), or None when an orderly
    POP with ``attempt_id`` may take from it at ``now``."""
    if attempt_id and attempt_id == qs.attempt_id:
        return None
    latest = max((ls.deadline for ls in qs.leases.values()), default=now)
    return latest if latest > now else None


@dataclass(frozen=True, slots=True)
class OrderlyPlan:
    """What one orderly POP of one queue does."""

    locked_until: int | None
    """Not None: the queue is locked (nothing else in the plan); when the lock ends unless acks end it sooner."""
    bury: tuple[int, ...] = ()
    """Offsets whose last attempt ran out: to the dead-letter topic first."""
    again: tuple[tuple[int, int], ...] = ()
    """(offset, attempt of this delivery) of leased messages handed out again, in queue order."""
    complete: bool = True
    """Every leased message not buried is in ``again``: new messages may follow."""


def plan(qs: QueueState, now: int, max_nums: int, max_attempts: int, attempt_id: str = "") -> OrderlyPlan:
    """The orderly POP of up to ``max_nums`` messages of the queue at ``now``; a message is dead-lettered after
    ``max_attempts`` deliveries."""
    until = locked_until(qs, now, attempt_id)
    if until is not None:
        return OrderlyPlan(until)
    bury: list[int] = []
    again: list[tuple[int, int]] = []
    for offset in sorted(qs.leases):
        lease = qs.leases[offset]
        due = lease.deadline <= now
        if due and lease.attempt >= max_attempts:
            bury.append(offset)
        elif len(again) < max_nums:
            again.append((offset, lease.attempt + 1 if due else lease.attempt))
    complete = len(again) + len(bury) == len(qs.leases)
    return OrderlyPlan(None, tuple(bury), tuple(again), complete)
