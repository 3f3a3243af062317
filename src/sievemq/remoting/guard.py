"""A RemotingServer's limits applied (``ServerLimits``, limits.py; docs/server-limits.md): what its connections
hold, per peer and in all, rate-limited warnings, the connection caps (per peer IP, and under the file-descriptor
limit), the screen of large frames' headers, and one sweep task per server.

Connections call in on events (a frame left unfinished, a new connection, a first frame, a warning); the sweep,
every second or less, closes connections whose frame is overdue, that never completed a frame in time or that
went idle, reports the warnings it held back and recounts the file descriptors when the cap may matter. Nothing
here runs per request. ``closed`` counts the connections closed or refused by each limit (the metrics show it).
"""

from __future__ import annotations

import asyncio
import errno
import logging
import math
import os
import sys
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.limits import (
    GivenUp,
    MiB,
    Over,
    PartialFrames,
    PeerSlots,
    ServerLimits,
    connection_cap,
    evictable,
    overdue,
)
from sievemq.remoting.peers import peer_key
from sievemq.util.ratelimit import RateLimitedLog, suppressed_note
from sievemq.util.tasks import Background

if TYPE_CHECKING:
    from sievemq.remoting.connection import Connection

try:
    import resource
except ImportError:  # not on Windows
    resource = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

ACCEPT_OUT_OF_RESOURCES = "socket.accept() out of system resource"
"""How asyncio's selector loop reports EMFILE/ENFILE in accept (then it retries a second later); uvloop's libuv
accepts and closes pending connections instead, silently, so the cap below must keep it from happening."""
RECOUNT_SECONDS = 30.0
"""File descriptors are recounted at least this often, every sweep when the cap is near or was hit."""

LoopHandler = Callable[[asyncio.AbstractEventLoop, dict[str, Any]], object]
FdCounts = Callable[[], tuple[int | None, int | None]]
"""``() -> (soft RLIMIT_NOFILE or None, descriptors open or None)``."""
REFUSED, ACCEPT_FAILED, EXHAUSTED = "refused connections", "accept failures", "out-of-descriptors errors"
"""Keys of the ERROR lines' rate limiter, as the summary of held-back lines names them."""
HeaderScreen = Callable[[str, RemotingCommand], None]
"""``(peer ip, header of a large frame whose body is not read yet)``: raises RemotingError when the body may not
be read (with ACL on, ``sievemq.acl.early``: the header must name an account); the answer carries its code,
remark and reason, and the connection is closed."""


class Closed:
    """Why the guard closed or refused a connection: the ``reason`` label of ``sievemq_connections_closed``."""

    PEER_CAP = "peer_cap"
    CAP = "cap"
    EVICTED = "evicted"
    FIRST_FRAME_TIMEOUT = "first_frame_timeout"
    FRAME_TIMEOUT = "frame_timeout"
    IDLE = "idle"
    PARTIAL_PEER_SHARE = "partial_peer_share"
    PARTIAL_BUDGET = "partial_budget"
    SCREENED = "screened"
    BAD_FRAME = "bad_frame"


def fd_limit() -> int | None:
    """The soft RLIMIT_NOFILE, or None when unlimited or unknown."""
    if resource is None:
        return None
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return None if soft == resource.RLIM_INFINITY or soft < 0 else int(soft)


def fd_counts() -> tuple[int | None, int | None]:
    """The soft RLIMIT_NOFILE and the descriptors open (None: unlimited / not listed by the system)."""
    limit = fd_limit()
    for path in ("/proc/self/fd", "/dev/fd"):
        try:
            return limit, len(os.listdir(path)) - 1  # less the one listdir used
        except OSError as e:
            if e.errno in (errno.EMFILE, errno.ENFILE):
                return limit, limit  # not even one to list them with
    return limit, None


def size_text(n: int) -> str:
    """``n`` bytes in MiB for log lines."""
    return f"{n / MiB:.1f} MiB"


class ServerGuard:
    """The limits of one RemotingServer, shared by its connections (``connections`` is the server's set)."""

    def __init__(
        self,
        limits: ServerLimits,
        connections: set[Connection],
        counts: FdCounts = fd_counts,
        screen: HeaderScreen | None = None,
    ) -> None:
        self.limits = limits
        self.connections = connections
        self.partial: PartialFrames[Connection] = PartialFrames(
            limits.partial_frame_budget, limits.partial_frame_ip_budget
        )
        self.slots = PeerSlots(limits.max_connections_per_ip)
        """Connections per peer key: the served ones and those still in a TLS handshake."""
        self.unproven: dict[Connection, None] = {}
        """Served connections that have not completed a frame yet, oldest first."""
        self.screen = screen
        """Checks the header of a frame longer than ``limits.screen_bytes`` before its body is read (None: no
        screen, every frame is read whole)."""
        self.closed: Counter[str] = Counter()
        """Connections closed or refused by each limit since start (``Closed``)."""
        self.warnings = RateLimitedLog(limits.warning_interval)
        """Connection-level warnings, one line per peer IP per interval."""
        self._idle_log = RateLimitedLog(limits.warning_interval)
        self._errors = RateLimitedLog(limits.warning_interval)
        self.cap = sys.maxsize
        self.fd_limit: int | None = None
        self.other_fds = 0
        self.headroom = sys.maxsize
        """Descriptors free at the last count."""
        self._counts = counts
        self._counted_at = -math.inf
        self._refused = False
        self._port = 0
        self._sockets: frozenset[int] = frozenset()
        self._task = Background("connection-sweep")
        self._previous_handler: LoopHandler | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self, server: asyncio.Server) -> None:
        """Count the file descriptors, watch ``server``'s accept errors and start the sweep."""
        loop = asyncio.get_running_loop()
        self._recount(loop.time())
        self._sockets = frozenset(s.fileno() for s in server.sockets)
        self._port = int(server.sockets[0].getsockname()[1]) if server.sockets else 0
        self._previous_handler = loop.get_exception_handler()
        loop.set_exception_handler(self._loop_exception)
        self._task.start(self._sweep_loop())

    def stop(self) -> None:
        """Stop the sweep and give the loop its exception handler back."""
        if self._task.task is not None:
            self._task.cancel()
            loop = asyncio.get_running_loop()
            if loop.get_exception_handler() == self._loop_exception:
                loop.set_exception_handler(self._previous_handler)

    # ------------------------------------------------------------------ called by connections
    def enter(self, peer: tuple[str, int]) -> str | None:
        """A new connection from ``peer`` (served, or about to start its TLS handshake) takes a slot: returns its
        peer key, or None when it is refused (the caller closes it). At the server's cap, an unproven connection
        of a peer holding more connections may be closed to make room (``evictable``)."""
        key = peer_key(peer[0])
        if self.slots.full(key):
            self.closed[Closed.PEER_CAP] += 1
            self.warn_peer(peer[0], "refusing connection from %s:%d: %d connections from %s are open, the cap per "
                           "peer IP", *peer, self.slots.count(key), key)  # fmt: skip
            return None
        if self.slots.total >= self.cap:
            victim = evictable(self.unproven, self.slots.counts, key)
            if victim is None:
                self._refused = True
                self.closed[Closed.CAP] += 1
                self._error(REFUSED, "refusing connection from %s:%d on port %d: %d connections open, the cap is %d "
                            "(%s)", *peer, self._port, self.slots.total, self.cap, self._cap_reason())  # fmt: skip
                return None
            self.closed[Closed.EVICTED] += 1
            self.shed(victim, f"the server is at its cap of {self.cap} connections and this one never completed a "
                      f"frame: {peer[0]}, from a peer with fewer connections, takes its place")  # fmt: skip
        self.slots.take(key)
        return key

    def leave(self, key: str) -> None:
        """A connection that took a slot with ``enter`` and was never served is gone (a TLS handshake ended)."""
        self.slots.give_back(key)

    def admit(self, conn: Connection) -> bool:
        """A new served connection: False when it is one too many (the caller closes it)."""
        key = self.enter(conn.peer)
        if key is None:
            return False
        conn.peer_key = key
        conn.slotted = True
        self.unproven[conn] = None
        return True

    def proven(self, conn: Connection) -> None:
        """``conn`` completed its first frame."""
        self.unproven.pop(conn, None)

    def left(self, conn: Connection) -> None:
        """``conn`` is gone (or being closed): what it held and its slot are free. Idempotent."""
        self.partial.release(conn)
        self.unproven.pop(conn, None)
        if conn.slotted:
            conn.slotted = False
            self.slots.give_back(conn.peer_key)

    def hold(self, conn: Connection, held: int, completed: bool, now: float) -> bool:
        """``conn``'s unfinished frame now holds ``held`` bytes (``PartialFrames.hold``); closes the connections
        given up for it. False when ``conn`` is one of them."""
        given_up = self.partial.hold(conn, held, completed, now)
        for g in given_up:
            self._over(g)
        return all(g.conn is not conn for g in given_up)

    def _over(self, g: GivenUp[Connection]) -> None:
        if g.why is Over.PEER_SHARE:
            self.closed[Closed.PARTIAL_PEER_SHARE] += 1
            why = (
                f"its unfinished frame ({size_text(g.held)}) was the largest of its peer's when they would hold "
                f"{size_text(g.peer_held)}, past the share of one peer IP of {size_text(self.partial.ip_budget)}"
            )
        else:
            self.closed[Closed.PARTIAL_BUDGET] += 1
            why = (f"its unfinished frame ({size_text(g.held)}) was the largest of the peer holding the most "
                   f"({size_text(g.peer_held)}) when the unfinished frames of all connections would go past their "
                   f"budget of {size_text(self.partial.budget)}")  # fmt: skip
        self.shed(g.conn, why)

    def screened_out(self, conn: Connection, length: int, why: str) -> None:
        """``conn``'s large frame (``length``) was refused by the header screen before its body was read: close
        it (its answer, if any, was written first)."""
        self.closed[Closed.SCREENED] += 1
        self.shed(conn, f"a frame of {size_text(4 + length)} refused before its body was read: {why}")

    def bad_frame(self, conn: Connection, problem: object) -> None:
        """``conn`` sent a malformed frame: close it."""
        self.closed[Closed.BAD_FRAME] += 1
        self.warn(conn, "closing connection from %s:%d: %s", *conn.peer, problem)
        self.left(conn)
        conn.close()

    def shed(self, conn: Connection, why: str) -> None:
        """Close an offending connection at once, dropping what it holds, with one (rate-limited) warning."""
        self.warn(conn, "closing connection from %s:%d: %s", *conn.peer, why)
        self.left(conn)
        conn.shed()

    def warn(self, conn: Connection, msg: str, *args: object) -> None:
        """Log a warning about ``conn``, at most one line per peer IP per interval."""
        self.warn_peer(conn.peer[0], msg, *args)

    def warn_peer(self, ip: str, msg: str, *args: object) -> None:
        """Log a warning about a connection from ``ip`` (served or not yet), at most one line per IP per interval."""
        held_back = self.warnings.allow(ip)
        if held_back is not None:
            log.warning(msg + "%s", *args, suppressed_note(held_back))

    def _error(self, key: str, msg: str, *args: object) -> None:
        """Log an error, at most one line per ``key`` per interval."""
        held_back = self._errors.allow(key)
        if held_back is not None:
            log.error(msg + "%s", *args, suppressed_note(held_back))

    # ------------------------------------------------------------------ sweep
    async def _sweep_loop(self) -> None:
        loop = asyncio.get_running_loop()
        limits = self.limits
        shortest = min(limits.frame_timeout, limits.first_frame_timeout, limits.idle_timeout or math.inf)
        tick = max(0.05, min(1.0, shortest / 4))
        while True:
            await asyncio.sleep(tick)
            try:
                self.sweep(loop.time())
            except Exception:
                log.exception("connection sweep failed")

    def sweep(self, now: float) -> None:
        """Close connections with an overdue frame, unproven ones past their time and idle ones; report held-back
        lines; recount descriptors when due."""
        limits = self.limits
        timeout, idle = limits.frame_timeout, limits.idle_timeout
        stalled: list[Connection] = []
        silent: list[Connection] = []
        for c in self.connections:
            if overdue(c, now, timeout):
                stalled.append(c)
            elif idle and now - c.last_active > idle and c.slotted and c not in self.unproven and not c.busy:
                silent.append(c)
        for conn in stalled:
            self.closed[Closed.FRAME_TIMEOUT] += 1
            self.shed(
                conn,
                f"a frame still incomplete {timeout:g} s after its first byte ({size_text(conn.partial_bytes)} "
                "received)",
            )
        first = limits.first_frame_timeout
        while self.unproven:
            conn = next(iter(self.unproven))
            if now - conn.opened_at <= first:
                break
            self.closed[Closed.FIRST_FRAME_TIMEOUT] += 1
            self.shed(conn, f"no complete frame {first:g} s after it connected")
        for conn in silent:
            self._close_idle(conn, now - conn.last_active)
        for key, held_back in self.warnings.prune():
            log.warning("connections from %s: %d more similar line(s) suppressed", key, held_back)
        for key, held_back in self._idle_log.prune():
            log.info("connections from %s: %d more idle connection(s) closed", key, held_back)
        for key, held_back in self._errors.prune():
            log.error("port %d: %d more %s not logged", self._port, held_back, key)
        since = now - self._counted_at
        own = self.slots.total
        near = self._refused or 2 * own >= self.cap or self.headroom <= 2 * self.limits.fd_reserve
        if since >= RECOUNT_SECONDS or (near and since >= 1.0):
            self._recount(now)

    def _close_idle(self, conn: Connection, silent: float) -> None:
        """A connection that sent nothing for ``idle_timeout`` with nothing in flight: closed as RocketMQ closes
        it (``serverChannelMaxIdleTimeSeconds``); its client connects again when it next needs to."""
        self.closed[Closed.IDLE] += 1
        held_back = self._idle_log.allow(conn.peer[0])
        if held_back is not None:
            log.info("closing idle connection from %s:%d: nothing received for %.0f s%s", *conn.peer, silent,
                     suppressed_note(held_back))  # fmt: skip
        self.left(conn)
        conn.close()

    def _recount(self, now: float) -> None:
        self.fd_limit, open_fds = self._counts()
        own = self.slots.total
        self.other_fds = max(0, open_fds - own) if open_fds is not None else 0
        self.cap = connection_cap(self.limits.max_connections, self.fd_limit, open_fds, own, self.limits.fd_reserve)
        self.headroom = self.fd_limit - open_fds if self.fd_limit is not None and open_fds is not None else sys.maxsize
        self._counted_at = now
        self._refused = False
        if self.headroom <= 0:
            self._error(
                EXHAUSTED,
                "out of file descriptors: all %d of RLIMIT_NOFILE are open (%d connections on port %d): new "
                "connections are closed at once and files cannot be opened until some are freed",
                self.fd_limit,
                own,
                self._port,
            )

    def _cap_reason(self) -> str:
        configured = self.limits.max_connections
        if configured and configured == self.cap:
            return "the configured maximum"
        return (
            f"RLIMIT_NOFILE {self.fd_limit} less {self.other_fds} descriptors open for other uses and a reserve "
            f"of {self.limits.fd_reserve}"
        )

    def _loop_exception(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """The loop's exception handler while serving: asyncio's accept failures on our sockets become one
        rate-limited ERROR line; anything else goes to the handler there was before."""
        if str(context.get("message", "")).startswith(ACCEPT_OUT_OF_RESOURCES) and self._is_ours(context):
            self._refused = True  # recount at the next sweep
            self._error(
                ACCEPT_FAILED,
                "cannot accept connections on port %d: %s (RLIMIT_NOFILE %s, %d connections open on this port); "
                "retrying",
                self._port,
                context.get("exception"),
                self.fd_limit,
                len(self.connections),
            )
            return
        if self._previous_handler is not None:
            self._previous_handler(loop, context)
        else:
            loop.default_exception_handler(context)

    def _is_ours(self, context: dict[str, Any]) -> bool:
        sock = context.get("socket")
        try:
            return sock is not None and sock.fileno() in self._sockets
        except (OSError, AttributeError):
            return False
