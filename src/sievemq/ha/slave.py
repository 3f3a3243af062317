"""The slave's side of replication: follow the master's HA port (docs/protocol/replication.md §3).

Before each link the slave asks for a ticket (``admit``: HA_CHECK at the master's remoting port, which also checks
that their logs agree; docs/protocol/replication.md §1). It connects to the master's HA address, sends its hello
with the ticket and its commit-log end, and appends every frame it receives at the same physical offset
(``MessageStore.append_commitlog``: the records are dispatched to consume queues, index and bitmaps by the same
code as on the master), reporting its new end after each read and at least every ``heartbeat_s``. The report goes
out as soon as the bytes are written and checked, before the records are dispatched (RocketMQ's slave, too,
acknowledges its commit log and builds its queues behind it): a SYNC_MASTER send does not wait for the slave's
queues, and a crash in between loses nothing (recovery dispatches from the log). A frame that does not start at the
slave's end (the master restarted elsewhere, a lost byte) or bytes that are not records end the link; the slave
reconnects, reports its end again, and the master resumes from there. Nothing the slave holds is ever overwritten.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

from sievemq.ha.wire import FrameDecoder, WireError, encode_hello, encode_report
from sievemq.store import MessageStore, StoreError
from sievemq.util.tasks import Background

__all__ = ["HAClient", "LinkRefused"]

log = logging.getLogger(__name__)

RECONNECT_S = 1.0
"""Pause before reconnecting after a link ends."""
UNKNOWN_MASTER_POLL_S = 0.2
"""How often to look again for the master's address while none is known (it comes with a registration)."""
REFUSED_RETRY_S = 10.0
"""Pause before asking again after ``admit`` refused the master."""


class LinkRefused(Exception):
    """``admit`` gives no ticket: the slave must not follow that master now (the message says why)."""


class HAClient:
    """Keeps a slave's commit log a copy of its master's."""

    def __init__(
        self,
        store: MessageStore,
        master_addr: Callable[[], str | None],
        *,
        heartbeat_s: float = 5.0,
        housekeeping_s: float = 20.0,
        admit: Callable[[str], Awaitable[str]],
        refused_retry_s: float = REFUSED_RETRY_S,
    ) -> None:
        """``master_addr()`` gives the master's HA address (``host:port``), None while none is known; ``admit(addr)``
        runs before each link and returns the ticket for it, or raises ``LinkRefused`` (why not to follow)."""
        self.store = store
        self.master_addr = master_addr
        self.heartbeat_s = heartbeat_s
        self.housekeeping_s = housekeeping_s
        self.master_offset = 0
        """The master's commit-log end as last seen (a frame's end, or a heartbeat's offset)."""
        self.connected_to: str | None = None
        self.caught_up_at = time.monotonic()
        """When the slave last held everything the master had sent (for the lag in seconds)."""
        self.refusal: str | None = None
        """Why the last link ended (None while it serves)."""
        self.heartbeats = 0
        """Heartbeat frames received (the master had nothing more to send)."""
        self.admit = admit
        self.refused_retry_s = refused_retry_s
        """Pause before asking again after ``admit`` refused (a new master of a failover set comes up in a second)."""
        self._task = Background("ha-client")

    # ------------------------------------------------------------------------------------------ state
    @property
    def lag_bytes(self) -> int:
        """How far the slave is behind what the master last announced."""
        return max(0, self.master_offset - self.store.max_phy_offset)

    @property
    def lag_seconds(self) -> float:
        """How long the slave has been behind (0 when caught up)."""
        return 0.0 if self.lag_bytes == 0 else time.monotonic() - self.caught_up_at

    # ------------------------------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Follow the master in the background (reconnecting forever)."""
        self._task.start(self._run())

    async def stop(self) -> None:
        """Stop following."""
        await self._task.stop()

    async def _run(self) -> None:
        while True:
            addr = self.master_addr()
            if addr is None:
                await asyncio.sleep(UNKNOWN_MASTER_POLL_S)
                continue
            try:
                ticket = await self.admit(addr)
            except LinkRefused as e:
                self.refusal = str(e)
                await asyncio.sleep(self.refused_retry_s)
                continue
            except Exception as e:  # a failing admit must not end the following for good
                log.exception("asking master %s for a replication ticket failed", addr)
                self.refusal = f"{type(e).__name__}: {e}"
                await asyncio.sleep(self.refused_retry_s)
                continue
            try:
                await self._follow(addr, ticket)
            except asyncio.CancelledError:
                raise
            except (OSError, asyncio.IncompleteReadError, TimeoutError, WireError, StoreError) as e:
                self.refusal = f"{type(e).__name__}: {e}"
                log.warning("replication from master %s ended: %s; reconnecting", addr, e)
            except Exception:
                log.exception("replication from master %s failed; reconnecting", addr)
            self.connected_to = None
            await asyncio.sleep(RECONNECT_S)

    async def _follow(self, addr: str, ticket: str) -> None:
        host, _, port = addr.rpartition(":")
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), 5.0)
        self.connected_to = addr
        self.refusal = None
        log.info("following master %s from offset %d", addr, self.store.max_phy_offset)
        try:
            await self._exchange(reader, writer, ticket)
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _exchange(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, ticket: str) -> None:
        store = self.store
        decoder = FrameDecoder()
        writer.write(encode_hello(ticket) + encode_report(store.max_phy_offset))
        await writer.drain()
        last_report = last_heard = time.monotonic()
        heard = False
        while True:
            wait = max(0.05, self.heartbeat_s - (time.monotonic() - last_report))
            try:
                async with asyncio.timeout(min(wait, self.housekeeping_s)):  # (no task per read, unlike wait_for)
                    data = await reader.read(1 << 16)
            except TimeoutError:
                data = None
                if time.monotonic() - last_heard >= self.housekeeping_s:
                    raise TimeoutError(f"nothing from the master for {self.housekeeping_s:.0f}s") from None
            if data == b"" and not heard:  # the gate closes a refused hello without a word
                raise ConnectionError("the master closed the replication link before sending anything: it refused "
                                      "the ticket, or stopped (its log says which; a slave behind a relay or NAT "
                                      "needs haTicketChecksAddress = false on the master)")  # fmt: skip
            if data == b"":
                raise ConnectionError("the master closed the replication link")
            if data:
                heard = True
                last_heard = time.monotonic()
                try:
                    for offset, body in decoder.feed(data):
                        self._apply(offset, body)
                    # acknowledge the bytes at once (a SYNC_MASTER send waits for this), then build the queues:
                    # a crash in between loses nothing, recovery dispatches from the commit log
                    writer.write(encode_report(store.max_phy_offset))
                    last_report = time.monotonic()
                finally:
                    store.dispatch_copied()
                await writer.drain()
            elif time.monotonic() - last_report >= self.heartbeat_s:
                writer.write(encode_report(store.max_phy_offset))
                await writer.drain()
                last_report = time.monotonic()

    def _apply(self, offset: int, body: bytes) -> None:
        store = self.store
        end = store.max_phy_offset
        if not body:  # a heartbeat: the master's end
            self.master_offset = max(self.master_offset, offset)
            self.heartbeats += 1
        elif offset != end and end != 0:  # (an empty slave takes the master's oldest segment onwards)
            raise WireError(f"the master sent bytes for offset {offset} but this slave's commit log ends at {end}")
        else:
            store.append_commitlog(offset, body, defer=True)
            self.master_offset = max(self.master_offset, offset + len(body))
        if store.max_phy_offset >= self.master_offset:
            self.caught_up_at = time.monotonic()
