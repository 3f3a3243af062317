"""What one client may cost a server, and the decisions that enforce it: pure, no I/O (docs/server-limits.md).

* ``ServerLimits``: the bounds of a ``RemotingServer`` (the broker's come from its settings).
* ``FlowGate``: per connection, which requests start now, which wait, and whether to read from the socket.
* ``PartialFrames``: bytes of unfinished frames, per peer and across all connections of a server, against a share
  and a budget; who is closed when one of them would be exceeded.
* ``PeerSlots``: connections per peer against a per-peer cap; ``evictable``: whom a newcomer may replace at the cap.
* ``screen_step``: whether a large frame's header must be checked before its body is read.
* ``connection_cap``: how many connections the file-descriptor limit leaves room for.

``ServerGuard`` (guard.py) and ``Connection`` (connection.py) do what these decide.
"""

from __future__ import annotations

import sys
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from enum import Enum
from typing import Generic, Protocol, TypeVar

from sievemq.remoting.command import MAX_FRAME_LENGTH

MiB = 1024 * 1024
T = TypeVar("T")


@dataclass(frozen=True)
class ServerLimits:
    """The bounds a RemotingServer keeps, per connection, per peer IP and for all of its connections."""

    max_unsent_bytes: int = 64 * MiB
    """Per connection: stop reading while more than this many bytes of answers wait to be sent."""
    max_requests_in_flight: int = 1024
    """Per connection: requests being served at once (held long-polling pulls count); more wait unread."""
    partial_frame_budget: int = 256 * MiB
    """All connections: bytes of frames not yet complete; past it, the peer holding the most gives way."""
    partial_frame_ip_percent: int = 25
    """One peer IP: percent of ``partial_frame_budget`` its unfinished frames may hold (at least one whole frame)."""
    frame_timeout: float = 30.0
    """Close a connection whose frame is still incomplete this many seconds after its first byte."""
    first_frame_timeout: float = 30.0
    """Close a connection that has not completed a frame this many seconds after it was accepted."""
    idle_timeout: float = 120.0
    """Close a connection that sent nothing for this many seconds and has nothing in flight (0: never)."""
    max_connections: int = 0
    """Connections at most (0: no fixed cap); the file-descriptor limit caps them in any case."""
    max_connections_per_ip: int = 2000
    """Connections from one peer IP (one IPv6 /64) at most (0: no cap)."""
    fd_reserve: int = 128
    """File descriptors kept free for everything but connections (store files, outgoing connections)."""
    warning_interval: float = 10.0
    """Connection warnings: at most one line per peer IP per this many seconds."""
    screen_bytes: int = 64 * 1024
    """With a header screen (ACL on): frames longer than this are checked once their header is in, before their
    body is read; their header may not be longer than this."""

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value < 0 or (value == 0 and f.name not in ZERO_ALLOWED):
                raise ValueError(f"ServerLimits.{f.name} must be > 0 (>= 0 for the caps), not {value!r}")
        if self.partial_frame_ip_percent > 100:
            raise ValueError(
                f"ServerLimits.partial_frame_ip_percent must be <= 100, not {self.partial_frame_ip_percent}"
            )

    @property
    def partial_frame_ip_budget(self) -> int:
        """Bytes of unfinished frames one peer may hold: its percent of the budget, but room for one whole frame."""
        share = self.partial_frame_budget * self.partial_frame_ip_percent // 100
        return max(share, min(self.partial_frame_budget, WHOLE_FRAME))


ZERO_ALLOWED = frozenset(("max_connections", "max_connections_per_ip", "fd_reserve", "idle_timeout"))
"""ServerLimits fields where 0 means "no cap" or "never"."""
WHOLE_FRAME = 4 + MAX_FRAME_LENGTH
"""The bytes of the largest frame, its length word included."""


class FlowGate(Generic[T]):
    """One connection's back-pressure: deciding only (``Connection`` pauses and resumes its transport).

    A request starts when fewer than ``limit`` are in flight, the transport's output is below its high-water
    mark (between ``pause_writing`` and ``resume_writing`` it is not) and no earlier request waits; otherwise it
    waits, in order. Reading should stop while any request waits or none could start, and go on once one could.
    """

    __slots__ = ("_waiting", "in_flight", "limit", "reading", "write_paused")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.in_flight = 0
        self.write_paused = False
        self.reading = True
        """Whether the transport reads, as last decided by ``reading_change``."""
        self._waiting: deque[T] = deque()

    @property
    def waiting(self) -> int:
        """Requests received that have not started."""
        return len(self._waiting)

    def offer(self, item: T) -> bool:
        """True: ``item`` starts now (counted in flight). False: it waits (returned later by ``finished`` or
        ``resume_writing``)."""
        if self._waiting or self.in_flight >= self.limit or self.write_paused:
            self._waiting.append(item)
            return False
        self.in_flight += 1
        return True

    def finished(self) -> list[T] | None:
        """One request is done; returns the waiting ones that start now (counted in flight), or None when reading
        goes on (then nothing waits and nothing changes: the common case, kept cheap)."""
        self.in_flight -= 1
        if self.reading:
            return None
        return self._release()

    def pause_writing(self) -> None:
        """The transport's output went over its high-water mark."""
        self.write_paused = True

    def resume_writing(self) -> list[T]:
        """The output drained below the low-water mark; returns the waiting requests that start now."""
        self.write_paused = False
        return self._release()

    def clear(self) -> None:
        """The connection is gone: drop the waiting requests."""
        self._waiting.clear()

    def _release(self) -> list[T]:
        out = []
        while self._waiting and self.in_flight < self.limit and not self.write_paused:
            out.append(self._waiting.popleft())
            self.in_flight += 1
        return out

    def reading_change(self) -> bool | None:
        """True: resume reading, False: pause it, None: leave it as it is."""
        want = not self._waiting and self.in_flight < self.limit and not self.write_paused
        if want is self.reading:
            return None
        self.reading = want
        return want


class PartialHolder(Protocol):
    """A connection as ``PartialFrames`` sees it."""

    peer_key: str
    """The peer it counts against (``peer_key``)."""
    partial_bytes: int
    """Bytes of its unfinished frame counted in the budget."""
    partial_since: float
    """When the first byte of its unfinished frame arrived (0: none, or its timer is suspended)."""


H = TypeVar("H", bound=PartialHolder)


class Over(Enum):
    """Why ``PartialFrames.hold`` gives a connection up."""

    PEER_SHARE = "peer share"
    """Its peer's unfinished frames went past the peer's share, and it held the most of them."""
    BUDGET = "budget"
    """All unfinished frames went past the budget, and it held the most of the peer holding the most."""


@dataclass(frozen=True, slots=True)
class GivenUp(Generic[H]):
    """A connection ``PartialFrames.hold`` gave up, and why."""

    conn: H
    why: Over
    held: int
    """Bytes its unfinished frame held."""
    peer_held: int
    """Bytes its peer's unfinished frames held, its own included."""


class PartialFrames(Generic[H]):
    """Bytes of unfinished frames held for all connections of a server: at most ``ip_budget`` per peer (all the
    connections of one ``peer_key``) and ``budget`` in all.

    When a connection's frame grows past either, connections are given up until both hold again: first those of
    its own peer past its share, then those of the peer holding the most in all. Within a peer the connection
    holding the most goes first; on a tie, the one that began holding first (so does the peer). The newcomer is
    closed only when it is itself the one holding the most: a client sending one large frame is never closed
    because others hold the budget with stalled ones (docs/server-limits.md §2).
    """

    __slots__ = ("budget", "by_peer", "holders", "ip_budget", "total")

    def __init__(self, budget: int, ip_budget: int | None = None) -> None:
        self.budget = budget
        self.ip_budget = budget if ip_budget is None else ip_budget
        self.total = 0
        self.by_peer: dict[str, int] = {}
        """Bytes held per peer key, only peers holding some; in the order they began holding."""
        self.holders: dict[str, dict[H, None]] = {}
        """The connections holding bytes, per peer key, in the order they began holding."""

    def hold(self, conn: H, held: int, completed: bool, now: float) -> list[GivenUp[H]]:
        """``conn``'s decoder now holds ``held`` bytes after data arrived at ``now`` (``completed``: that data
        finished at least one frame, so what is held began with it). Returns the connections given up (``conn``
        among them, maybe), already released: the caller closes them."""
        key = conn.peer_key
        grew = held - conn.partial_bytes
        if grew:
            self.total += grew
            peer = self.by_peer.get(key, 0) + grew
            if peer:
                self.by_peer[key] = peer
            else:
                self.by_peer.pop(key, None)
        conn.partial_bytes = held
        if not held:
            conn.partial_since = 0.0
            self._forget(conn)
            return []
        if completed or not conn.partial_since:
            conn.partial_since = now
        self.holders.setdefault(key, {})[conn] = None
        if grew <= 0:
            return []
        out: list[GivenUp[H]] = []
        while self.by_peer.get(key, 0) > self.ip_budget:
            out.append(self._give_up(key, Over.PEER_SHARE))
        while self.total > self.budget:
            top = max(self.by_peer, key=self.by_peer.__getitem__)  # the first (oldest) of equals
            out.append(self._give_up(top, Over.BUDGET))
        return out

    def release(self, conn: H) -> None:
        """``conn`` holds nothing any more (it closed, or is being closed)."""
        held = conn.partial_bytes
        if held:
            self.total -= held
            key = conn.peer_key
            peer = self.by_peer.get(key, 0) - held
            if peer > 0:
                self.by_peer[key] = peer
            else:
                self.by_peer.pop(key, None)
        conn.partial_bytes = 0
        conn.partial_since = 0.0
        self._forget(conn)

    def _give_up(self, key: str, why: Over) -> GivenUp[H]:
        holders = self.holders[key]
        victim = max(holders, key=lambda c: c.partial_bytes)  # the first (oldest) of equals
        given = GivenUp(victim, why, victim.partial_bytes, self.by_peer[key])
        self.release(victim)
        return given

    def _forget(self, conn: H) -> None:
        held = self.holders.get(conn.peer_key)
        if held is not None:
            held.pop(conn, None)
            if not held:
                del self.holders[conn.peer_key]


def overdue(conn: PartialHolder, now: float, timeout: float) -> bool:
    """True when ``conn``'s unfinished frame began more than ``timeout`` seconds before ``now``."""
    return bool(conn.partial_since) and now - conn.partial_since > timeout


def connection_cap(configured: int, fd_limit: int | None, open_fds: int | None, own: int, reserve: int) -> int:
    """How many connections a server may hold: ``configured`` (0: no fixed cap) and what the file-descriptor
    limit ``fd_limit`` (None: unlimited) leaves after ``reserve`` and the descriptors open for other uses
    (``open_fds`` in all, None when unknown, less the server's ``own`` connections)."""
    cap = configured if configured > 0 else sys.maxsize
    if fd_limit is not None:
        other = max(0, open_fds - own) if open_fds is not None else 0
        cap = min(cap, max(0, fd_limit - other - reserve))
    return cap


class PeerSlots:
    """Connections per peer key (served ones and those still in a TLS handshake), against ``per_peer`` each
    (0: no cap)."""

    __slots__ = ("counts", "per_peer", "total")

    def __init__(self, per_peer: int) -> None:
        self.per_peer = per_peer
        self.counts: dict[str, int] = {}
        self.total = 0

    def count(self, key: str) -> int:
        """Connections of ``key`` now."""
        return self.counts.get(key, 0)

    def full(self, key: str) -> bool:
        """True when ``key`` holds as many connections as it may."""
        return self.per_peer > 0 and self.counts.get(key, 0) >= self.per_peer

    def take(self, key: str) -> None:
        """One more connection of ``key``."""
        self.counts[key] = self.counts.get(key, 0) + 1
        self.total += 1

    def give_back(self, key: str) -> None:
        """One connection of ``key`` fewer."""
        left = self.counts.get(key, 0) - 1
        if left > 0:
            self.counts[key] = left
        else:
            self.counts.pop(key, None)
        self.total -= 1


class Unproven(Protocol):
    """A connection that has not completed a frame yet, as ``evictable`` sees it."""

    peer_key: str


U = TypeVar("U", bound=Unproven)
EVICTION_SCAN = 64
"""Connections ``evictable`` looks at, at most, per newcomer (the oldest unproven ones)."""


def evictable(
    oldest_first: Iterable[U], counts: Mapping[str, int], newcomer: str, scan: int = EVICTION_SCAN
) -> U | None:
    """At the connection cap: the connection a newcomer of peer ``newcomer`` may take the place of, or None (the
    newcomer is refused). Only a connection that never completed a frame is given up, the oldest first, and only
    for a newcomer whose peer holds fewer connections than the victim's would keep: one peer with many
    connections cannot keep another with few out (docs/server-limits.md §3)."""
    mine = counts.get(newcomer, 0) + 1
    for i, conn in enumerate(oldest_first):
        if i >= scan:
            break
        if counts.get(conn.peer_key, 0) > mine:
            return conn
    return None


class Screen(Enum):
    """What to do with the unfinished frame of a connection whose server screens headers (``screen_step``)."""

    PASS = "pass"
    """Small enough: read it whole, as any frame."""
    WAIT = "wait"
    """Large, and its header is not all in yet."""
    CHECK = "check"
    """Large, and its header is in: check it before reading the body."""
    HEADER_TOO_LONG = "header too long"
    """Large, with a header longer than the server reads before it knows who sends: refuse it."""


def screen_step(length: int, header_length: int, buffered: int, screen_bytes: int) -> Screen:
    """The unfinished frame announces ``length`` (the first word) and ``header_length``; ``buffered`` bytes of it
    are in (the 8-byte prefix included). Frames of at most ``screen_bytes`` in all are not screened."""
    if 4 + length <= screen_bytes:
        return Screen.PASS
    if header_length > screen_bytes:
        return Screen.HEADER_TOO_LONG
    if buffered < 8 + header_length:
        return Screen.WAIT
    return Screen.CHECK
