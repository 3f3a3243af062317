"""The master's side of replication: the HA port, one link per slave (docs/protocol/replication.md §1, §2).

A connection is a slave only once its hello showed a ticket (``HelloGate``): before that it is not counted, not
read past the hello and sent nothing. The port listens from ``start()`` (idempotent: a broker calls it when
``haListenPort`` is set, or when it hands out its first ticket). A slave then reports its commit-log end; the
master streams its commit log from there in frames of at most ``batch`` bytes, as soon as new bytes are stored
(``notify``), and a heartbeat frame when it has had nothing to send for ``heartbeat_s``. Every report moves the
slave's acknowledged offset: SYNC_MASTER sends wait for it (``wait_acked``). A slave that reports nothing for
``housekeeping_s`` is dropped.

Where a copy starts: at the slave's end, or for an empty slave at the master's oldest stored offset (RocketMQ
starts an empty slave at the master's last segment, so older messages are never copied). A slave ahead of the
master (a master that lost data, or a new empty master beside an old slave) gets nothing: the master reports
itself *behind* and the broker refuses writes until an operator acts; a slave that needs bytes the master no longer
holds gets nothing either, and is named in an ERROR line.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from sievemq.ha.gate import HelloGate
from sievemq.ha.lag import LagClock
from sievemq.ha.wire import ReportDecoder, WireError, encode_frame
from sievemq.store import MessageStore

__all__ = ["HAServer", "OwnerProgress", "SlaveState"]

log = logging.getLogger(__name__)

PRUNE_AT = 4096
"""Waiting sends kept before the expired ones are dropped from the queue."""


@dataclass
class SlaveState:
    """What the master knows of one connected slave."""

    addr: str
    connected_at: float
    requested: int = -1
    """The offset the slave first reported (where its copy resumes); -1 before its first report."""
    acked: int = 0
    """The slave's newest reported commit-log end."""
    last_report: float = field(default_factory=time.monotonic)
    next_offset: int = -1
    """Where the next frame to this slave starts."""
    wake: asyncio.Event = field(default_factory=asyncio.Event, repr=False)
    """Set when the commit log grew (``HAServer.notify``)."""
    lag: LagClock | None = None
    """Its lag in seconds (set at its first report)."""
    owner: str = ""
    """Who it is (its ticket's owner: a brokerId under automatic failover), "" when not known."""


@dataclass
class OwnerProgress:
    """What the master knows of one named replica across its links (automatic failover's SyncStateSet)."""

    acked: int = 0
    """Its newest reported commit-log end."""
    caught_up_at: float = float("-inf")
    """When it last reported holding all this master held (monotonic seconds)."""
    connected: bool = False
    changed_at: float = field(default_factory=time.monotonic)
    """When its link opened or closed last."""


def _expire(fut: asyncio.Future[bool]) -> None:
    if not fut.done():
        fut.set_result(False)


class HAServer:
    """Listens on the HA port and streams the commit log to slaves; answers SYNC_MASTER waits."""

    def __init__(
        self,
        store: MessageStore,
        host: str,
        port: int,
        *,
        gate: HelloGate,
        batch: int = 32 * 1024,
        heartbeat_s: float = 5.0,
        housekeeping_s: float = 20.0,
        max_fallbehind: int = 256 * 1024 * 1024,
        on_slave_change: Callable[[], None] | None = None,
        on_ahead: Callable[[str, int], None] | None = None,
    ) -> None:
        """``on_ahead(peer, offset)``: a connection reported more than this master holds (the caller decides what
        that means; without it the master believes the report and sets ``behind_slave``). ``gate`` admits
        connections (their hello and ticket)."""
        self.store = store
        self.gate = gate
        self.host = host
        self.port = port
        self.batch = batch
        self.heartbeat_s = heartbeat_s
        self.housekeeping_s = housekeeping_s
        self.max_fallbehind = max_fallbehind
        self.on_slave_change = on_slave_change
        self.on_ahead = on_ahead
        self.slaves: dict[int, SlaveState] = {}
        self.behind_slave: str | None = None
        """Set when a slave reported more than the master holds: the master must not take writes."""
        self._server: asyncio.Server | None = None
        self._starting = asyncio.Lock()
        self._waiters: list[tuple[int, int, asyncio.Future[bool]]] = []
        self._seq = itertools.count()
        self._links: set[asyncio.Task[None]] = set()
        self.acked = 0
        """The highest offset any slave has acknowledged."""
        self.owners: dict[str, OwnerProgress] = {}
        """Named replicas' progress (automatic failover), by owner."""
        self.required: frozenset[str] | None = None
        """None: a SYNC send waits for any one slave. Else the owners whose copy it waits for, all of them (the
        SyncStateSet without the master; empty: none)."""
        self.confirmed = 0
        """Where every required copy has reached (``acked`` while ``required`` is None)."""
        self.on_confirm: Callable[[int], None] | None = None
        """Told the new ``confirmed`` whenever it grows."""

    # ------------------------------------------------------------------------------------------ lifecycle
    @property
    def listening(self) -> bool:
        """True once the HA port listens."""
        return self._server is not None

    async def start(self) -> None:
        """Listen, unless listening already (``port`` 0 picks a free one, then ``port`` holds it); ``OSError`` when
        the address cannot be bound (call again to retry)."""
        async with self._starting:
            if self._server is not None:
                return
            server = await asyncio.start_server(self._serve, self.host or None, self.port, reuse_address=True)
            self.port = int(server.sockets[0].getsockname()[1])
            self._server = server
        log.info("HA port listening on %s:%d", self.host or "*", self.port)

    async def stop(self) -> None:
        """Stop listening, drop every slave, answer every waiter "not replicated"."""
        if self._server is not None:
            self._server.close()
        for t in list(self._links):
            t.cancel()
        for t in list(self._links):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2.0)
            self._server = None
        for _o, _s, fut in self._waiters:
            if not fut.done():
                fut.set_result(False)
        self._waiters.clear()

    def notify(self) -> None:
        """New bytes are in the commit log: wake every link that waits for some."""
        for state in self.slaves.values():
            state.wake.set()

    # ------------------------------------------------------------------------------------------ SYNC_MASTER
    def slave_ok(self, master_end: int) -> bool:
        """True when a slave is connected and no more than ``max_fallbehind`` bytes behind ``master_end``."""
        return bool(self.slaves) and master_end - self.acked < self.max_fallbehind

    async def wait_acked(self, offset: int, timeout: float) -> bool:
        """Wait until a slave has acknowledged the commit log up to ``offset``; False on timeout."""
        if self.confirmed >= offset:
            return True
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[bool] = loop.create_future()
        if len(self._waiters) >= PRUNE_AT:  # expired waits of a stuck slave: drop them
            self._waiters = [w for w in self._waiters if not w[2].done()]
            heapq.heapify(self._waiters)
        heapq.heappush(self._waiters, (offset, next(self._seq), fut))
        # one timer per wait, no task: a SYNC_MASTER send waits here, so this is on the hot path
        timer = loop.call_later(timeout, _expire, fut)
        try:
            return await fut
        finally:
            timer.cancel()

    def require(self, owners: frozenset[str] | None) -> None:
        """Wait, from now on, for every one of ``owners`` (None: for any one slave); waits now covered end."""
        self.required = owners
        self._confirm()

    def _acked(self, offset: int) -> None:
        if offset > self.acked:
            self.acked = offset
        self._confirm()

    def _confirm(self) -> None:
        if self.required is None:
            floor = self.acked
        elif not self.required:
            floor = 1 << 62
        else:
            floor = min(self.owners[o].acked if o in self.owners else 0 for o in self.required)
        grew = floor > self.confirmed
        self.confirmed = floor
        if grew and self.on_confirm is not None:
            self.on_confirm(floor)
        w = self._waiters
        while w and w[0][0] <= floor:
            fut = heapq.heappop(w)[2]
            if not fut.done():
                fut.set_result(True)

    # ------------------------------------------------------------------------------------------ one slave
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername") or ("?", 0)
        task = asyncio.current_task()
        if task is not None:
            self._links.add(task)
        try:
            owner = await self.gate.admit(reader, writer, (str(peer[0]), int(peer[1])))
            if owner is not None:
                await self._link(f"{peer[0]}:{peer[1]}", reader, writer, owner)
        except asyncio.CancelledError:
            pass  # stopping: the link ends here (the server's callback must not see the cancellation)
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
            if task is not None:
                self._links.discard(task)

    async def _link(
        self, addr: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, owner: str = ""
    ) -> None:
        """Serve one admitted slave until its link ends."""
        state = SlaveState(addr, time.monotonic(), owner=owner)
        key = id(state)
        self.slaves[key] = state
        progress = self.owners.setdefault(owner, OwnerProgress()) if owner else None
        if progress is not None:
            progress.connected, progress.changed_at = True, time.monotonic()
        log.info("slave %s connected to the HA port", state.addr)
        self._changed()
        sender = asyncio.create_task(self._send(state, writer), name=f"ha-send {state.addr}")
        try:
            await self._read(state, reader)
        except (ConnectionError, asyncio.IncompleteReadError, WireError, TimeoutError) as e:
            log.warning("slave %s: replication link closed: %s", state.addr, e)
        finally:
            sender.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await sender
            self.slaves.pop(key, None)
            if progress is not None and not any(s.owner == owner for s in self.slaves.values()):
                progress.connected, progress.changed_at = False, time.monotonic()
            log.info("slave %s left the HA port (acknowledged %d)", state.addr, state.acked)
            self._changed()

    def _changed(self) -> None:
        if self.on_slave_change is not None:
            try:
                self.on_slave_change()
            except Exception:
                log.exception("HA slave-change callback failed")

    async def _read(self, state: SlaveState, reader: asyncio.StreamReader) -> None:
        decoder = ReportDecoder()
        while True:
            async with asyncio.timeout(self.housekeeping_s):  # (no task per read, unlike wait_for)
                data = await reader.read(4096)
            if not data:
                return
            offset = decoder.feed(data)
            if offset is None:
                continue
            state.last_report = time.monotonic()
            if state.requested < 0:
                state.requested = offset
                self._first_report(state)
            state.acked = offset
            end = self.store.max_phy_offset
            if state.lag is None:
                state.lag = LagClock(state.connected_at, end)
            state.lag.report(offset, end, state.last_report)
            if state.owner and 0 <= offset <= state.next_offset:  # only what this link copied counts
                progress = self.owners.setdefault(state.owner, OwnerProgress())
                progress.acked = offset
                if offset >= end:
                    progress.caught_up_at = state.last_report
            self._acked(offset)

    def _first_report(self, state: SlaveState) -> None:
        store = self.store
        master_end = store.max_phy_offset
        if state.requested > master_end:  # nothing is sent to it
            if self.on_ahead is not None:
                self.on_ahead(state.addr, state.requested)
                return
            self.behind_slave = state.addr
            log.error("slave %s holds the commit log up to %d but this master only up to %d: this master lost data "
                      "or is new; it refuses writes until an operator recovers it from the slave", state.addr,
                      state.requested, master_end)  # fmt: skip
            self._changed()
            return
        start = state.requested if state.requested > 0 else store.min_phy_offset
        if start < store.min_phy_offset:
            log.error("slave %s resumes at %d, below this master's oldest stored offset %d: it cannot catch up; "
                      "empty its store folder to copy afresh", state.addr, start, store.min_phy_offset)  # fmt: skip
            return
        state.next_offset = start
        log.info("replicating to slave %s from offset %d (master at %d)", state.addr, start, master_end)
        state.wake.set()

    async def _send(self, state: SlaveState, writer: asyncio.StreamWriter) -> None:
        last_write = time.monotonic()
        while True:
            state.wake.clear()  # before reading: a notify from now on is not missed
            if state.next_offset < 0:  # no report yet, or nothing to send this slave
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(0.05):
                        await state.wake.wait()
                continue
            data = self.store.read_commitlog(state.next_offset, self.batch)
            if data:
                writer.writelines(encode_frame(state.next_offset, data))
                state.next_offset += len(data)
                await writer.drain()
                last_write = time.monotonic()
                continue
            wait = self.heartbeat_s - (time.monotonic() - last_write)
            if wait <= 0:
                writer.writelines(encode_frame(state.next_offset, b""))
                await writer.drain()
                last_write = time.monotonic()
                continue
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await state.wake.wait()
