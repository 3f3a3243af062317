"""The remoting server: accepts connections and dispatches requests through a table of processors.

A processor is ``async def (conn, cmd) -> RemotingCommand | None``, or a plain function that answers at once when it
can and returns what to await when it cannot (a send stored under ASYNC_FLUSH is answered in the turn of the loop
that read it, with no task of its own). Unknown request codes are answered with
REQUEST_CODE_NOT_SUPPORTED; a RemotingError becomes a response with its code, remark and ``reason`` field; any
other exception becomes SYSTEM_ERROR with a remark, and the server keeps serving.

Every server keeps the bounds of its ``ServerLimits`` (limits.py) through one ``ServerGuard`` (guard.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TypeAlias, TypeVar, cast

from sievemq.errors import RemotingError
from sievemq.protocol.reasons import REASON_FIELD
from sievemq.remoting.codes import ResponseCode, request_name
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection
from sievemq.remoting.guard import HeaderScreen, ServerGuard
from sievemq.remoting.limits import ServerLimits
from sievemq.remoting.tls import ServerTls
from sievemq.remoting.tls_transport import TlsAcceptor
from sievemq.util.ratelimit import RateLimitedLog, suppressed_note

log = logging.getLogger(__name__)

FAILURE_LOG_INTERVAL = 10.0
"""At most one traceback per request code per this many seconds (the rest are counted in the next one)."""
Answer: TypeAlias = RemotingCommand | Awaitable[RemotingCommand | None] | None
"""What a processor returns: the response (None: none, a one-way request), or what to await for it."""
Processor = Callable[[Connection, RemotingCommand], Answer]
EdgeCheck = Callable[[int, Mapping[str, str]], None]
"""``(request code, extFields)``: raises RemotingError for a request no processor may see."""
Authorizer = Callable[[Connection, RemotingCommand], None]
"""``(connection, request)``: raises RemotingError for a request its sender may not make (the ACL)."""
ResourceCheck = Callable[[Connection, RemotingCommand, dict[str, int]], None]
"""``(connection, admitted request, {resource: permission})``: raises RemotingError when the request's sender lacks
a permission a processor found it needs once it read what the request names (the ACL's ``check_more``)."""


_R = TypeVar("_R", bound="RemotingCommand | None")


async def settled(answer: _R | Awaitable[_R]) -> _R:
    """The response an ``Answer`` gives: itself, or what it awaits for (to call a processor directly)."""
    if answer is None or isinstance(answer, RemotingCommand):
        return cast(_R, answer)
    return await answer


def allow_all(conn: Connection, cmd: RemotingCommand, resources: dict[str, int]) -> None:
    """The ``ResourceCheck`` of a server without ACL: everything is allowed."""


class ProcessorTable:
    """Request code -> processor; the RequestHandler of every server connection.

    ``check`` runs first on every request of a known code (the edge check of names and numbers,
    ``sievemq.protocol.header_rules.check_request``); its RemotingError is the answer. ``authorize`` runs next,
    with the connection and the whole request (the ACL, ``sievemq.acl``); None costs nothing.
    """

    def __init__(self, role: str, check: EdgeCheck | None = None, authorize: Authorizer | None = None) -> None:
        self.role = role
        self._table: dict[int, Processor] = {}
        self._check = check
        self._authorize = authorize
        self._failures = RateLimitedLog(FAILURE_LOG_INTERVAL)

    def register(self, code: int, processor: Processor) -> None:
        """Route ``code`` to ``processor``; a code registered twice is a wiring mistake (ValueError), never a silent
        replacement of the first handler."""
        code = int(code)
        if code in self._table:
            raise ValueError(f"{self.role}: request code {code} is registered twice")
        self._table[code] = processor

    def codes(self) -> list[int]:
        """The request codes this table answers."""
        return sorted(self._table)

    async def handle(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand | None:
        """Run the processor for ``cmd.code`` and turn failures into responses."""
        return await settled(self.answer(conn, cmd))

    def answer(self, conn: Connection, cmd: RemotingCommand) -> Answer:
        """The response to ``cmd`` when its processor gives it at once, else the awaitable that gives it; failures
        become responses either way (this never raises)."""
        processor = self._table.get(cmd.code)
        if processor is None:
            return cmd.response(
                ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                f"the {self.role} does not support request code {cmd.code} ({request_name(cmd.code)})",
            )
        try:
            if self._check is not None:
                self._check(cmd.code, cmd.ext_fields)
            if self._authorize is not None:
                self._authorize(conn, cmd)
            answer = processor(conn, cmd)
        except RemotingError as e:
            return cmd.response(e.code, e.remark, {REASON_FIELD: e.reason} if e.reason else None)
        except Exception as e:
            return self._failed(cmd, e)
        if answer is None or isinstance(answer, RemotingCommand):
            return answer
        return self._finish(cmd, answer)

    async def _finish(self, cmd: RemotingCommand, pending: Awaitable[RemotingCommand | None]) -> RemotingCommand | None:
        try:
            return await pending
        except RemotingError as e:
            return cmd.response(e.code, e.remark, {REASON_FIELD: e.reason} if e.reason else None)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            return self._failed(cmd, e)

    def _failed(self, cmd: RemotingCommand, e: Exception) -> RemotingCommand:
        held_back = self._failures.allow(cmd.code)  # a request that fails on purpose must not flood the log
        if held_back is not None:
            log.error("%s: %s failed%s", self.role, request_name(cmd.code), suppressed_note(held_back),
                      exc_info=e)  # fmt: skip
        return cmd.response(ResponseCode.SYSTEM_ERROR, f"{type(e).__name__}: {e}")


class RemotingServer:
    """A TCP server whose connections dispatch requests through one ProcessorTable.

    With ``tls`` in mode permissive or enforcing, each new connection goes through a ``TlsAcceptor``
    (tls_transport.py) first; without, or disabled, connections are served as they are accepted.
    """

    def __init__(
        self,
        table: ProcessorTable,
        host: str = "127.0.0.1",
        port: int = 0,
        on_close: Callable[[Connection], None] | None = None,
        limits: ServerLimits | None = None,
        tls: ServerTls | None = None,
        screen: HeaderScreen | None = None,
    ) -> None:
        """``screen``: checks the header of a large frame before its body is read (ACL on: ``sievemq.acl.early``)."""
        self.table = table
        self.host = host
        self.port = port
        self._on_close = on_close
        self._server: asyncio.Server | None = None
        self.connections: set[Connection] = set()
        self.limits = limits or ServerLimits()
        self.guard = ServerGuard(self.limits, self.connections, screen=screen)
        self.tls = tls
        self.acceptor: TlsAcceptor | None = None
        if tls is not None and tls.enabled:
            self.acceptor = TlsAcceptor(tls, self._make, self.guard.warn_peer, self.limits.frame_timeout,
                                        self.guard.enter, self.guard.leave)  # fmt: skip

    def _make(self) -> Connection:
        conn = Connection(self.table, self._closed, guard=self.guard)
        self.connections.add(conn)
        return conn

    def _closed(self, conn: Connection) -> None:
        self.connections.discard(conn)
        if self._on_close is not None:
            self._on_close(conn)

    async def start(self) -> None:
        """Bind and listen; ``port`` is updated when 0 was asked for."""
        loop = asyncio.get_running_loop()
        factory = self._make if self.acceptor is None else self.acceptor
        self._server = await loop.create_server(factory, self.host, self.port, reuse_address=True)
        sock = self._server.sockets[0]
        self.port = int(sock.getsockname()[1])
        self.guard.start(self._server)

    async def stop(self) -> None:
        """Stop listening and close every connection."""
        self.guard.stop()
        if self._server is not None:
            self._server.close()
        if self.acceptor is not None:
            self.acceptor.close()
        for conn in list(self.connections):
            conn.close()
        if self._server is not None:
            try:
                await asyncio.wait_for(self._server.wait_closed(), 2.0)
            except TimeoutError:
                pass
            self._server = None
