"""The remoting server: accepts connections and dispatches requests through a table of processors.

A processor is ``async def (conn, cmd) -> RemotingCommand | None``. Unknown request codes are answered with
REQUEST_CODE_NOT_SUPPORTED; a RemotingError becomes a response with its code, remark and ``reason`` field; any
other exception becomes SYSTEM_ERROR with a remark, and the server keeps serving.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from sievemq.errors import RemotingError
from sievemq.protocol.reasons import REASON_FIELD
from sievemq.remoting.codes import ResponseCode, request_name
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection

log = logging.getLogger(__name__)

Processor = Callable[[Connection, RemotingCommand], Awaitable[RemotingCommand | None]]


class ProcessorTable:
    """Request code -> processor; the RequestHandler of every server connection."""

    def __init__(self, role: str) -> None:
        self.role = role
        self._table: dict[int, Processor] = {}

    def register(self, code: int, processor: Processor) -> None:
        """Route ``code`` to ``processor``."""
        self._table[int(code)] = processor

    def codes(self) -> list[int]:
        """The request codes this table answers."""
        return sorted(self._table)

    async def handle(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand | None:
        """Run the processor for ``cmd.code`` and turn failures into responses."""
        processor = self._table.get(cmd.code)
        if processor is None:
            return cmd.response(
                ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                f"the {self.role} does not support request code {cmd.code} ({request_name(cmd.code)})",
            )
        try:
            return await processor(conn, cmd)
        except RemotingError as e:
            return cmd.response(e.code, e.remark, {REASON_FIELD: e.reason} if e.reason else None)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.exception("%s: %s failed", self.role, request_name(cmd.code))
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"{type(e).__name__}: {e}")


class RemotingServer:
    """A TCP server whose connections dispatch requests through one ProcessorTable."""

    def __init__(
        self,
        table: ProcessorTable,
        host: str = "127.0.0.1",
        port: int = 0,
        on_close: Callable[[Connection], None] | None = None,
    ) -> None:
        self.table = table
        self.host = host
        self.port = port
        self._on_close = on_close
        self._server: asyncio.Server | None = None
        self.connections: set[Connection] = set()

    def _make(self) -> Connection:
        conn = Connection(self.table, self._closed)
        self.connections.add(conn)
        return conn

    def _closed(self, conn: Connection) -> None:
        self.connections.discard(conn)
        if self._on_close is not None:
            self._on_close(conn)

    async def start(self) -> None:
        """Bind and listen; ``port`` is updated when 0 was asked for."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(self._make, self.host, self.port, reuse_address=True)
        sock = self._server.sockets[0]
        self.port = int(sock.getsockname()[1])

    async def stop(self) -> None:
        """Stop listening and close every connection."""
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            conn.close()
        if self._server is not None:
            try:
                await asyncio.wait_for(self._server.wait_closed(), 2.0)
            except TimeoutError:
                pass
            self._server = None
