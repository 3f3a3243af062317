"""A chaos workload's history: what producers tried and heard back, what consumers got, which faults were injected
and what the broker sets held at the end. Events are frozen dataclasses stamped with one monotonic clock; a
``History`` appends them from any thread or task and dumps or loads them as JSON lines."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class SendAttempt:
    """A producer is about to send the message with this key (a retry of the same key is another attempt)."""

    key: str
    producer: str
    t: float
    topic: str | None = None


@dataclass(frozen=True)
class SendOk:
    """A send of ``key`` was acknowledged: where the message was stored and by which master, in which epoch."""

    key: str
    t: float
    broker_addr: str
    broker_name: str
    epoch: int | None
    queue_id: int
    queue_offset: int
    msg_id: str


@dataclass(frozen=True)
class SendFailed:
    """A send of ``key`` failed or was refused: ``code`` is the broker's response code, None when there was no
    answer (a timeout, a closed connection). Whether the message may have been stored is the checker's call."""

    key: str
    t: float
    code: int | None
    reason: str


@dataclass(frozen=True)
class Delivered:
    """A consumer of ``group`` got the message with ``key`` from a queue."""

    key: str
    t: float
    group: str
    consumer: str
    broker_name: str
    queue_id: int
    queue_offset: int


@dataclass(frozen=True)
class Fault:
    """A fault the test injected: ``kind`` ("kill-master", "partition", "pause"...), ``target`` (a broker name or a
    broker address, for the checker to relate it to a set), from ``t_start`` to ``t_end`` (None: never healed, or
    instantaneous with nothing brought back)."""

    kind: str
    target: str
    t_start: float
    t_end: float | None = None
    note: str = ""

    @property
    def t(self) -> float:
        """When the fault began."""
        return self.t_start

    def covers(self, t: float) -> bool:
        """Whether the fault was under way at ``t``."""
        return self.t_start <= t and (self.t_end is None or t <= self.t_end)

    def describe(self) -> str:
        """``kind target at t_start`` for reports."""
        return f"{self.kind} {self.target} at t={self.t_start:.3f}"


@dataclass(frozen=True)
class Stored:
    """The final read (after healing) found the message with ``key`` at this position; ``broker_addr`` names the
    replica read when the test reads every broker of a set."""

    key: str
    broker_name: str
    queue_id: int
    queue_offset: int
    broker_addr: str | None = None
    t: float = 0.0


@dataclass(frozen=True)
class FinalRead:
    """The final read is complete for these broker names (empty: every set the history names)."""

    t: float
    broker_names: tuple[str, ...] = ()


Event = SendAttempt | SendOk | SendFailed | Delivered | Fault | Stored | FinalRead

EVENT_TYPES: dict[str, type[Event]] = {
    cls.__name__: cls for cls in (SendAttempt, SendOk, SendFailed, Delivered, Fault, Stored, FinalRead)
}


def event_time(event: Event) -> float:
    """The time an event sorts by (a fault's start)."""
    return event.t


class History:
    """An append-only list of events. Appends take a lock and never await, so producers and consumers on threads
    and on an event loop may record at once. ``t`` defaults to ``clock()`` (monotonic seconds)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._events: list[Event] = []
        self._lock = threading.Lock()

    def add(self, event: Event) -> int:
        """Append an event; its index (``end_fault`` takes a fault's)."""
        with self._lock:
            self._events.append(event)
            return len(self._events) - 1

    def _now(self, t: float | None) -> float:
        return self.clock() if t is None else t

    def send_attempt(self, key: str, producer: str, *, topic: str | None = None, t: float | None = None) -> SendAttempt:
        """Record that ``producer`` is sending ``key``; call it before the send."""
        event = SendAttempt(key, producer, self._now(t), topic)
        self.add(event)
        return event

    def send_ok(
        self,
        key: str,
        *,
        broker_addr: str,
        broker_name: str,
        epoch: int | None,
        queue_id: int,
        queue_offset: int,
        msg_id: str = "",
        t: float | None = None,
    ) -> SendOk:
        """Record an acknowledged send."""
        event = SendOk(key, self._now(t), broker_addr, broker_name, epoch, queue_id, queue_offset, msg_id)
        self.add(event)
        return event

    def send_failed(self, key: str, *, code: int | None, reason: str, t: float | None = None) -> SendFailed:
        """Record a failed or refused send (``code`` None: no answer)."""
        event = SendFailed(key, self._now(t), code, reason)
        self.add(event)
        return event

    def delivered(
        self,
        key: str,
        *,
        group: str,
        consumer: str,
        broker_name: str,
        queue_id: int,
        queue_offset: int,
        t: float | None = None,
    ) -> Delivered:
        """Record a delivery to a consumer of ``group``."""
        event = Delivered(key, self._now(t), group, consumer, broker_name, queue_id, queue_offset)
        self.add(event)
        return event

    def fault(
        self, kind: str, target: str, *, t_start: float | None = None, t_end: float | None = None, note: str = ""
    ) -> Fault:
        """Record a fault whose start (and end, if any) are known."""
        event = Fault(kind, target, self._now(t_start), t_end, note)
        self.add(event)
        return event

    def begin_fault(self, kind: str, target: str, *, note: str = "", t: float | None = None) -> int:
        """Record that a fault starts now; the handle ``end_fault`` takes."""
        return self.add(Fault(kind, target, self._now(t), None, note))

    def end_fault(self, handle: int, *, t: float | None = None) -> Fault:
        """Record that the fault ``begin_fault`` returned ``handle`` for is healed (the target is back)."""
        with self._lock:
            fault = self._events[handle]
            if not isinstance(fault, Fault):
                raise ValueError(f"event {handle} is not a fault: {fault!r}")
            ended = dataclasses.replace(fault, t_end=self._now(t))
            self._events[handle] = ended
            return ended

    @contextmanager
    def faulting(self, kind: str, target: str, *, note: str = "") -> Iterator[None]:
        """A fault lasting the ``with`` block: inject it inside, heal it before leaving."""
        handle = self.begin_fault(kind, target, note=note)
        try:
            yield
        finally:
            self.end_fault(handle)

    def stored(
        self,
        key: str,
        *,
        broker_name: str,
        queue_id: int,
        queue_offset: int,
        broker_addr: str | None = None,
        t: float | None = None,
    ) -> Stored:
        """Record a message the final read found."""
        event = Stored(key, broker_name, queue_id, queue_offset, broker_addr, self._now(t))
        self.add(event)
        return event

    def final_read(self, broker_names: Iterable[str] = (), *, t: float | None = None) -> FinalRead:
        """Record that the final read of these sets (none named: all of them) is complete."""
        event = FinalRead(self._now(t), tuple(broker_names))
        self.add(event)
        return event

    @property
    def events(self) -> list[Event]:
        """A copy of the events so far, in the order recorded."""
        with self._lock:
            return list(self._events)

    def __iter__(self) -> Iterator[Event]:
        return iter(self.events)

    def __len__(self) -> int:
        with self._lock:
            return len(self._events)

    def dump(self, path: str | Path) -> None:
        """Write the events as JSON lines: ``{"type": "SendOk", "key": ..., ...}``."""
        with open(path, "w", encoding="utf-8") as f:
            for event in self.events:
                f.write(json.dumps(to_json(event), separators=(",", ":")) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> History:
        """A history with the events ``dump`` wrote."""
        history = cls()
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    history.add(from_json(json.loads(line)))
        return history


def to_json(event: Event) -> dict[str, Any]:
    """An event as a JSON object, its type under ``type``."""
    return {"type": type(event).__name__, **dataclasses.asdict(event)}


def from_json(obj: dict[str, Any]) -> Event:
    """The event ``to_json`` made."""
    fields = dict(obj)
    name = fields.pop("type")
    cls = EVENT_TYPES.get(name)
    if cls is None:
        raise ValueError(f"unknown event type {name!r}")
    args: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()}
    return cls(**args)
