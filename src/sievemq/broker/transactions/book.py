"""What the broker knows of its open transactions, and what it should do next (docs/transactions.md §3). Pure.

The book holds the half messages not yet committed or rolled back (``PendingHalf``), the ones resolved above the
*floor* (the lowest half offset still open; everything below it is settled), and per half the number of checks
sent. ``due(now)`` decides: a half older than its immunity (``transactionTimeout``, or its own
``CHECK_IMMUNITY_TIME_IN_SECONDS``) is checked, then again every ``transactionCheckInterval``; one checked
``transactionCheckMax`` times is rolled back (expired). The service (``service.py``) does what it decides and
writes an op record for each step, from which ``note_op`` rebuilds the book after a restart.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from sievemq.broker.transactions.records import OpRecord

__all__ = ["Check", "CheckSettings", "Expire", "PendingHalf", "TransactionBook"]


@dataclass(frozen=True, slots=True)
class CheckSettings:
    """RocketMQ's names and defaults."""

    timeout_ms: int = 6_000
    """``transactionTimeout``: a half younger than this is not checked."""
    check_max: int = 15
    """``transactionCheckMax``: checks before the broker rolls the half back."""
    interval_ms: int = 60_000
    """``transactionCheckInterval``: time between two checks of one half."""
    open_max: int = 1_000_000
    """``transactionOpenMax``: open transactions at most (a half message beyond is refused)."""


@dataclass(slots=True)
class PendingHalf:
    """An open transaction: its half message and its checks so far."""

    offset: int
    """Queue offset in the half topic (the producer's ``tranStateTableOffset``)."""
    phy: int
    """Commit-log offset of the half record."""
    group: str
    """Producer group (``PGROUP``): whom to ask."""
    stored_ms: int
    immune_ms: int
    checks: int = 0
    next_check_ms: int = 0


@dataclass(frozen=True, slots=True)
class Check:
    """Ask a producer of ``half.group`` for the state of ``half``."""

    half: PendingHalf


@dataclass(frozen=True, slots=True)
class Expire:
    """Roll ``half`` back: it was checked ``check_max`` times without an answer."""

    half: PendingHalf


class TransactionBook:
    """Open and recently resolved transactions (see the module docstring)."""

    def __init__(self, settings: CheckSettings, half_floor: int = 0, op_floor: int = 0) -> None:
        self.settings = settings
        self.half_floor = half_floor
        """Every half below this offset is resolved."""
        self.pending: dict[int, PendingHalf] = {}
        self._resolved: set[int] = set()
        self._checks: dict[int, int] = {}  # counts of checks of halves not (yet) added
        self._first_op: dict[int, int] = {}  # half offset -> lowest op offset naming it, for halves >= floor
        self._held: set[int] = set()  # settled halves the floor may not pass yet (a commit record still owed)
        self._schedule: list[tuple[int, int]] = []  # heap of (next_check_ms, half offset); stale entries skipped
        self.op_end = op_floor
        """One past the last op offset seen."""

    # ------------------------------------------------------------------------------------------ facts
    def add_half(self, offset: int, phy: int, group: str, stored_ms: int, immunity_s: int | None) -> None:
        """A half message stored (or found at a restart); ignored when already resolved."""
        if self.is_resolved(offset) or offset in self.pending:
            return
        immune = self.settings.timeout_ms if immunity_s is None or immunity_s < 0 else immunity_s * 1000
        checks = self._checks.pop(offset, 0)
        due = stored_ms + immune
        if checks:
            due = max(due, stored_ms + immune + checks * self.settings.interval_ms)
        self.pending[offset] = PendingHalf(offset, phy, group, stored_ms, immune, checks, due)
        heapq.heappush(self._schedule, (due, offset))

    def note_op(self, op_offset: int, op: OpRecord, *, replay: bool = True) -> None:
        """An op record at ``op_offset``: read back at a restart (``replay``, in op order: a check counts), or
        just written (its effect is applied by ``resolve`` / ``checked``; only its place is noted)."""
        self.op_end = max(self.op_end, op_offset + 1)
        h = op.half_offset
        if h < self.half_floor:
            return
        self._first_op.setdefault(h, op_offset)
        if not replay:
            return
        if op.kind.resolves:
            self.resolve(h)
            return
        pending = self.pending.get(h)
        if pending is not None:
            self.checked(h, pending.stored_ms + pending.immune_ms + pending.checks * self.settings.interval_ms)
        elif not self.is_resolved(h):
            self._checks[h] = self._checks.get(h, 0) + 1

    def is_resolved(self, offset: int) -> bool:
        """True once the half at ``offset`` was committed, rolled back or expired."""
        return offset < self.half_floor or offset in self._resolved

    def resolve(self, offset: int) -> None:
        """The half at ``offset`` is settled; the floor moves over settled halves."""
        if self.is_resolved(offset):
            return
        self.pending.pop(offset, None)
        self._checks.pop(offset, None)
        self._resolved.add(offset)
        self._advance()

    def hold(self, offset: int) -> None:
        """Keep the floor below ``offset`` (settled, but its commit record is still to be written: a restart
        must read its op record again)."""
        if offset >= self.half_floor:
            self._held.add(offset)

    def release(self, offset: int) -> None:
        """The commit record of a held half is written: the floor may pass it."""
        self._held.discard(offset)
        self._advance()

    def _advance(self) -> None:
        while self.half_floor in self._resolved and self.half_floor not in self._held:
            self._resolved.discard(self.half_floor)
            self._first_op.pop(self.half_floor, None)
            self.half_floor += 1

    def skip_to(self, offset: int) -> None:
        """Halves below ``offset`` are gone (the store's retention deleted them): settle them."""
        for h in [h for h in self.pending if h < offset]:
            self.resolve(h)
        if offset > self.half_floor:
            for h in [h for h in self._resolved if h < offset]:
                self._resolved.discard(h)
            for h in [h for h in self._first_op if h < offset]:
                del self._first_op[h]
            self._held = {h for h in self._held if h >= offset}
            self.half_floor = offset
        self._advance()

    def checked(self, offset: int, now_ms: int) -> None:
        """A check of the half at ``offset`` was sent at ``now_ms``."""
        pending = self.pending.get(offset)
        if pending is not None:
            pending.checks += 1
            pending.next_check_ms = now_ms + self.settings.interval_ms
            heapq.heappush(self._schedule, (pending.next_check_ms, offset))

    # ------------------------------------------------------------------------------------------ decisions
    def due(self, now_ms: int, limit: int = 1000) -> list[Check | Expire]:
        """What to do now, the longest due first, at most ``limit`` steps (a heap: the cost follows the steps due,
        not the number of open transactions). A step the caller does not carry out is offered again."""
        out: list[Check | Expire] = []
        heap = self._schedule
        while heap and heap[0][0] <= now_ms and len(out) < limit:
            at, offset = heapq.heappop(heap)
            half = self.pending.get(offset)
            if half is None or half.next_check_ms != at:
                continue  # settled, or rescheduled since
            out.append(Expire(half) if half.checks >= self.settings.check_max else Check(half))
        for step in out:
            heapq.heappush(heap, (step.half.next_check_ms, step.half.offset))
        return out

    @property
    def op_floor(self) -> int:
        """Every op record below this offset names a half below ``half_floor`` (no need to read it again)."""
        return min(self._first_op.values(), default=self.op_end)
