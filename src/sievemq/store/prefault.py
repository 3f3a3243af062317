"""Faulting the commit log's next pages in ahead of the writer, in a helper thread (``Prefaulter``).

Fresh pages of a mapping cost a page fault on first write (allocating page cache, reserving blocks);
done in the event loop's memcpy that is ~2 us per 1.2 KB record instead of ~0.8 us. A helper thread
runs ``MappedFile.prefault`` (``madvise(MADV_POPULATE_WRITE)``, bytes unchanged) a little ahead of the
write position instead. One job at a time, in chunks of half the distance; a writer that outruns it
simply faults pages itself.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor

from sievemq.store.mapped_file import MappedFile, prefault_supported
from sievemq.store.mapped_file_queue import MappedFileQueue

__all__ = ["Prefaulter"]


class Prefaulter:
    """Keeps ``ahead`` bytes past the write position of a stream faulted in (Linux >= 5.14; else idle)."""

    __slots__ = ("_executor", "_file", "_front", "_job", "ahead", "mfq")

    def __init__(self, mfq: MappedFileQueue, ahead: int) -> None:
        self.mfq = mfq
        self.ahead = ahead
        self._executor: ThreadPoolExecutor | None = None
        self._job: Future[bool] | None = None
        self._file: MappedFile | None = None
        self._front = 0

    @property
    def running(self) -> bool:
        """True while the helper thread exists."""
        return self._executor is not None

    def start(self) -> None:
        """Start the helper thread (no-op when off, unsupported or started)."""
        if self.ahead > 0 and prefault_supported() and self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sievemq-store-prefault")

    def advance(self) -> None:
        """After an append: start the next job if the faulted-in front is less than ``ahead`` away."""
        if self._executor is None:
            return
        mf = self.mfq.last
        if mf is None or (self._job is not None and not self._job.done()):
            return
        if mf is not self._file:
            self._file, self._front = mf, mf.wrote_position
        ahead = self.ahead
        end = mf.allocated  # never past the allocated blocks: faulting a hole in would allocate (or fail) there
        if self._front >= end or mf.wrote_position + ahead <= self._front:
            return
        start = max(self._front, mf.wrote_position)
        n = min(max(ahead // 2, 1 << 16), end - start)
        if n <= 0:
            return
        self._job = self._executor.submit(mf.prefault, start, n)
        self._front = start + n

    def release(self, files: Iterable[MappedFile]) -> None:
        """Before closing ``files``: wait for a job that may be touching one of them."""
        job, target = self._job, self._file
        if job is not None and target is not None and any(f is target for f in files):
            with contextlib.suppress(Exception):
                job.result(timeout=5)
            self._job = self._file = None

    def stop(self) -> None:
        """Wait for the running job and end the thread (before any mapping is closed)."""
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None
        self._job = self._file = None
