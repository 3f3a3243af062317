"""A RemotingServer's limits applied (``ServerLimits``, limits.py): what its connections hold, rate-limited
warnings, the connection cap under the file-descriptor limit, and one sweep task per server.

Connections call in on events (a frame left unfinished, a new connection, a warning); the sweep, every second
or less, closes connections whose frame is overdue, reports the warnings it held back and recounts the file
descriptors when the cap may matter. Nothing here runs per request.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import math
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sievemq.ratelimit import RateLimitedLog, suppressed_note
from sievemq.remoting.limits import MiB, PartialFrames, ServerLimits, connection_cap, overdue

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

    def __init__(self, limits: ServerLimits, connections: set[Connection], counts: FdCounts = fd_counts) -> None:
        self.limits = limits
        self.connections = connections
        self.partial = PartialFrames(limits.partial_frame_budget)
        self.warnings = RateLimitedLog(limits.warning_interval)
        """Connection-level warnings, one line per peer IP per interval."""
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
        self._task: asyncio.Task[None] | None = None
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
        self._task = loop.create_task(self._sweep_loop())

    def stop(self) -> None:
        """Stop the sweep and give the loop its exception handler back."""
        if self._task is not None:
            self._task.cancel()
            self._task = None
            loop = asyncio.get_running_loop()
            if loop.get_exception_handler() == self._loop_exception:
                loop.set_exception_handler(self._previous_handler)

    # ------------------------------------------------------------------ called by connections
    def admit(self, conn: Connection) -> bool:
        """False when ``conn`` (already in ``connections``) is one too many: the caller closes it."""
        if len(self.connections) <= self.cap:
            return True
        self._refused = True
        self._error(
            REFUSED,
            "refusing connection from %s:%d on port %d: %d connections open, the cap is %d (%s)",
            *conn.peer,
            self._port,
            len(self.connections) - 1,
            self.cap,
            self._cap_reason(),
        )
        return False

    def over_budget(self, conn: Connection) -> None:
        """``conn``'s unfinished frame took the partial-frame total past the budget: close it."""
        self.shed(
            conn,
            f"its unfinished frame ({size_text(conn.partial_bytes)}) would take the unfinished frames of all "
            f"connections past their budget of {size_text(self.partial.budget)}",
        )

    def shed(self, conn: Connection, why: str) -> None:
        """Close an offending connection at once, dropping what it holds, with one (rate-limited) warning."""
        self.warn(conn, "closing connection from %s:%d: %s", *conn.peer, why)
        self.partial.release(conn)
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
        tick = max(0.05, min(1.0, self.limits.frame_timeout / 4))
        while True:
            await asyncio.sleep(tick)
            try:
                self.sweep(loop.time())
            except Exception:
                log.exception("connection sweep failed")

    def sweep(self, now: float) -> None:
        """Close connections with an overdue frame, report held-back lines, recount descriptors when due."""
        timeout = self.limits.frame_timeout
        for conn in [c for c in self.connections if overdue(c, now, timeout)]:
            self.shed(
                conn,
                f"a frame still incomplete {timeout:g} s after its first byte ({size_text(conn.partial_bytes)} "
                "received)",
            )
        for key, held_back in self.warnings.prune():
            log.warning("connections from %s: %d more similar line(s) suppressed", key, held_back)
        for key, held_back in self._errors.prune():
            log.error("port %d: %d more %s not logged", self._port, held_back, key)
        since = now - self._counted_at
        own = len(self.connections)
        near = self._refused or 2 * own >= self.cap or self.headroom <= 2 * self.limits.fd_reserve
        if since >= RECOUNT_SECONDS or (near and since >= 1.0):
            self._recount(now)

    def _recount(self, now: float) -> None:
        self.fd_limit, open_fds = self._counts()
        own = len(self.connections)
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
