"""One memory-mapped, fixed-size data file (RocketMQ ``MappedFile``).

On disk: a regular file named by the 20-digit decimal offset of its first byte in the logical stream
it belongs to (commit log bytes, consume-queue bytes). It is created at its full size with
``ftruncate`` and mapped ``MAP_SHARED`` read/write; then ``allocate`` bytes from its start get real
blocks (``disk.allocate``: the whole file unless told otherwise), so that writing them through the
mapping can never fault for lack of space (SIGBUS). ``allocated`` is how far the file is known to hold
blocks; a write past it allocates first (``ensure_allocated``) and fails with ``OSError`` (ENOSPC) rather
than fault. For a file found on disk (an older sievemq created them sparse) it is the start of the first hole
(``SEEK_HOLE``). Reads must not fault either: on tmpfs even a read fault on a hole allocates a page, so scans
that may run past the data (recovery's) stop at ``allocated`` -- what lies beyond it is a hole, i.e. zeros --
and ``read_at`` reads beyond it with ``pread``. Data is written strictly sequentially from position 0;
everything after the written position is zero, which is how readers detect the end of data after a restart
(size 0 / bad magic).

Threading: the mapping is only written on the event-loop thread. ``sync_fd`` (``fdatasync``; on Linux
this also writes back pages dirtied through the mapping, exactly like ``msync(MS_SYNC)``) releases the
GIL and is what flushers run in an executor; ``mmap.flush`` would hold the GIL for the whole msync.

``MappedFile.prefault`` (Linux >= 5.14: ``madvise(MADV_POPULATE_WRITE)`` through ctypes, which releases the
GIL) faults a range of the mapping in for writing without changing its bytes. The store runs it in a helper
thread just ahead of the commit log's write position, so the page faults of fresh pages (allocating page
cache, reserving blocks) happen there instead of in the event loop's memcpy: appending a 1.2 KB record to
fresh pages cost the loop 2.8 us with the faults and 0.8 us without.

Growth: a file created with ``allocate`` gets blocks for that many bytes first; a write past ``allocated``
allocates ``grow_chunk`` more (``grow_max`` set: the step doubles with what the file holds, up to ``grow_max``),
so a consume-queue file that holds 20 entries takes 4 KB of disk, not its 6 MB (docs/many-topics.md).

Writing: through the mapping, or with ``pwrite`` (``pwrite``, set for extension files): the first write fault on a
page of a freshly allocated file costs ext4 about a millisecond (a page that is not in the page cache yet, in an
unwritten extent), a ``pwrite`` there 3-6 us; both go through the same page cache, so readers of the mapping see what
``pwrite`` wrote. *Unmapped* files (``mapped=False``: consume-queue files) have no mapping at all: ``read`` is a
``pread`` (a mapping's first read fault cost 50 us where ``pread`` of the same page cost 1.5 us), writes are
``pwrite``; such a file costs one descriptor and no ``vm.max_map_count`` entry. A store with 100,000 topics opens
400,000 of them one after the other at start-up.

Parking (``park`` / ``unpark``): a file's mapping and descriptor can be released while the object keeps what it
knows (positions, allocation) and taken again later; ``MappedFile.open_files`` counts the files open in the process,
which is what the store bounds (a mapping is one of Linux's ``vm.max_map_count`` and two descriptors: Python's
``mmap`` keeps a ``dup``).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import mmap
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sievemq.store.disk import allocate as allocate_blocks
from sievemq.store.disk import is_allocated

__all__ = ["MappedFile", "file_name", "fsync_dir", "prefault_supported", "sync_fd"]

_ZERO_CHUNK = bytes(1 << 16)


_MADV_POPULATE_WRITE = 23
_madvise: Any = None
if sys.platform.startswith("linux"):
    with contextlib.suppress(OSError, AttributeError):
        _madvise = ctypes.CDLL(None, use_errno=True).madvise
        _madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
        _madvise.restype = ctypes.c_int


def prefault_supported() -> bool:
    """True while ``MappedFile.prefault`` can work here (Linux; switched off after the kernel refuses it)."""
    return _madvise is not None


def file_name(offset: int) -> str:
    """The 20-digit zero-padded file name for a start offset."""
    return f"{offset:020d}"


def sync_fd(fd: int) -> None:
    """``fdatasync`` (``fsync`` where unavailable); tolerates a descriptor closed concurrently."""
    try:
        if hasattr(os, "fdatasync"):
            os.fdatasync(fd)
        else:  # pragma: no cover - non-Linux
            os.fsync(fd)
    except OSError as e:  # pragma: no cover - only on a close race, which callers avoid
        if e.errno != errno.EBADF:
            raise


def fsync_dir(path: Path, *, strict: bool = False) -> None:
    """fsync a directory so that file creations/renames/unlinks in it are durable (``strict``: raise on EIO)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    except OSError as e:  # some filesystems refuse fsync on directories; a real failure (EIO) counts if strict
        if strict and e.errno not in (errno.EINVAL, errno.EOPNOTSUPP, errno.EBADF):
            raise
    finally:
        os.close(fd)


def _pwrite_all(fd: int, data: bytes | bytearray | memoryview, pos: int) -> None:
    """``pwrite`` every byte of ``data`` at ``pos`` (a regular file writes them all at once; a short write goes on)."""
    n = os.pwrite(fd, data, pos)
    while n < len(data):
        n += os.pwrite(fd, memoryview(data)[n:], pos + n)


def _first_hole(fd: int, size: int) -> int:
    """Offset of the first hole (page-aligned, at most ``size``); 0 when the system cannot say."""
    try:
        return min(size, os.lseek(fd, 0, os.SEEK_HOLE) // mmap.PAGESIZE * mmap.PAGESIZE)
    except (OSError, AttributeError):
        return 0


class MappedFile:
    """A fixed-size file mapped in memory; ``wrote_position`` is the end of valid data in it."""

    __slots__ = ("_addr", "_closed", "_dir", "_path", "allocated", "fd", "file_from_offset", "file_size",
                 "flushed_position", "grow_chunk", "grow_max", "mapped", "mm", "new_file", "parked", "pwrite",
                 "wrote_position")  # fmt: skip

    open_files = 0
    """Store files open in this process now (created or unparked, not yet closed or parked), mapped or not."""

    def __init__(self, path: Path, file_size: int, *, start: int | None = None, allocate: int | None = None,
                 parked: bool = False, mapped: bool = True) -> None:  # fmt: skip
        """Open (creating and pre-sizing if needed) ``path``; its name is the start offset unless ``start`` is given.

        A file created here gets blocks for its first ``allocate`` bytes (None: all of them); when that fails
        (``OSError``, ENOSPC) nothing is left on disk. ``parked``: an existing file is looked at (size, blocks) and
        left closed (``unpark`` opens it). ``mapped`` False: no mapping at all; reads use ``pread``, writes ``pwrite``
        (no ``mm``).
        """
        self._path: Path | None = path
        self._dir: Callable[[], Path] | None = None
        self.file_from_offset = int(path.name) if start is None else start
        if parked and self._look(path, file_size, mapped, allocate):
            return
        existed = path.exists()
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            if size < file_size:
                # New file, or one cut short (a crash before it was sized, a partial copy): the missing
                # tail reads as zeros, i.e. as "no data yet". A bigger file keeps its size.
                os.ftruncate(fd, file_size)
                size = file_size
            if existed:
                self.allocated = size if is_allocated(fd, size) else _first_hole(fd, size)
            else:
                self.allocated = size if allocate is None else min(size, allocate)
                allocate_blocks(fd, 0, self.allocated)
            if mapped and not (parked and existed):
                self.mm = mmap.mmap(fd, size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(fd)
            if not existed:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
            raise
        self.fd = fd
        self.grow_chunk = allocate
        """How much more a write past ``allocated`` allocates at once (None: up to the file's end)."""
        self.grow_max = 0
        """When set, the step doubles with ``allocated`` up to this many bytes (``allocation_end``)."""
        self.parked = parked and existed
        self.mapped = mapped
        self.pwrite = not mapped
        """Write with ``pwrite(2)`` instead of through the mapping (``write_at``, ``append``): see the module
        docstring."""
        if self.parked:
            os.close(fd)
            self.fd = -1
        else:
            MappedFile.open_files += 1
        self.file_size = size
        self.wrote_position = 0
        self.flushed_position = 0
        self.new_file = not existed
        self._closed = False
        self._addr = 0

    def _look(self, path: Path, file_size: int, mapped: bool, allocate: int | None) -> bool:
        """A parked file found on disk, looked at with one ``stat`` (start-up does it for 400,000 files); False when
        it must be opened (missing, or shorter than ``file_size``). Where its blocks end is found when it is opened
        (``unpark``) unless every byte has blocks."""
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return False
        if st.st_size < file_size:
            return False
        size = st.st_size
        self._closed_state(size, size if st.st_blocks * 512 >= size else -1, 0, mapped, allocate, 0)
        return True

    def _closed_state(self, file_size: int, allocated: int, wrote: int, mapped: bool, grow_chunk: int | None,
                      grow_max: int) -> None:  # fmt: skip
        """Everything a parked file knows, for one that was never opened here (``_look``, ``known``)."""
        self.file_size = file_size
        self.allocated = allocated
        self.wrote_position = self.flushed_position = wrote
        self.fd = -1
        self.grow_chunk = grow_chunk
        self.grow_max = grow_max
        self.parked = True
        self.mapped = mapped
        self.pwrite = not mapped
        self.new_file = False
        self._closed = False
        self._addr = 0

    @property
    def path(self) -> Path:
        """The file's path (for a file a clean stop's summary gave, made when first asked for)."""
        path = self._path
        if path is None:
            assert self._dir is not None
            path = self._path = self._dir() / file_name(self.file_from_offset)
        return path

    @classmethod
    def known(cls, directory: Callable[[], Path], start: int, file_size: int, allocated: int, wrote: int, *,
              mapped: bool, grow_chunk: int | None, grow_max: int) -> MappedFile:  # fmt: skip
        """A parked file as a clean stop left it (``queue_summary.py``): nothing is opened, not even its path made
        (``directory()`` gives its folder when it is first needed: 400,000 paths cost seconds)."""
        mf = cls.__new__(cls)
        mf._path = None
        mf._dir = directory
        mf.file_from_offset = start
        mf._closed_state(file_size, allocated, wrote, mapped, grow_chunk, grow_max)
        return mf

    def prefault(self, pos: int, length: int) -> bool:
        """Fault the whole pages of ``[pos, pos + length)`` in for writing, bytes unchanged; False if not
        possible (any thread).

        A page holding bytes before ``pos`` is left alone: it was written already, and a write fault on it
        after its fsync would mark it dirty again (same bytes, but a second write-back, and a SYNC_FLUSH reply
        whose page looks unsynced). The caller keeps the file open until this returns (the store waits for its
        prefault job before closing files).
        """
        global _madvise
        if _madvise is None or self._closed or self.parked or not self.mapped:
            return False
        if not self._addr:
            view = ctypes.c_char.from_buffer(self.mm)  # a buffer export: released at once, the address stays
            self._addr = ctypes.addressof(view)
            del view
        page = mmap.PAGESIZE
        start = -(-max(0, pos) // page) * page  # the first page boundary at or after pos
        end = min(self.file_size, pos + length)
        if end <= start:
            return True
        if _madvise(self._addr + start, end - start, _MADV_POPULATE_WRITE) != 0:
            if ctypes.get_errno() == errno.EINVAL:  # kernel older than 5.14: stop trying
                _madvise = None
            return False
        return True

    # ------------------------------------------------------------------------------------------ state
    @property
    def end_offset(self) -> int:
        """Logical offset one past the last byte of this file."""
        return self.file_from_offset + self.file_size

    @property
    def remaining(self) -> int:
        """Free bytes after the written position."""
        return self.file_size - self.wrote_position

    @property
    def is_full(self) -> bool:
        """True when nothing more can be written."""
        return self.wrote_position >= self.file_size

    @property
    def closed(self) -> bool:
        """True after ``close``."""
        return self._closed

    # ------------------------------------------------------------------------------------------ I/O
    def allocation_end(self, upto: int) -> int:
        """Where ``allocated`` ends once a write up to ``upto`` grew it by the file's own step (``grow_chunk``,
        doubling up to ``grow_max`` when set; the file's end without a chunk); ``allocated`` when no growth."""
        if upto <= self.allocated:
            return self.allocated
        chunk = self.grow_chunk
        if chunk is None:
            return self.file_size
        if self.grow_max:
            chunk = max(chunk, min(self.allocated, self.grow_max))
        end = max(upto, self.allocated + chunk)
        return min(self.file_size, -(-end // mmap.PAGESIZE) * mmap.PAGESIZE)

    def ensure_allocated(self, upto: int, chunk: int | None = None) -> None:
        """Blocks for every byte below ``upto``: when some are missing, up to the file's end (``chunk`` None) or
        up to ``max(upto, allocated + chunk)``.

        Raises ``OSError`` (ENOSPC) with nothing changed when the filesystem cannot give them.
        """
        if upto <= self.allocated:
            return
        end = self.file_size if chunk is None else min(self.file_size, max(upto, self.allocated + chunk))
        allocate_blocks(self.fd, self.allocated, end - self.allocated)
        self.allocated = end

    def grow_to(self, upto: int) -> None:
        """``ensure_allocated`` by the file's own step (``allocation_end``); ``OSError`` ENOSPC, nothing changed."""
        if upto > self.allocated:
            end = self.allocation_end(upto)
            allocate_blocks(self.fd, self.allocated, end - self.allocated)
            self.allocated = end

    def write_at(self, pos: int, data: bytes | bytearray | memoryview) -> None:
        """Copy ``data`` into the mapping at file position ``pos`` (does not move ``wrote_position``)."""
        if pos + len(data) > self.allocated:
            self.grow_to(pos + len(data))
        if self.pwrite:
            _pwrite_all(self.fd, data, pos)
        else:
            self.mm[pos : pos + len(data)] = data

    def append(self, data: bytes | bytearray | memoryview) -> int:
        """Write ``data`` at the written position; returns the file position it was written at."""
        pos = self.wrote_position
        n = len(data)
        if pos + n > self.file_size:
            raise ValueError(f"{self.path.name}: append of {n} bytes at {pos} exceeds {self.file_size}")
        if pos + n > self.allocated:  # allocate (a chunk more, or to the end) or raise, never fault
            self.grow_to(pos + n)
        if self.pwrite:
            _pwrite_all(self.fd, data, pos)
        else:
            self.mm[pos : pos + n] = data
        self.wrote_position = pos + n
        return pos

    def read(self, pos: int, size: int) -> bytes:
        """A copy of ``size`` bytes at file position ``pos``."""
        return self.mm[pos : pos + size] if self.mapped else os.pread(self.fd, size, pos)

    def read_at(self, pos: int, size: int) -> bytes:
        """``read``, but past ``allocated`` (where there may be holes) with ``pread``, which never faults."""
        if self.mapped and pos + size <= self.allocated:
            return self.mm[pos : pos + size]
        return os.pread(self.fd, size, pos)

    def sync(self) -> None:
        """Force the file's data to disk (blocking; call from an executor on hot paths)."""
        if not self._closed and not self.parked:
            sync_fd(self.fd)

    def redirty(self, pos: int, end: int) -> None:
        """Write ``[pos, end)`` again with the same bytes (loop thread), so that the next sync writes it out again.

        After a failed sync the kernel may have marked those pages clean although they are not on disk; a later
        sync that succeeds would then prove nothing about them.
        """
        pos, end = max(0, pos), min(end, self.wrote_position, self.allocated)
        if end > pos and not self._closed and not self.parked:
            if self.mapped:
                self.mm[pos:end] = self.mm[pos:end]
            else:
                _pwrite_all(self.fd, os.pread(self.fd, end - pos, pos), pos)

    def rename(self, path: Path, start: int) -> None:
        """Give the file its final name (a spare file joining its stream); the mapping stays as it is."""
        os.rename(self.path, path)
        self._path = path
        self.file_from_offset = start

    def zero_from(self, pos: int) -> None:
        """Zero everything from ``pos`` to the end of the file, skipping holes (used by truncation)."""
        end = self.file_size
        ranges: list[tuple[int, int]] = []
        try:
            cur = pos
            while cur < end:
                data = os.lseek(self.fd, cur, os.SEEK_DATA)
                if data >= end:
                    break
                hole = min(os.lseek(self.fd, data, os.SEEK_HOLE), end)
                ranges.append((max(data, pos), hole))
                cur = hole
        except OSError as e:
            if e.errno == errno.ENXIO:  # no more data after cur
                pass
            else:  # SEEK_DATA unsupported: zero the whole range
                ranges = [(pos, end)]
        except AttributeError:  # pragma: no cover - platform without SEEK_DATA
            ranges = [(pos, end)]
        for a, b in ranges:
            p = a
            while p < b:
                q = min(b, p + len(_ZERO_CHUNK))
                chunk = self.read(p, q - p)
                if chunk.count(0) != len(chunk):  # (no copy of the zeros to compare with)
                    if self.mapped:
                        self.mm[p:q] = _ZERO_CHUNK[: q - p]
                    else:
                        _pwrite_all(self.fd, _ZERO_CHUNK[: q - p], p)
                p = q

    def park(self) -> None:
        """Release the mapping and the descriptor, keeping positions and allocation (``unpark`` takes them again).

        The caller parks only files whose bytes are on disk or in the page cache (a parked file is never synced).
        """
        if self._closed or self.parked:
            return
        self.parked = True
        MappedFile.open_files -= 1
        if self.mapped:
            with contextlib.suppress(BufferError):  # a caller still holds a view: let GC unmap it
                self.mm.close()
            del self.mm
        os.close(self.fd)
        self.fd = -1
        self._addr = 0

    def unpark(self) -> None:
        """Map the file again after ``park`` (``OSError`` when it cannot be opened: it was deleted, EMFILE...)."""
        if not self.parked or self._closed:
            return
        fd = os.open(self.path, os.O_RDWR)
        if self.allocated < 0:  # found on disk with holes (``_look``): its blocks end at the first one
            self.allocated = _first_hole(fd, self.file_size)
        if self.mapped:
            try:
                self.mm = mmap.mmap(fd, self.file_size, flags=mmap.MAP_SHARED,
                                    prot=mmap.PROT_READ | mmap.PROT_WRITE)  # fmt: skip
            except BaseException:
                os.close(fd)
                raise
        self.fd = fd
        self.parked = False
        MappedFile.open_files += 1

    def close(self) -> None:
        """Unmap and close the descriptor (idempotent)."""
        if self._closed:
            return
        self._closed = True
        if self.parked:
            return
        MappedFile.open_files -= 1
        if self.mapped:
            with contextlib.suppress(BufferError):  # a caller still holds a view: let GC unmap it
                self.mm.close()
        os.close(self.fd)

    def destroy(self) -> None:
        """Close and unlink the file."""
        self.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)

    def mtime(self) -> float:
        """Last-modified time of the file (seconds since the epoch)."""
        try:
            return os.stat(self.path).st_mtime
        except FileNotFoundError:
            return 0.0

    def __repr__(self) -> str:
        return f"MappedFile({self.path.name}, wrote={self.wrote_position}, size={self.file_size})"
