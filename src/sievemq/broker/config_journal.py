"""An append-only change journal beside a JSON table file (``config/topics.json``): docs/topic-table.md §3.

A change to a large table is made durable by appending one line to the journal and syncing it, not by rewriting
the whole file. From time to time the table file is rewritten whole (a compaction) and the journal lines it covers
are dropped. On disk, beside ``x.json``: ``x.json.journal.<generation>`` files, each a series of lines
``<crc32 of the JSON, 8 hex digits> <JSON object>\\n``. Entries are absolute (put this config, delete that name), so
replaying a journal onto a table file that already holds some of its entries gives the same table: every
generation still on disk is replayed, in order, onto the table file at load.

A compaction: on the event loop, at one instant, the table is snapshotted and the journal ``rotate``s (later
entries go to a new generation); the snapshot is written (``ConfigWriter``); then ``retire`` deletes the
generations the snapshot covers. ``kill -9`` at any point leaves the table file (old or new) and every generation
the file does not cover, hence the same table after replay. A line torn by a crash was never acknowledged (an
append is acknowledged after its ``fdatasync``); replay stops a generation at its first line that is incomplete or
fails its checksum.
"""

from __future__ import annotations

import asyncio
import logging
import os
import zlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import orjson

from sievemq.store.mapped_file import fsync_dir

__all__ = ["Journal", "encode_line", "read_lines"]

log = logging.getLogger(__name__)


def encode_line(entry: Any) -> bytes:
    """One journal line for ``entry`` (a JSON value)."""
    body = orjson.dumps(entry)
    return b"%08x %s\n" % (zlib.crc32(body), body)


def read_lines(data: bytes) -> Iterator[Any]:
    """The entries of one generation's bytes, up to the first line that is incomplete or damaged."""
    pos = 0
    while True:
        end = data.find(b"\n", pos)
        if end < 0:
            return
        line = data[pos:end]
        pos = end + 1
        if len(line) < 10 or line[8:9] != b" ":
            return
        body = line[9:]
        try:
            if int(line[:8], 16) != zlib.crc32(body):
                return
            yield orjson.loads(body)
        except ValueError:
            return


class Journal:
    """The journal of one table file; appends happen in a worker thread of its own, in order."""

    def __init__(self, table_path: Path) -> None:
        self.dir = table_path.parent
        self.prefix = table_path.name + ".journal."
        self.generation = 0
        """The generation appends go to."""
        self.size = 0
        """Bytes appended since the last ``rotate`` (what the next compaction covers)."""
        self._fd: int | None = None
        self._thread_generation = 0
        """The generation the worker thread appends to (the newest rotated to, in the order of the ops)."""
        self._failed: list[bytes] = []
        """Lines whose write failed: written again before the next ones."""
        self._executor: ThreadPoolExecutor | None = None
        self._ops: list[bytes | int] = []
        """Queued for the thread: lines, and ints (rotate to that generation; a negative one: retire up to -n)."""
        self._waiters: list[asyncio.Future[None]] = []
        """Resolved by the write of the ops queued now."""
        self._inflight: list[asyncio.Future[None]] = []
        """Resolved by the write running now."""
        self._task: asyncio.Task[None] | None = None
        self._last_error: OSError | None = None

    # ------------------------------------------------------------------ load
    def generations(self) -> list[tuple[int, Path]]:
        """The generations on disk, oldest first."""
        found = []
        for p in self.dir.glob(self.prefix + "*"):
            suffix = p.name[len(self.prefix) :]
            if suffix.isdigit():
                found.append((int(suffix), p))
        return sorted(found)

    def replay(self) -> list[Any]:
        """Every entry on disk, oldest first (each generation up to its first damaged line); appends then go to a
        new generation."""
        entries: list[Any] = []
        gens = self.generations()
        for _gen, p in gens:
            data = p.read_bytes()
            before = len(entries)
            entries.extend(read_lines(data))
            if (data and not data.endswith(b"\n")) or len(entries) - before < data.count(b"\n"):
                log.warning("%s: replay stops at a damaged line after %d entries (a write cut short by a crash)",
                            p, len(entries) - before)  # fmt: skip
        self.generation = self._thread_generation = gens[-1][0] + 1 if gens else 0
        return entries

    # ------------------------------------------------------------------ appends
    def append(self, entry: Any) -> None:
        """Queue ``entry``; ``synced`` waits until it is on disk."""
        line = encode_line(entry)
        self.size += len(line)
        self._queue(line)

    def rotate(self) -> int:
        """Later entries go to a new generation; returns the last generation the entries so far are in (call
        together with taking the snapshot they lead to)."""
        covered = self.generation
        self.generation += 1
        self.size = 0
        self._queue(self.generation)
        return covered

    def retire(self, covered: int) -> None:
        """Delete the generations up to ``covered`` (a snapshot holding their entries is on disk)."""
        self._queue(-covered - 1)

    def _queue(self, op: bytes | int) -> None:
        self._ops.append(op)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (a test, a tool): at once
            self._run(self._take_ops())
            return
        if self._task is None:
            self._task = loop.create_task(self._drain(), name=f"sievemq-journal-{self.prefix}")

    async def synced(self) -> None:
        """Wait until every entry queued so far is on disk; OSError when writing it failed."""
        if self._task is None:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        (self._waiters if self._ops else self._inflight).append(fut)
        await fut

    def _take_ops(self) -> list[bytes | int]:
        ops, self._ops = self._ops, []
        return ops

    async def _drain(self) -> None:
        loop = asyncio.get_running_loop()
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sievemq-journal")
        try:
            while self._ops:
                ops = self._take_ops()
                self._inflight, self._waiters = self._waiters, []
                error: OSError | None = None
                try:
                    await loop.run_in_executor(self._executor, self._run, ops)
                except OSError as e:
                    error = e
                    log.error("cannot append to %s%d: %s", self.dir / self.prefix, self._thread_generation, e)
                waiters, self._inflight = self._inflight, []
                for w in waiters:
                    if not w.done():
                        if error is None:
                            w.set_result(None)
                        else:
                            w.set_exception(error)
                            w.exception()
        finally:
            self._task = None
            for w in self._waiters + self._inflight:  # cancelled (the loop stops): not known to be on disk
                w.cancel()
            self._waiters, self._inflight = [], []

    # ------------------------------------------------------------------ the worker thread
    def _run(self, ops: list[bytes | int]) -> None:
        """Write ``ops`` in order; a generation is synced and closed before the next one is written."""
        chunk: list[bytes] = []
        for op in ops:
            if isinstance(op, bytes):
                chunk.append(op)
                continue
            self._write(chunk)
            chunk = []
            if op >= 0:  # rotate: the current generation is complete
                self._close()
                self._thread_generation = max(self._thread_generation, op)
            else:
                self._delete_up_to(-op - 1)
        self._write(chunk)

    def _write(self, chunk: list[bytes]) -> None:
        """Append ``chunk`` (and what failed before) and sync. A failed write or sync may leave part of a line: the
        file is left as it is (replay stops there) and the lines go again, first, into the next generation."""
        chunk = self._failed + chunk
        if not chunk:
            return
        try:
            if self._fd is None:
                gen = self._thread_generation
                self._fd = os.open(self.dir / f"{self.prefix}{gen}", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
                fsync_dir(self.dir)  # the new file's name is durable before any of its entries is acknowledged
            view = memoryview(b"".join(chunk))
            while view:
                n = os.write(self._fd, view)
                view = view[n:]
            os.fdatasync(self._fd)
        except OSError:
            self._failed = chunk
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
                self._thread_generation += 1
            raise
        self._failed = []

    def _close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _delete_up_to(self, covered: int) -> None:
        removed = False
        for gen, p in self.generations():
            if gen <= covered and gen < self._thread_generation:
                p.unlink(missing_ok=True)
                removed = True
        if removed:
            fsync_dir(self.dir)

    async def close(self) -> None:
        """Wait for what is queued, then close the file and stop the thread."""
        while self._task is not None:
            await asyncio.shield(self._task)
        if self._executor is not None:
            self._executor.submit(self._close).result()
            self._executor.shutdown(wait=True)
            self._executor = None
