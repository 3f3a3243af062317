"""The broker's JSON files (topics, groups, offsets, filters, delay progress), written off the event loop.

Serialising a table and fsyncing it takes milliseconds, too long for the event loop that serves every client.
The managers build the document to write (a fresh object, safe to hand to another thread) and call ``save``;
one worker thread writes it with ``atomic_write_json`` (``store/jsonfile.py``: tmp file, fsync, rename, ``.bak``).
Writes of one file happen in order and coalesce: while a write runs, only the newest pending document of that
file is kept, so a burst of changes costs at most two writes. ``write`` waits until a document (or a newer
one) is on disk, for requests whose answer promises durability; ``settled`` waits until what was saved so far is.

A large table (100,000 topics) uses ``save_lazy``: it passes a function that snapshots the table, called on the
loop once per actual write however many changes came meanwhile, and returns the encoder the worker thread runs
(docs/topic-table.md).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sievemq.store.jsonfile import atomic_write_bytes, atomic_write_json

__all__ = ["ConfigWriter", "Encode", "Snapshot"]

Encode = Callable[[], bytes]
"""Runs in the worker thread: the bytes of a snapshot taken on the loop."""
Snapshot = Callable[[], Encode]
"""Runs on the loop right before a write: takes a consistent snapshot (cheap: a shallow copy) and returns its
encoder."""

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class _Lazy:
    take: Snapshot
    written: Callable[[Encode, OSError | None], None] | None


def _write(path: Path, document: Any) -> None:
    if callable(document):
        atomic_write_bytes(path, document())
    else:
        atomic_write_json(path, document)


@dataclass
class _File:
    pending: Any = None
    has_pending: bool = False
    waiters: list[asyncio.Future[None]] = field(default_factory=list)
    """Resolved by the write of ``pending``."""
    inflight: list[asyncio.Future[None]] = field(default_factory=list)
    """Resolved by the write running now."""
    writer: asyncio.Task[None] | None = None


class ConfigWriter:
    """Writes JSON documents to files in a worker thread; see the module docstring."""

    def __init__(self) -> None:
        self._files: dict[Path, _File] = {}
        self._executor: ThreadPoolExecutor | None = None

    def save(self, path: Path, document: Any) -> None:
        """Write ``document`` to ``path`` soon (on the loop: in the worker thread; without a loop: now)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            atomic_write_json(path, document)
            return
        self._enqueue(path, document)

    def save_lazy(
        self, path: Path, take: Snapshot, written: Callable[[Encode, OSError | None], None] | None = None
    ) -> None:
        """Write ``path`` soon with what ``take`` snapshots, taken when the write starts (on the loop), encoded in
        the worker thread; without a loop: now. ``written(encoder, error)`` is called on the loop after each write
        of such a snapshot (``error`` None: it is on disk)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            encode = take()
            atomic_write_bytes(path, encode())
            if written is not None:
                written(encode, None)
            return
        self._enqueue(path, _Lazy(take, written))

    async def write(self, path: Path, document: Any) -> None:
        """Write ``document`` to ``path`` and wait until it (or a newer document) is on disk; OSError on failure."""
        await self._enqueue(path, document)

    async def settled(self, path: Path) -> None:
        """Wait until every document saved to ``path`` so far is on disk (at once if none is pending); OSError
        when that write failed."""
        f = self._files.get(path)
        if f is None or f.writer is None:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        (f.waiters if f.has_pending else f.inflight).append(fut)
        await fut

    def _enqueue(self, path: Path, document: Any) -> asyncio.Future[None]:
        loop = asyncio.get_running_loop()
        f = self._files.setdefault(path, _File())
        f.pending, f.has_pending = document, True
        fut: asyncio.Future[None] = loop.create_future()
        f.waiters.append(fut)
        if f.writer is None:
            f.writer = loop.create_task(self._drain(path, f), name=f"sievemq-write-{path.name}")
        return fut

    async def _drain(self, path: Path, f: _File) -> None:
        loop = asyncio.get_running_loop()
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sievemq-config-files")
        try:
            while f.has_pending:
                document, waiters = f.pending, f.waiters
                f.pending, f.has_pending, f.waiters, f.inflight = None, False, [], waiters
                error: OSError | None = None
                lazy = document if isinstance(document, _Lazy) else None
                try:
                    if lazy is not None:
                        document = lazy.take()
                    await loop.run_in_executor(self._executor, _write, path, document)
                except OSError as e:
                    error = e
                    log.error("cannot write %s: %s", path, e)
                except Exception as e:  # a snapshot that does not encode: a bug, said, and the waiters told
                    error = OSError(f"cannot encode {path.name}: {type(e).__name__}: {e}")
                    log.exception("cannot encode %s", path)
                if lazy is not None and lazy.written is not None and callable(document):
                    lazy.written(document, error)
                for w in waiters:
                    if w.done():
                        continue
                    if error is None:
                        w.set_result(None)
                    else:
                        w.set_exception(error)
                        w.exception()  # nobody may be waiting: the error is logged above
        finally:
            f.writer, f.inflight = None, []

    async def flush(self) -> None:
        """Wait until every document saved so far is written."""
        while writers := [f.writer for f in self._files.values() if f.writer is not None]:
            await asyncio.gather(*writers, return_exceptions=True)

    async def close(self) -> None:
        """Flush, then stop the worker thread (``save`` writes synchronously afterwards only without a loop)."""
        await self.flush()
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None
