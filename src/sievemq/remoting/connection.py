"""One remoting connection over asyncio: many requests in flight, matched by ``opaque``.

The same class serves both ends. Incoming requests are handed to a ``RequestHandler`` as separate tasks, so a
held (long-polling) pull never blocks a heartbeat on the same connection. Incoming responses complete the
future of the request with the same opaque. A malformed frame closes only this connection.

A server's connections also have a ``ServerGuard`` (guard.py) and a ``FlowGate`` (limits.py): they stop reading
while too many requests are in flight or too many answer bytes wait to be sent (back-pressure: the peer's
requests wait in its socket, none is dropped), count their unfinished frame in the server's budget and their
peer's share of it, have the header of a large frame screened before its body is read (when the server has a
screen: ACL on), and rate-limit their warnings per peer IP (docs/server-limits.md).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import ssl
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, Protocol, cast

from sievemq.errors import ConnectionClosedError, FrameError, RemotingError, RequestTimeoutError
from sievemq.protocol.reasons import REASON_FIELD
from sievemq.remoting.command import FrameDecoder, RemotingCommand, encode_frame
from sievemq.remoting.limits import FlowGate, Screen, screen_step
from sievemq.remoting.tls import describe_failure, in_handshake

if TYPE_CHECKING:
    from sievemq.remoting.guard import ServerGuard

log = logging.getLogger(__name__)

_opaque_counter = itertools.count(1)


def next_opaque() -> int:
    """A process-wide increasing request id (wraps below 2**31)."""
    return next(_opaque_counter) & 0x7FFFFFFF


RpcHook = Callable[[RemotingCommand], None]
"""Runs on every request a connection sends, just before it is written (a client's signer, ``sievemq.acl``)."""


TURN_BUDGET = 0.002
"""Seconds of one turn of the loop a connection spends starting the requests it read; the rest wait for the next
turn (other connections and timers run in between)."""
CORK_BYTES = 64 * 1024
"""What ``send`` gathers in one turn of the loop goes to the transport at once past this many bytes (the
transport's high-water mark decides about back-pressure, as without gathering)..."""
CORK_FRAMES = 8
"""... or past this many pieces (a frame is one or two: its head, and its body when it has one). Handing the
first answers of a burst over early lets the peer start on them while this side answers the rest (on 2 CPUs,
gathering a whole burst of 32 made both sides take turns: less CPU per message, fewer messages per second)."""

_HTTP_STATUS = b"HTTP/"
"""How an HTTP server's answer begins (its status line): what a client reads when it was pointed at an HTTP port."""


class ForeignProtocolError(ConnectionClosedError):
    """The peer answered in another protocol (``protocol``: "HTTP"), not RocketMQ's remoting: the address is wrong.
    A client connection that reads an HTTP status line where a frame should begin closes with it (instead of a
    frame-length warning), and its requests fail with it."""

    def __init__(self, peer: tuple[str, int], protocol: str, answer: bytes) -> None:
        first = answer.split(b"\r\n", 1)[0].split(b"\n", 1)[0][:80].decode("latin-1")
        super().__init__(f"{peer[0]}:{peer[1]} speaks {protocol}, not RocketMQ's protocol (it answered {first!r})")
        self.addr = f"{peer[0]}:{peer[1]}"
        self.protocol = protocol
        self.first_line = first
        """The first line of its answer (an HTTP status line)."""


class RequestHandler(Protocol):
    """Something that answers requests arriving on a connection."""

    async def handle(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand | None: ...


AnswerNow = Callable[["Connection", RemotingCommand], "RemotingCommand | Awaitable[RemotingCommand | None] | None"]
"""A handler's ``answer`` (``ProcessorTable.answer``): the response at once when it can, else what to await for it;
never raises. A connection whose handler has one serves a request with a task only when it must wait."""


class Connection(asyncio.Protocol):
    """A remoting connection (client or server side)."""

    def __init__(
        self,
        handler: RequestHandler | None = None,
        on_close: Callable[[Connection], None] | None = None,
        max_frame_length: int | None = None,
        *,
        guard: ServerGuard | None = None,
    ) -> None:
        self._handler = handler
        self._on_close = on_close
        self._decoder = FrameDecoder(max_frame_length) if max_frame_length else FrameDecoder()
        self._pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        self._transport: asyncio.Transport | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._loop = asyncio.get_running_loop()
        self._closed = self._loop.create_future()
        self._guard = guard
        self._gate: FlowGate[RemotingCommand] | None = None
        self._writable = asyncio.Event()
        """Set while the transport's output is below its high-water mark (server side)."""
        if guard is not None:
            self._gate = FlowGate(guard.limits.max_requests_in_flight)
            self._writable.set()
        self.partial_bytes = 0
        """Bytes of the unfinished frame counted in the server's budget (server side)."""
        self.partial_since = 0.0
        """Loop time of the unfinished frame's first byte; 0 when none or while reading is paused."""
        self.peer_key = ""
        """The peer this connection counts against (server side: its IP, or its IPv6 /64)."""
        self.slotted = False
        """Server side: it holds one of its peer's connection slots (until it closes)."""
        self.opened_at = 0.0
        """Loop time it was accepted (server side: it must complete a frame in time)."""
        self._screened = False
        """The unfinished frame's header passed the server's screen, or it needs none."""
        self.peer: tuple[str, int] = ("0.0.0.0", 0)
        self.local: tuple[str, int] = ("0.0.0.0", 0)
        self.attrs: dict[str, Any] = {}
        self.last_active = 0.0
        self.rpc_hook: RpcHook | None = None
        """Applied to each request sent by ``request`` and ``send_oneway`` (set by ``ConnectionPool``)."""
        self._lost_because: ConnectionClosedError | None = None
        """Why it was closed, when that is more than "closed" (its requests fail with it)."""
        self._answer: AnswerNow | None = getattr(handler, "answer", None)
        self._to_start: deque[RemotingCommand] = deque()
        """Requests let in (counted in flight) and not started yet, in order (``_start_queued``)."""
        self._starting = False
        self._resume_scheduled = False
        self._out: list[bytes] = []
        self._out_bytes = 0
        """Frames written in this turn of the loop, handed to the transport together at its end (``send``)."""

    # ------------------------------------------------------------------ asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's transports are not subclasses
        peer = transport.get_extra_info("peername")
        if peer:
            self.peer = (str(peer[0]), int(peer[1]))
        local = transport.get_extra_info("sockname")
        if local:
            self.local = (str(local[0]), int(local[1]))
        self.last_active = self.opened_at = self._loop.time()
        guard = self._guard
        if guard is not None:
            self._transport.set_write_buffer_limits(high=guard.limits.max_unsent_bytes)
            if not guard.admit(self):
                transport.close()

    def data_received(self, data: bytes) -> None:
        now = self.last_active = self._loop.time()
        decoder = self._decoder
        guard = self._guard
        try:
            commands = decoder.feed(data)
        except FrameError as e:
            if guard is not None:
                guard.bad_frame(self, e)
            elif data.startswith(_HTTP_STATUS):  # we asked something that answers HTTP: say so, without a warning
                self._lost_because = ForeignProtocolError(self.peer, "HTTP", data)
                self.close()
            else:
                log.warning("closing connection from %s:%d: %s", self.peer[0], self.peer[1], e)
                self.close()
            return
        if guard is not None:
            if commands:
                self._screened = False  # what is buffered, if anything, is a new frame
                if self.slotted and guard.unproven:
                    guard.proven(self)
            if decoder.buffered or self.partial_bytes:
                if guard.screen is not None and decoder.buffered and not self._screened and not self._screen(guard):
                    return
                if not guard.hold(self, decoder.buffered, bool(commands), now):
                    return
        gate = self._gate
        accepted: list[RemotingCommand] = []
        for cmd in commands:
            if cmd.is_response:
                fut = self._pending.pop(cmd.opaque, None)
                if fut is not None and not fut.done():
                    fut.set_result(cmd)
            elif self._handler is not None and (gate is None or gate.offer(cmd)):
                accepted.append(cmd)
        if accepted:
            self._enqueue(accepted)
        if gate is not None and commands:
            change = gate.reading_change()
            if change is not None:
                self._set_reading(change)

    def _screen(self, guard: ServerGuard) -> bool:
        """Screen the unfinished frame: True to go on reading it, False when it was refused (closed)."""
        decoder = self._decoder
        try:
            prefix = decoder.pending()
            if prefix is None:
                return True
            length, header_length = prefix
            step = screen_step(length, header_length, decoder.buffered, guard.limits.screen_bytes)
            if step is Screen.WAIT:
                return True
            if step is Screen.PASS:
                self._screened = True
                return True
            if step is Screen.HEADER_TOO_LONG:
                guard.screened_out(self, length, f"its header of {header_length} bytes is longer than the "
                                   f"{guard.limits.screen_bytes} bytes read before the sender is known")  # fmt: skip
                return False
            head = decoder.pending_header()
        except FrameError as e:
            guard.bad_frame(self, e)
            return False
        assert guard.screen is not None
        if head.is_response:
            if head.opaque in self._pending:  # the answer to a request of ours: expected whatever its size
                self._screened = True
                return True
            guard.screened_out(self, length, f"a response (opaque {head.opaque}) to no request of this server")
            return False
        try:
            guard.screen(self.peer[0], head)
        except RemotingError as e:
            if not head.is_oneway:
                self.send(head.response(e.code, e.remark, {REASON_FIELD: e.reason} if e.reason else None))
            guard.screened_out(self, length, e.remark)
            return False
        self._screened = True
        return True

    @property
    def busy(self) -> bool:
        """True while it has requests being served or waiting, or waits for answers (server side: not idle)."""
        gate = self._gate
        return bool(self._pending) or (gate is not None and (gate.in_flight > 0 or gate.waiting > 0))

    def pause_writing(self) -> None:
        if self._gate is not None:
            self._gate.pause_writing()
            self._writable.clear()
            self._set_reading(self._gate.reading_change())

    def resume_writing(self) -> None:
        if self._gate is not None:
            self._writable.set()
            self._started(self._gate, self._gate.resume_writing())

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        if self._guard is not None:
            self._guard.left(self)
        if self._gate is not None:
            self._gate.clear()
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(
                    self._lost_because or ConnectionClosedError(f"connection to {self.peer[0]}:{self.peer[1]} closed")
                )
        self._pending.clear()
        for task in list(self._tasks):
            task.cancel()
        if not self._closed.done():
            self._closed.set_result(None)
        if self._on_close is not None:
            try:
                self._on_close(self)
            except Exception:
                log.exception("on_close callback failed")

    # ------------------------------------------------------------------ serving
    def _start(self, cmd: RemotingCommand) -> None:
        answer = self._answer
        gate = self._gate
        if answer is None or (gate is not None and gate.write_paused):
            self._spawn(self._serve(cmd, None))
            return
        try:
            response = answer(self, cmd)
        except Exception:  # an answer never raises; a bug must not end the read loop
            log.exception("handler failed for request code %d", cmd.code)
            response = None
        if response is None or isinstance(response, RemotingCommand):
            self._done(cmd, response)
        else:
            self._spawn(self._serve(cmd, response))

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(self, cmd: RemotingCommand, pending: Awaitable[RemotingCommand | None] | None) -> None:
        """Serve ``cmd`` in a task of its own: await ``pending`` (what the handler's ``answer`` left to wait for),
        or the handler itself."""
        assert self._handler is not None
        response = None
        try:
            if self._gate is not None and self._gate.write_paused:
                await self._writable.wait()  # started before the output filled up: its answer would wait anyway
            response = await (self._handler.handle(self, cmd) if pending is None else pending)
        except asyncio.CancelledError:
            if isinstance(pending, Coroutine):
                pending.close()  # cancelled before it began: no "never awaited" warning
            self._done(cmd, None)
            return
        except Exception:
            log.exception("handler failed for request code %d", cmd.code)
        self._done(cmd, response)

    def _done(self, cmd: RemotingCommand, response: RemotingCommand | None) -> None:
        """Send the answer to ``cmd`` (if any) and let the gate start what waited for it."""
        try:
            if response is not None and not cmd.is_oneway:
                self.send(response)
        except Exception:
            log.exception("answer to request code %d could not be encoded", cmd.code)
        gate = self._gate
        if gate is not None:
            started = gate.finished()  # the answer is the transport's now
            if started is not None:
                self._started(gate, started)

    def _started(self, gate: FlowGate[RemotingCommand], started: list[RemotingCommand]) -> None:
        """Start what the gate let through, and read again if it says so."""
        if self._transport is None:
            return
        self._enqueue(started)
        self._set_reading(gate.reading_change())

    def _enqueue(self, requests: list[RemotingCommand]) -> None:
        """Start requests (the gate counts them in flight), in the order they came, behind any not started yet."""
        self._to_start.extend(requests)
        if not self._starting and not self._resume_scheduled:
            self._start_queued()

    def _start_queued(self) -> None:
        """Start the queued requests until ``TURN_BUDGET`` of this turn of the loop is spent, the rest in the next
        turn: a burst of large batches does not hold every other client and timer up for the whole burst. Requests
        answered at once let more through while this runs: they are queued and started here, not by nested calls."""
        self._resume_scheduled = False
        queue = self._to_start
        if self._transport is None:
            queue.clear()
            return
        self._starting = True
        deadline = time.monotonic() + TURN_BUDGET
        try:
            while queue and self._transport is not None:
                self._start(queue.popleft())
                if queue and time.monotonic() > deadline:
                    self._resume_scheduled = True
                    self._loop.call_soon(self._start_queued)
                    break
        finally:
            self._starting = False

    def _set_reading(self, change: bool | None) -> None:
        """Do what the gate decided: pause or resume reading (the frame timer stops while paused)."""
        transport = self._transport
        if change is None or transport is None:
            return
        if change:
            transport.resume_reading()
            if self.partial_bytes:
                self.partial_since = self._loop.time()
        else:
            transport.pause_reading()
            self.partial_since = 0.0

    # ------------------------------------------------------------------ API
    @property
    def is_closed(self) -> bool:
        """True once the transport is gone."""
        return self._transport is None or self._closed.done()

    def send(self, cmd: RemotingCommand) -> None:
        """Write a command (response or one-way request); silently dropped on a closed connection.

        Frames sent in one turn of the event loop go to the transport together, right after the callbacks of that
        turn (one ``writev`` for the answers to a burst of pipelined requests, instead of one system call each).
        """
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        out = self._out
        if not out:
            self._loop.call_soon(self._flush)
        frame = encode_frame(cmd)
        out += frame
        self._out_bytes += len(frame[-1]) + (len(frame[0]) if len(frame) > 1 else 0)
        if self._out_bytes >= CORK_BYTES or len(out) >= CORK_FRAMES:
            self._flush()

    def _flush(self) -> None:
        """Hand what ``send`` gathered to the transport."""
        out = self._out
        if not out:
            return
        self._out = []
        self._out_bytes = 0
        transport = self._transport
        if transport is not None and not transport.is_closing():
            transport.writelines(out)

    def send_oneway(self, cmd: RemotingCommand) -> None:
        """Send a one-way request (flag bit 1)."""
        cmd.flag |= 2
        if not cmd.opaque:
            cmd.opaque = next_opaque()
        if self.rpc_hook is not None:
            self.rpc_hook(cmd)
        self.send(cmd)

    async def request(self, cmd: RemotingCommand, timeout: float = 3.0) -> RemotingCommand:
        """Send a request and wait for its response (RequestTimeoutError after ``timeout`` seconds).

        The timeout is a timer that fails the response future: a cancellation of the caller always
        propagates (on 3.11 ``wait_for`` can swallow one that races the response), and it costs less than
        half of ``asyncio.timeout`` or ``wait_for`` per request (about 2 us instead of 5 on uvloop).
        """
        if self.is_closed:
            raise ConnectionClosedError(f"connection to {self.peer[0]}:{self.peer[1]} is closed")
        opaque = cmd.opaque = next_opaque()
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[RemotingCommand] = loop.create_future()
        self._pending[opaque] = fut
        if self.rpc_hook is not None:
            self.rpc_hook(cmd)
        self.send(cmd)
        timer = loop.call_later(timeout, self._expire, fut, cmd.code, timeout)
        try:
            return await fut
        finally:
            timer.cancel()
            self._pending.pop(opaque, None)

    def _expire(self, fut: asyncio.Future[RemotingCommand], code: int, timeout: float) -> None:
        if not fut.done():
            fut.set_exception(
                RequestTimeoutError(
                    f"no response to request code {code} from {self.peer[0]}:{self.peer[1]} in {timeout:.1f}s"
                )
            )

    def close(self) -> None:
        """Close the connection once what was sent is written (pending requests fail with ConnectionClosedError)."""
        if self._transport is not None:
            self._flush()
            self._transport.close()

    def shed(self) -> None:
        """Close the connection and drop what it received but did not decode, at once (an offender)."""
        self._decoder.clear()
        if self._gate is not None:
            self._gate.clear()
        self.close()

    async def wait_closed(self) -> None:
        """Wait until the connection is gone."""
        await asyncio.shield(self._closed)


async def connect(
    host: str,
    port: int,
    handler: RequestHandler | None = None,
    on_close: Callable[[Connection], None] | None = None,
    timeout: float = 3.0,
    tls: ssl.SSLContext | None = None,
) -> Connection:
    """Open a client connection; over TLS with ``tls`` (the handshake is part of ``timeout``)."""
    loop = asyncio.get_running_loop()
    try:
        _, proto = await asyncio.wait_for(
            loop.create_connection(lambda: Connection(handler, on_close), host, port, ssl=tls), timeout
        )
    except TimeoutError:
        raise ConnectionClosedError(f"connect to {host}:{port} timed out") from None
    except OSError as e:
        if tls is not None and in_handshake(e):
            raise ConnectionClosedError(describe_failure(host, port, e)) from None
        raise ConnectionClosedError(f"cannot connect to {host}:{port}: {e}") from None
    return proto


class ConnectionPool:
    """Client-side connections by ``host:port``, opened on demand and reopened after a close."""

    def __init__(
        self,
        handler: RequestHandler | None = None,
        connect_timeout: float = 3.0,
        rpc_hook: RpcHook | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self._handler = handler
        self._timeout = connect_timeout
        self.tls = tls
        """Every connection of the pool uses TLS with this context (None: plain TCP)."""
        self.rpc_hook = rpc_hook
        """Given to every connection of the pool (signs each request it sends)."""
        self._conns: dict[str, Connection] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def get(self, addr: str) -> Connection:
        """The open connection to ``addr`` (``host:port``), connecting if needed."""
        conn = self._conns.get(addr)
        if conn is not None and not conn.is_closed:
            return conn
        lock = self._locks.setdefault(addr, asyncio.Lock())
        async with lock:
            conn = self._conns.get(addr)
            if conn is not None and not conn.is_closed:
                return conn
            host, _, port = addr.rpartition(":")
            conn = await connect(host, int(port), self._handler, timeout=self._timeout, tls=self.tls)
            conn.rpc_hook = self.rpc_hook
            self._conns[addr] = conn
            return conn

    async def request(self, addr: str, cmd: RemotingCommand, timeout: float = 3.0) -> RemotingCommand:
        """Send a request to ``addr`` and wait for the response."""
        conn = await self.get(addr)
        return await conn.request(cmd, timeout)

    async def send_oneway(self, addr: str, cmd: RemotingCommand) -> None:
        """Send a one-way request to ``addr``."""
        (await self.get(addr)).send_oneway(cmd)

    def close_addr(self, addr: str) -> None:
        """Close the connection to ``addr`` if open."""
        conn = self._conns.pop(addr, None)
        if conn is not None:
            conn.close()

    async def close(self) -> None:
        """Close every connection."""
        conns = list(self._conns.values())
        self._conns.clear()
        for c in conns:
            c.close()
        for c in conns:
            try:
                await asyncio.wait_for(c.wait_closed(), 1.0)
            except TimeoutError:
                pass
