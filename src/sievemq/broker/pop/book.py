"""The POP state of a broker: per (group, topic, queue) a cursor and the leases of messages handed out
(docs/pop.md §1). Pure: no I/O, no clock (times are arguments).

- The **cursor** is the next queue offset no POP of the group has looked at yet.
- A **lease** is a message handed out and not acked: its token (the receipt handle's), its deadline (epoch ms;
  invisible until then) and its delivery attempt (1 for the first).
- A lease past its deadline is **due**: the next POP of its queue delivers it again (attempt + 1, new token), or,
  after the group's last attempt, the service moves it to the dead-letter topic.
- The **floor** (the lowest leased offset, else the cursor) is what the group has consumed for sure: it is
  committed as the group's consumer offset, so lag and progress read as for a 4.x group.

``apply`` is the only way state changes; every change the service makes is a ``PopRecord`` it first writes to the
POP log, so replaying the log rebuilds this book (``records.py``).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any

from sievemq.broker.pop.records import Kind, PopRecord

__all__ = ["Lease", "PopBook", "QueueKey", "QueueState"]

QueueKey = tuple[str, str, int]
"""(group, topic, queue id)."""


@dataclass(slots=True)
class Lease:
    """A message handed out and not acked yet."""

    token: int
    deadline: int
    attempt: int


@dataclass(slots=True)
class QueueState:
    """One (group, topic, queue)."""

    cursor: int
    leases: dict[int, Lease] = field(default_factory=dict)
    attempt_id: str = ""
    """The attempt id of the orderly POP that leased the latest messages ("" for none): a retry of that POP is
    handed the same messages again (``orderly.py``)."""
    _offsets: list[int] = field(default_factory=list)
    """Heap of leased offsets (lazily cleaned): the floor in O(log n)."""
    _deadlines: list[tuple[int, int, int]] = field(default_factory=list)
    """Heap of (deadline, offset, token) (lazily cleaned): the due leases in deadline order."""

    def put(self, offset: int, lease: Lease) -> None:
        """Lease ``offset`` (replacing a lease it had)."""
        if offset not in self.leases:
            heapq.heappush(self._offsets, offset)
        self.leases[offset] = lease
        heapq.heappush(self._deadlines, (lease.deadline, offset, lease.token))

    def floor(self) -> int:
        """The lowest leased offset, else the cursor."""
        heap = self._offsets
        while heap and heap[0] not in self.leases:
            heapq.heappop(heap)
        return min(heap[0], self.cursor) if heap else self.cursor

    def due(self, now: int, limit: int) -> list[int]:
        """Up to ``limit`` offsets whose lease deadline is at or before ``now``, earliest deadline first."""
        out: list[int] = []
        heap = self._deadlines
        skipped: list[tuple[int, int, int]] = []
        while heap and len(out) < limit and heap[0][0] <= now:
            item = heapq.heappop(heap)
            _, offset, token = item
            lease = self.leases.get(offset)
            if lease is None or lease.token != token:
                continue  # acked, or leased again since: a stale entry
            out.append(offset)
            skipped.append(item)
        for item in skipped:  # still leased until the caller re-leases or buries them
            heapq.heappush(heap, item)
        return out

    def next_deadline(self) -> int | None:
        """The earliest deadline of a live lease, or None."""
        heap = self._deadlines
        while heap:
            _, offset, token = heap[0]
            lease = self.leases.get(offset)
            if lease is not None and lease.token == token:
                return heap[0][0]
            heapq.heappop(heap)
        return None

    def compact(self) -> None:
        """Drop stale heap entries when they outnumber the leases (a long-lived queue's heaps stay small)."""
        if len(self._deadlines) > 2 * len(self.leases) + 64:
            self._deadlines = [(ls.deadline, o, ls.token) for o, ls in self.leases.items()]
            heapq.heapify(self._deadlines)
            self._offsets = list(self.leases)
            heapq.heapify(self._offsets)


class PopBook:
    """All queues' POP state; see the module docstring."""

    def __init__(self) -> None:
        self.queues: dict[QueueKey, QueueState] = {}
        self.last_token = 0
        """The highest token any record holds (new tokens are above it)."""

    # ------------------------------------------------------------------------------------------ reading
    def queue(self, group: str, topic: str, queue_id: int) -> QueueState | None:
        """The queue's state, or None when the group never popped it here."""
        return self.queues.get((group, topic, queue_id))

    def knows_topic(self, group: str, topic: str) -> bool:
        """True once the group popped any queue of ``topic`` here."""
        return any(g == group and t == topic for g, t, _ in self.queues)

    def lease(self, group: str, topic: str, queue_id: int, offset: int, token: int) -> Lease | None:
        """The lease a receipt handle names, when it is still the current one."""
        qs = self.queues.get((group, topic, queue_id))
        lease = qs.leases.get(offset) if qs is not None else None
        return lease if lease is not None and lease.token == token else None

    def leased(self) -> int:
        """How many leases are held in all."""
        return sum(len(qs.leases) for qs in self.queues.values())

    def due(self, now: int, limit: int) -> list[tuple[QueueKey, int]]:
        """Due leases of every queue (up to ``limit``): what a background round delivers or buries."""
        out: list[tuple[QueueKey, int]] = []
        for key, qs in self.queues.items():
            if len(out) >= limit:
                break
            out.extend((key, o) for o in qs.due(now, limit - len(out)))
        return out

    # ------------------------------------------------------------------------------------------ changing
    def new_token(self, at_least: int) -> int:
        """A token above every token handed out (at least ``at_least``: a clock reading keeps tokens unique
        across restarts that lost the log's tail)."""
        self.last_token = max(self.last_token + 1, at_least)
        return self.last_token

    def apply(self, rec: PopRecord) -> None:
        """Apply one record (see ``records.py``: each sets what it names, so a replay is idempotent in order)."""
        if rec.kind is Kind.INIT:
            for qid, cursor in rec.cursors.items():
                key = (rec.group, rec.topic, qid)
                if key not in self.queues:
                    self.queues[key] = QueueState(cursor)
            return
        key = (rec.group, rec.topic, rec.queue_id)
        if rec.kind is Kind.RESET:
            self.queues[key] = QueueState(rec.cursor)
            return
        qs = self.queues.get(key)
        if rec.kind is Kind.LEASE:
            if qs is None:
                qs = self.queues[key] = QueueState(rec.cursor)
            qs.cursor = max(qs.cursor, rec.cursor)
            if rec.entries:
                qs.attempt_id = rec.attempt_id
            for offset, token, attempt in rec.entries:
                qs.put(offset, Lease(token, rec.deadline, attempt))
                self.last_token = max(self.last_token, token)
            return
        if qs is None:
            return
        lease = qs.leases.get(rec.offset)
        if lease is None or lease.token != rec.token:
            return
        if rec.kind is Kind.CHANGE:
            qs.put(rec.offset, Lease(rec.new_token, rec.deadline, lease.attempt))
            self.last_token = max(self.last_token, rec.new_token)
        else:  # ACK, DEAD
            del qs.leases[rec.offset]
        qs.compact()

    def forget_group(self, group: str) -> bool:
        """A deleted group's queues go; True if it had any."""
        keys = [k for k in self.queues if k[0] == group]
        for key in keys:
            del self.queues[key]
        return bool(keys)

    def forget_topic(self, topic: str) -> None:
        """A deleted topic's queues go."""
        for key in [k for k in self.queues if k[1] == topic]:
            del self.queues[key]

    # ------------------------------------------------------------------------------------------ snapshots
    def snapshot(self) -> dict[str, Any]:
        """The book as a JSON-ready document (``from_snapshot`` reads it back)."""
        queues = []
        for (g, t, q), qs in self.queues.items():
            item = {"g": g, "t": t, "q": q, "c": qs.cursor,
                    "l": [[o, ls.token, ls.deadline, ls.attempt] for o, ls in sorted(qs.leases.items())]}  # fmt: skip
            if qs.attempt_id:
                item["a"] = qs.attempt_id
            queues.append(item)
        return {"lastToken": self.last_token, "queues": queues}

    @classmethod
    def from_snapshot(cls, doc: dict[str, Any]) -> PopBook:
        """The book a snapshot holds (ValueError / KeyError / TypeError when it is not one)."""
        book = cls()
        book.last_token = int(doc.get("lastToken", 0))
        for item in doc.get("queues", []):
            qs = QueueState(int(item["c"]), attempt_id=str(item.get("a", "")))
            for o, token, deadline, attempt in item["l"]:
                qs.put(int(o), Lease(int(token), int(deadline), int(attempt)))
            book.queues[(str(item["g"]), str(item["t"]), int(item["q"]))] = qs
        return book
