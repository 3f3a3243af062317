"""A slow link made in user space: a TCP relay that holds every chunk for ``delay`` seconds in each direction, in
order. Where the kernel has no ``tc netem`` (no ``sch_netem``), a test points one connection through it instead."""

from __future__ import annotations

import asyncio
import contextlib

__all__ = ["DelayingRelay"]


class DelayingRelay:
    """Listens on ``host`` (a free port) and forwards each connection to ``target`` (``host:port``); ``delay``
    (seconds, changeable at any time) applies to data read from then on."""

    def __init__(self, host: str, target: str) -> None:
        self.host = host
        self.target_host, port = target.rsplit(":", 1)
        self.target_port = int(port)
        self.delay = 0.0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def addr(self) -> str:
        """``host:port`` the relay listens on."""
        assert self._server is not None, "start() first"
        return f"{self.host}:{self._server.sockets[0].getsockname()[1]}"

    async def start(self) -> DelayingRelay:
        """Listen."""
        self._server = await asyncio.start_server(self._serve, self.host, 0)
        return self

    async def close(self) -> None:
        """Stop listening and cut every relayed connection."""
        if self._server is not None:
            self._server.close()
        for w in list(self._writers):
            w.close()
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _serve(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        self._writers.add(client_w)
        try:
            server_r, server_w = await asyncio.open_connection(self.target_host, self.target_port)
        except OSError:
            client_w.close()
            return
        self._writers.add(server_w)
        for r, w in ((client_r, server_w), (server_r, client_w)):
            task = asyncio.get_running_loop().create_task(self._pipe(r, w))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def deliver() -> None:
            while True:
                due, data = await queue.get()
                if (wait := due - loop.time()) > 0:
                    await asyncio.sleep(wait)
                if not data:
                    writer.close()
                    return
                writer.write(data)
                await writer.drain()

        sender = loop.create_task(deliver())
        try:
            while True:
                data = await reader.read(65536)
                queue.put_nowait((loop.time() + self.delay, data))
                if not data:
                    break
            await sender
        except OSError:
            pass  # a side went away: close both ends below
        finally:
            if not sender.done():
                sender.cancel()
            writer.close()
            with contextlib.suppress(BaseException):
                await sender
