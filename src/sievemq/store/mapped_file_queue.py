"""An ordered run of mapped files forming one logical byte stream (RocketMQ ``MappedFileQueue``).

On disk: one directory holding files named by the 20-digit offset of their first byte, each
``file_size`` bytes (files keep their on-disk size if the configuration changed since they were
created). File ``k+1`` starts where file ``k`` ends; only the last file is partially written.
Files other than 20-digit names (temporary files, ``.bak``...) are ignored.

*Spare* files (``<20 digits>.spare``): the next files of the stream, created and allocated before a put writes
its first byte (``spare``, see ``put_space.py``), renamed to their 20-digit name when the stream reaches them
(``create_file``). They hold no data; start-up deletes any left by a crash, a clean stop deletes them.
"""

from __future__ import annotations

import bisect
import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from sievemq.store.mapped_file import MappedFile, file_name, fsync_dir

__all__ = ["SPARE_SUFFIX", "MappedFileQueue", "SyncSlice"]

SPARE_SUFFIX = ".spare"


@dataclass(slots=True)
class SyncSlice:
    """What of one stream a flush must sync: the files holding bytes in ``[flushed_offset, upto)``.

    Taken on the loop thread (``MappedFileQueue.unflushed``), synced elsewhere, then handed back with
    ``done()`` so that the queue marks itself flushed up to ``upto``.
    """

    queue: MappedFileQueue
    upto: int
    files: list[MappedFile]

    @property
    def fds(self) -> list[int]:
        """Descriptors to ``fdatasync`` (of a mapped stream; an unmapped one's files are synced by path)."""
        return [f.fd for f in self.files] if self.queue.mapped else []

    @property
    def paths(self) -> list[Path]:
        """Files of an unmapped stream (consume queues), synced by path (``flush.sync_paths``): the stream may close
        them (park) while the sync runs, and a descriptor number closed under a sync could name another file."""
        return [] if self.queue.mapped else [f.path for f in self.files]

    @property
    def creates_files(self) -> bool:
        """True when a file in the slice was created since the last flush (its directory needs an fsync)."""
        return any(f.new_file for f in self.files)

    def done(self) -> None:
        """The slice's bytes are on disk: the queue records it."""
        self.queue.mark_flushed(self.upto, self.files)

    def redirty(self) -> None:
        """Its sync failed: write the slice's bytes again (``MappedFile.redirty``) so that a later sync covers them."""
        for f in self.files:
            f.redirty(self.queue.flushed_offset - f.file_from_offset, self.upto - f.file_from_offset)


class MappedFileQueue:
    """Mapped files of one stream, ordered by start offset."""

    __slots__ = ("_directory", "_spares", "_starts", "alloc_chunk", "file_size", "files", "flushed_offset",
                 "grow_max", "mapped", "parked", "pwrite")  # fmt: skip

    def __init__(self, directory: Path | Callable[[], Path], file_size: int, alloc_chunk: int | None = None,
                 grow_max: int = 0, *, pwrite: bool = False, mapped: bool = True) -> None:  # fmt: skip
        """``alloc_chunk``: a new file gets blocks for its first ``alloc_chunk`` bytes only, and more as it fills
        (``MappedFile.grow_to``; with ``grow_max`` the step doubles up to it); None: the whole file at creation.
        ``pwrite``: the files are written with ``pwrite`` (``MappedFile.pwrite``); ``mapped`` False: they are not
        mapped at all (``MappedFile``'s ``mapped``). ``directory`` may be a function that makes the path when it is
        first needed (a store of 400,000 queues makes few of them)."""
        self._directory = directory
        self.file_size = file_size
        self.alloc_chunk = alloc_chunk
        self.grow_max = grow_max
        self.pwrite = pwrite or not mapped
        self.mapped = mapped
        self.parked = False
        """True while every file's mapping is released (``park``)."""
        self.files: list[MappedFile] = []
        self._starts: list[int] = []
        self._spares: dict[int, MappedFile] = {}
        self.flushed_offset = 0
        """Offset below which all data is known to be on disk."""

    def load(self, *, parked: bool = False) -> None:
        """Map every data file of the directory (written positions are set by the owner's recovery); ``parked``:
        look at them only (``unpark`` maps them)."""
        try:
            listing = os.listdir(self.directory)
        except (FileNotFoundError, NotADirectoryError):
            return
        for n in listing:
            if n.endswith(SPARE_SUFFIX):  # a crash left it: it holds no data
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.directory / n)
        names = sorted(n for n in listing if len(n) == 20 and n.isdigit())
        for name in names:
            mf = MappedFile(self.directory / name, self.file_size, parked=parked, mapped=self.mapped)
            mf.new_file = False
            mf.grow_chunk = self.alloc_chunk
            mf.grow_max = self.grow_max
            mf.pwrite = self.pwrite
            if self.files and self.files[-1].end_offset != mf.file_from_offset:
                # A gap (a file lost by hand?) breaks offset arithmetic: drop what came before it.
                for old in self.files:
                    old.close()
                self.files.clear()
            self.files.append(mf)
        self._starts = [f.file_from_offset for f in self.files]
        for f in self.files:
            f.wrote_position = f.file_size
            f.flushed_position = f.file_size
        if self.files:
            self.flushed_offset = self.max_offset
        self.parked = parked and bool(self.files)

    @property
    def directory(self) -> Path:
        """The stream's folder."""
        d = self._directory
        if not isinstance(d, Path):
            d = self._directory = d()
        return d

    def _folder(self) -> Path:
        return self.directory

    def restore(self, files: tuple[tuple[int, int], ...], wrote: int) -> None:
        """Know the stream's files as a clean stop left them, parked (``queue_summary.py``): ``(start, allocated)``
        of each file, ``wrote`` bytes in the last; nothing is opened."""
        n = len(files)
        for i, (start, allocated) in enumerate(files):
            self.files.append(MappedFile.known(
                self._folder, start, self.file_size, allocated,
                wrote if i == n - 1 else self.file_size, mapped=self.mapped, grow_chunk=self.alloc_chunk,
                grow_max=self.grow_max))  # fmt: skip
        self._starts = [f.file_from_offset for f in self.files]
        self.flushed_offset = self.max_offset
        self.parked = bool(self.files)

    # ------------------------------------------------------------------------------------------ access
    def __iter__(self) -> Iterator[MappedFile]:
        return iter(self.files)

    def __len__(self) -> int:
        return len(self.files)

    @property
    def last(self) -> MappedFile | None:
        """The file being written, or None when the queue is empty."""
        return self.files[-1] if self.files else None

    @property
    def first(self) -> MappedFile | None:
        """The oldest file, or None."""
        return self.files[0] if self.files else None

    @property
    def min_offset(self) -> int:
        """Start offset of the oldest file (0 when empty)."""
        return self.files[0].file_from_offset if self.files else 0

    @property
    def max_offset(self) -> int:
        """Offset one past the last written byte (0 when empty)."""
        if not self.files:
            return 0
        last = self.files[-1]
        return last.file_from_offset + last.wrote_position

    def find(self, offset: int) -> MappedFile | None:
        """The file containing ``offset`` or None if no file covers it."""
        i = bisect.bisect_right(self._starts, offset) - 1
        if i < 0:
            return None
        f = self.files[i]
        return f if offset < f.end_offset else None

    def index_of(self, offset: int) -> int:
        """Index in ``files`` of the file containing ``offset`` (clamped to the valid range)."""
        i = bisect.bisect_right(self._starts, offset) - 1
        return max(0, min(i, len(self.files) - 1))

    def create_file(self, start: int) -> MappedFile:
        """Create (and map) the next file starting at ``start``, or take its spare; it must continue the stream.

        A new file is allocated whole, or its first ``alloc_chunk`` bytes (``OSError`` ENOSPC, and nothing
        changed, when that cannot be).
        """
        if self.files and self.files[-1].end_offset != start:
            raise ValueError(f"{self.directory}: new file {start} does not follow {self.files[-1]}")
        mf = self._spares.pop(start, None)
        if mf is not None:
            mf.rename(self.directory / file_name(start), start)
        else:
            self.directory.mkdir(parents=True, exist_ok=True)
            mf = MappedFile(self.directory / file_name(start), self.file_size, allocate=self.alloc_chunk,
                            mapped=self.mapped)  # fmt: skip
            mf.grow_max = self.grow_max
            mf.pwrite = self.pwrite
        self.files.append(mf)
        self._starts.append(start)
        return mf

    def first_allocation(self, need: int = 0) -> int:
        """Bytes a new file of the stream gets blocks for at creation, when its first write needs ``need``."""
        if self.alloc_chunk is None:
            return self.file_size
        return min(self.file_size, max(self.alloc_chunk, need))

    def spare(self, start: int, need: int = 0) -> MappedFile:
        """Create and allocate now the file that will start at ``start`` (``create_file`` takes it then), with
        blocks for ``first_allocation(need)`` bytes.

        Raises ``OSError`` (ENOSPC) when the filesystem cannot hold it; nothing is left on disk then.
        """
        mf = self._spares.get(start)
        if mf is None:
            self.directory.mkdir(parents=True, exist_ok=True)
            path = self.directory / (file_name(start) + SPARE_SUFFIX)
            mf = MappedFile(path, self.file_size, start=start, allocate=self.first_allocation(need), mapped=self.mapped)
            mf.grow_chunk = self.alloc_chunk
            mf.grow_max = self.grow_max
            mf.pwrite = self.pwrite
            if self.parked:
                mf.park()
            self._spares[start] = mf
        elif need > mf.allocated:
            mf.unpark()
            mf.grow_to(need)
            if self.parked:
                mf.park()
        return mf

    def spare_allocated(self, start: int) -> int:
        """Bytes the spare for ``start`` has blocks for (0: no spare)."""
        mf = self._spares.get(start)
        return 0 if mf is None else mf.allocated

    def has_spare(self, start: int) -> bool:
        """True when the file starting at ``start`` is ready as a spare."""
        return start in self._spares

    def drop_spares(self) -> list[MappedFile]:
        """Forget the spare files (returned, still open: the caller destroys them)."""
        spares, self._spares = list(self._spares.values()), {}
        return spares

    def last_or_create(self, start_if_empty: int = 0) -> MappedFile:
        """The last file if it has room, else a new file after it (or at ``start_if_empty``)."""
        last = self.last
        if last is None:
            return self.create_file(start_if_empty)
        if last.is_full:
            return self.create_file(last.end_offset)
        return last

    # ------------------------------------------------------------------------------------------ mutation
    def set_end(self, offset: int) -> None:
        """Truncate the stream to ``offset``: set written positions, zero the tail, delete later files.

        The file containing ``offset`` keeps its bytes before it; a file starting exactly at ``offset``
        is removed unless it is the only file (so an empty stream keeps its start offset).
        """
        keep: list[MappedFile] = []
        drop: list[MappedFile] = []
        for i, f in enumerate(self.files):
            if f.end_offset <= offset:
                f.wrote_position = f.file_size
                keep.append(f)
            elif f.file_from_offset < offset or (f.file_from_offset == offset and i == 0):
                pos = offset - f.file_from_offset
                f.zero_from(pos)
                f.wrote_position = pos
                f.flushed_position = min(f.flushed_position, pos)
                keep.append(f)
            else:
                drop.append(f)
        # the newest first: a crash between two deletions leaves the files contiguous (``load`` drops everything
        # before a gap, which would be the part kept)
        for f in reversed(drop):
            f.destroy()
        removed = bool(drop)
        for spare in self.drop_spares():  # they were for a stream end that is gone
            spare.destroy()
        self.files = keep
        self._starts = [f.file_from_offset for f in keep]
        self.flushed_offset = min(self.flushed_offset, self.max_offset)
        if removed:
            fsync_dir(self.directory)

    def delete_first(self, n: int) -> list[MappedFile]:
        """Remove the ``n`` oldest files from the queue (never the last one) and return them, unclosed."""
        n = min(n, len(self.files) - 1)
        if n <= 0:
            return []
        gone = self.files[:n]
        self.files = self.files[n:]
        self._starts = self._starts[n:]
        return gone

    def unflushed(self, upto: int | None = None) -> SyncSlice:
        """The files holding bytes in ``[flushed_offset, upto)`` (``upto`` defaults to the written end)."""
        end = self.max_offset if upto is None else upto
        lo = self.flushed_offset
        out: list[MappedFile] = []
        if end > lo and self.files:
            for f in self.files[self.index_of(lo) :]:
                if f.file_from_offset >= end:
                    break
                out.append(f)
        return SyncSlice(self, end, out)

    def mark_flushed(self, upto: int, files: list[MappedFile]) -> None:
        """Record that every byte below ``upto`` (written through ``files``) is on disk."""
        for f in files:
            f.new_file = False
        if upto > self.flushed_offset:
            self.flushed_offset = upto

    def mark_unflushed_from(self, offset: int) -> None:
        """Bytes from ``offset`` on changed behind the flusher's back (recovery zeroed them): flush them again."""
        self.flushed_offset = min(self.flushed_offset, offset)

    # ------------------------------------------------------------------------------------------ parking
    @property
    def mapped_files(self) -> int:
        """Files (and spares) this stream holds mapped now."""
        return 0 if self.parked else len(self.files) + len(self._spares)

    def park(self) -> None:
        """Release every file's mapping and descriptor (``MappedFile.park``); the stream knows its files still."""
        if self.parked or not (self.files or self._spares):
            return
        for f in self.files:
            f.park()
        for f in self._spares.values():
            f.park()
        self.parked = True

    def unpark(self) -> None:
        """Map every file again; ``OSError`` (EMFILE, ENOENT...) leaves the stream parked."""
        if not self.parked:
            return
        done: list[MappedFile] = []
        try:
            for f in [*self.files, *self._spares.values()]:
                f.unpark()
                done.append(f)
        except BaseException:
            for f in done:
                f.park()
            raise
        self.parked = False

    def detach(self) -> list[MappedFile]:
        """Forget every file and spare without closing it (a sync job may still use the descriptors); returns them."""
        files, self.files, self._starts = self.files, [], []
        return files + self.drop_spares()

    def close(self) -> None:
        """Unmap every file (spare files are deleted)."""
        for f in self.files:
            f.close()
        for spare in self.drop_spares():
            spare.destroy()
        self.files = []
        self._starts = []
