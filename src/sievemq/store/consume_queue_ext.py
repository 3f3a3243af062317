"""The consume-queue extension (RocketMQ ``ConsumeQueueExt``, docs/protocol/consume-queue.md §8-§11): per-entry units.

A unit keeps what does not fit a 20-byte consume-queue (CQ) entry: the real tag code, the store
time and a filter bitmap (a Bloom filter of the SQL92 consumer groups the message matched, computed
at dispatch). When an entry has a unit, the CQ's ``tagsCode`` slot holds the unit's *address*.

On disk: ``<root>/consumequeue_ext/<topic>/<queueId>/<20-digit start offset>``, each
``mapped_file_size_cq_ext`` bytes (48 MiB by default), one logical byte stream per queue like the
consume queue itself. A unit (big-endian, struct ``>hqqh`` + bitmap)::

    offset  size  field
    0       2     unit size  = 20 + bitmap length (i16, at most 32767)
    2       8     tagsCode   (i64, the real tag hash; 0 = no tag)
    10      8     msgStoreTime (i64, ms)
    18      2     bitMapSize (i16, bytes; 0 = no bitmap)
    20      n     bitmap bytes (bit p = byte p // 8, mask 1 << (p % 8))

Units are appended back to back and never straddle files: when a unit plus 4 spare bytes does not
fit the rest of a file, a short ``-1`` is written at the current position and the unit goes to the
start of the next file. Everything after the last unit is zero, so readers (and recovery) treat a
size ``<= 0`` as the end of data.

Address: ``address = fileOffset + Long.MIN_VALUE`` where ``fileOffset`` is the unit's position in
the stream; decode by subtracting ``Long.MIN_VALUE``. Every address is ``<= -2**31 - 1`` and every
real tag code is ``>= -2**31``, so ``is_ext_address`` tells the two apart (docs/protocol/consume-queue.md §10).

Units are written in queue order, so the units of consecutive CQ entries sit at increasing addresses
(contiguous when they all have units of the same size), which ``probe_reject`` exploits to test a
whole pull window's bitmaps with numpy.
"""

from __future__ import annotations

import contextlib
import itertools
import shutil
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from sievemq.store.disk import is_no_space
from sievemq.store.mapped_file import MappedFile
from sievemq.store.mapped_file_queue import MappedFileQueue

__all__ = [
    "EXT_ADDRESS_MAX",
    "EXT_UNIT_HEAD",
    "MAX_BITMAP_LENGTH",
    "BitmapProbe",
    "ConsumeQueueExt",
    "CqExtUnit",
    "decode_address",
    "encode_address",
    "is_ext_address",
]

EXT_UNIT_HEAD = struct.Struct(">hqqh")
"""size, tagsCode, msgStoreTime, bitMapSize (20 bytes)."""
MIN_UNIT_SIZE = EXT_UNIT_HEAD.size
MAX_UNIT_SIZE = 32767
MAX_BITMAP_LENGTH = MAX_UNIT_SIZE - MIN_UNIT_SIZE
END_BLANK_LENGTH = 4
"""Bytes always left free at a file's end (room for the ``-1`` roll marker)."""
LONG_MIN = -(1 << 63)
EXT_ADDRESS_MAX = -(1 << 31) - 1
"""The largest address value (``Integer.MIN_VALUE - 1``); anything above is a tag code."""
_ROLL_MARKER = struct.pack(">h", -1)
_I16 = struct.Struct(">h")
_LOW63 = (1 << 63) - 1


def encode_address(file_offset: int) -> int:
    """The CQ slot value for a unit at stream offset ``file_offset``."""
    return file_offset + LONG_MIN


def decode_address(address: int) -> int:
    """The stream offset of the unit an address points at."""
    return address - LONG_MIN


def is_ext_address(v: int) -> bool:
    """True if a CQ tags slot holds an extension address (``v <= -2147483649``)."""
    return v <= EXT_ADDRESS_MAX


@dataclass(slots=True)
class CqExtUnit:
    """One extension unit as read back: the real tag code, store time (ms) and bitmap (b"" = none).

    Every read builds a fresh object (not frozen: that would double the cost of building one on the
    pull path); changing it changes nothing stored.
    """

    tags_code: int
    store_time: int
    bitmap: bytes = b""

    def encode(self) -> bytes:
        """The unit's bytes (see the module docstring)."""
        n = len(self.bitmap)
        if n > MAX_BITMAP_LENGTH:
            raise ValueError(f"bitmap of {n} bytes exceeds {MAX_BITMAP_LENGTH}")
        return EXT_UNIT_HEAD.pack(MIN_UNIT_SIZE + n, self.tags_code, self.store_time, n) + self.bitmap


@dataclass(frozen=True, slots=True)
class BitmapProbe:
    """A filter's bitmap test, declared up front so the store can apply it to a whole window at once.

    A unit is *rejected* when its bitmap is exactly ``len(mask)`` bytes, its store time is
    ``> born_time`` and it lacks at least one bit set in ``mask`` (docs/protocol/bloom.md §7: the group's Bloom
    positions are not all set). Units without a bitmap, of another length or stored at or before
    ``born_time`` are never rejected.
    """

    mask: bytes
    born_time: int


_U8 = npt.NDArray[np.uint8]
_BOOL = npt.NDArray[np.bool_]
_I64 = npt.NDArray[np.int64]
_DTYPES: dict[int, np.dtype[Any]] = {}


def _unit_dtype(bitmap_len: int) -> np.dtype[Any]:
    dt = _DTYPES.get(bitmap_len)
    if dt is None:
        dt = _DTYPES[bitmap_len] = np.dtype(
            [("size", ">i2"), ("tags", ">i8"), ("ts", ">i8"), ("bml", ">i2"), ("bm", "u1", (bitmap_len,))]
        )
    return dt


EXT_FIRST_ALLOCATION = 4096
"""Bytes of a new extension file that get disk blocks at its creation; more as it fills (docs/many-topics.md)."""
EXT_GROW_MAX = 1 << 20
"""The largest step by which an extension file's allocation grows (steps double up to it)."""


class ConsumeQueueExt:
    """The extension stream of one queue; written only on the event-loop thread."""

    __slots__ = ("_hot", "mfq", "next_start", "queue_id", "topic")

    def __init__(self, base: Path, topic: str, queue_id: int, file_size: int) -> None:
        """``base`` is the ``consumequeue_ext`` directory."""
        if file_size < MIN_UNIT_SIZE + END_BLANK_LENGTH:
            raise ValueError(f"consume-queue ext file size {file_size} is too small")
        self.topic = topic
        self.queue_id = queue_id
        self.mfq = MappedFileQueue(lambda: base.joinpath(topic, str(queue_id)), file_size, EXT_FIRST_ALLOCATION,
                                   EXT_GROW_MAX, pwrite=True)  # fmt: skip
        self.next_start = 0
        """Start offset of the first file when the stream is empty (moved past lost addresses)."""
        self._hot: tuple[list[MappedFile], int, int, MappedFile] | None = None
        """``(mfq.files, start, end, file)`` of the last file ``get`` used. ``MappedFileQueue`` replaces
        its ``files`` list whenever a file leaves it, so the entry is valid while the list is the same."""

    @property
    def directory(self) -> Path:
        """The queue's extension directory."""
        return self.mfq.directory

    @property
    def has_files(self) -> bool:
        """True when at least one file is mapped."""
        return bool(self.mfq.files)

    # ------------------------------------------------------------------------------------------ write
    def new_files_for(self, n: int, unit_size: int) -> list[int]:
        """Start offsets of the files that ``put``-ting ``n`` units of ``unit_size`` bytes would create."""
        mfq = self.mfq
        mf = mfq.last
        room = unit_size + END_BLANK_LENGTH
        if n <= 0 or room > mfq.file_size or (mf is not None and mf.remaining >= n * unit_size + END_BLANK_LENGTH):
            return []
        starts: list[int] = [] if mf is not None else [self.next_start]
        nxt, rem = (mf.end_offset, mf.remaining) if mf is not None else (self.next_start + mfq.file_size, mfq.file_size)
        for _ in range(n):
            if rem < room:
                starts.append(nxt)
                nxt += mfq.file_size
                rem = mfq.file_size
            rem -= unit_size
        return starts

    def put(self, tags_code: int, store_time: int, bitmap: bytes) -> int | None:
        """Append a unit; returns its address, or None when it cannot be stored (too big, no disk space)."""
        n = len(bitmap)
        size = MIN_UNIT_SIZE + n
        mfq = self.mfq
        if n > MAX_BITMAP_LENGTH or size + END_BLANK_LENGTH > mfq.file_size:
            return None
        mf = mfq.last
        try:
            if mf is None:
                mf = mfq.create_file(self.next_start)
            elif mf.remaining < size + END_BLANK_LENGTH:
                if mf.remaining >= 2:
                    mf.write_at(mf.wrote_position, _ROLL_MARKER)
                mf.wrote_position = mf.file_size
                mf = mfq.create_file(mf.end_offset)
                if mf.remaining < size + END_BLANK_LENGTH:  # a file kept a smaller on-disk size: impossible
                    return None
            pos = mf.append(EXT_UNIT_HEAD.pack(size, tags_code, store_time, n) + bitmap)
        except OSError as e:  # no space for the next file or chunk: no unit (the caller writes the plain tag code)
            if not is_no_space(e):
                raise
            return None
        return mf.file_from_offset + pos + LONG_MIN

    def bytes_to_allocate(self, unit_size: int) -> int:
        """New disk bytes ``put``-ting one unit of ``unit_size`` bytes allocates (a new file's first chunk, or the
        current file's next step); 0 when it fits in what is allocated."""
        mfq = self.mfq
        mf = mfq.last
        if mf is None or mf.remaining < unit_size + END_BLANK_LENGTH:
            return mfq.first_allocation(unit_size)
        end = mf.wrote_position + unit_size
        return 0 if end <= mf.allocated else mf.allocation_end(end) - mf.allocated

    # ------------------------------------------------------------------------------------------ read
    def get(self, address: int) -> CqExtUnit | None:
        """The unit at ``address``; None when it is not stored (deleted, past the end, not a unit)."""
        off = address - LONG_MIN
        hot = self._hot
        if hot is not None and hot[0] is self.mfq.files and hot[1] <= off < hot[2]:
            mf = hot[3]
        else:
            found = self.mfq.find(off)
            if found is None:
                return None
            mf = found
            self._hot = (self.mfq.files, mf.file_from_offset, mf.end_offset, mf)
        pos = off - mf.file_from_offset
        if pos + MIN_UNIT_SIZE > mf.wrote_position:
            return None
        size, tags, ts, n = EXT_UNIT_HEAD.unpack_from(mf.mm, pos)
        if size < MIN_UNIT_SIZE or n != size - MIN_UNIT_SIZE or pos + size > mf.wrote_position:
            return None
        return CqExtUnit(tags, ts, mf.mm[pos + MIN_UNIT_SIZE : pos + size] if n else b"")

    def unit_size_at(self, offset: int) -> int:
        """Size field of the unit at stream ``offset`` (``<= 0`` when no unit is there)."""
        mf = self.mfq.find(offset)
        if mf is None:
            return 0
        pos = offset - mf.file_from_offset
        if pos + 2 > mf.file_size:
            return 0
        return int(_I16.unpack_from(mf.mm, pos)[0])

    def probe_reject(self, addresses: _I64, probe: BitmapProbe) -> _BOOL:
        """For each address (in queue order, so non-decreasing), True if ``probe`` rejects its unit.

        Unreadable units are not rejected. Units that sit back to back with the probe's bitmap length
        (the normal case) are tested with one structured numpy view per file; anything else falls back
        to unit-by-unit decoding.
        """
        k = len(addresses)
        out = np.zeros(k, dtype=np.bool_)
        mfq = self.mfq
        if not k or not mfq.files:
            return out
        offs = addresses & _LOW63  # == address - Long.MIN_VALUE for every address value
        first = mfq.find(int(offs[0]))
        if first is not None and first is mfq.find(int(offs[-1])):
            self._reject_in_file(first, offs, probe, out)
            return out
        starts = np.fromiter((f.file_from_offset for f in mfq.files), dtype=np.int64, count=len(mfq.files))
        idx = np.searchsorted(starts, offs, side="right") - 1
        cuts = np.flatnonzero(np.diff(idx)) + 1
        bounds = [0, *cuts.tolist(), k]
        for a, b in itertools.pairwise(bounds):
            i = int(idx[a])
            if i < 0:
                continue  # below the oldest file: deleted units never reject
            mf = mfq.files[i]
            if int(offs[a]) >= mf.end_offset:
                continue
            self._reject_in_file(mf, offs[a:b], probe, out[a:b])
        return out

    @staticmethod
    def _reject_in_file(mf: MappedFile, offs: _I64, probe: BitmapProbe, out: _BOOL) -> None:
        mask = probe.mask
        n = len(mask)
        size = MIN_UNIT_SIZE + n
        k = len(offs)
        lo = int(offs[0]) - mf.file_from_offset
        end = lo + k * size
        if lo < 0 or end > mf.wrote_position or (k > 1 and not bool((np.diff(offs) == size).all())):
            _reject_slow(mf, offs, probe, out)
            return
        rec = np.frombuffer(mf.mm[lo:end], dtype=_unit_dtype(n), count=k)
        ok = (rec["size"] == size) & (rec["bml"] == n) & (rec["ts"] > probe.born_time)
        cols = [j for j, b in enumerate(mask) if b]
        if not cols:
            return
        m = np.frombuffer(bytes(mask[j] for j in cols), dtype=np.uint8)
        sub = rec["bm"][:, cols]
        out |= ok & ~((sub & m) == m).all(axis=1)

    # ------------------------------------------------------------------------------------------ truncation
    def load(self, *, parked: bool = False) -> None:
        """Map the queue's files (the end of data is set by ``truncate_by_max_address``); ``parked``: see
        ``MappedFileQueue.load``."""
        self.mfq.load(parked=parked)
        self._hot = None

    def data_end(self) -> int:
        """Stream offset after the last unit, found by walking the last file (size ``<= 0`` = end)."""
        mf = self.mfq.last
        if mf is None:
            return self.next_start
        mm = mf.mm
        pos = 0
        limit = min(mf.file_size, mf.allocated)  # past it: a hole, zeros
        while pos + MIN_UNIT_SIZE <= limit:
            size, _t, _s, n = EXT_UNIT_HEAD.unpack_from(mm, pos)
            if size < MIN_UNIT_SIZE or n != size - MIN_UNIT_SIZE or pos + size > limit:
                break
            pos += size
        return mf.file_from_offset + pos

    def truncate_by_max_address(self, address: int | None) -> None:
        """Keep units up to and including the one at ``address``; drop everything after it.

        ``None`` (no CQ entry references a unit) empties the stream. An address past every mapped file
        (its unit was lost) keeps the files and makes a new stream start after it.
        """
        mfq = self.mfq
        if address is None:
            if mfq.files:
                mfq.set_end(mfq.min_offset)
            return
        off = decode_address(address)
        if not mfq.files or off >= mfq.files[-1].end_offset:
            if not mfq.files:
                self.next_start = max(self.next_start, (off // mfq.file_size + 1) * mfq.file_size)
            return
        if off < mfq.min_offset:
            mfq.set_end(mfq.min_offset)
            return
        size = self.unit_size_at(off)
        mf = mfq.find(off)
        assert mf is not None
        pos = off - mf.file_from_offset
        ok = size >= MIN_UNIT_SIZE and pos + size <= mf.file_size
        mfq.set_end(off + size if ok else off)

    def delete_below(self, address: int | None) -> list[MappedFile]:
        """Detach files wholly below ``address`` (None: below the data end), never the last file."""
        mfq = self.mfq
        if not mfq.files:
            return []
        limit = mfq.max_offset if address is None else decode_address(address)
        n = 0
        for mf in mfq.files[:-1]:
            if mf.end_offset > limit:
                break
            n += 1
        return mfq.delete_first(n)

    def close(self) -> None:
        """Unmap the files."""
        self.mfq.close()

    def destroy(self) -> None:
        """Unmap and delete the queue's extension directory."""
        self.mfq.close()
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(self.directory)


def _reject_slow(mf: MappedFile, offs: _I64, probe: BitmapProbe, out: _BOOL) -> None:
    """Unit-by-unit version of the probe (units of mixed sizes, or partly unreadable)."""
    mask = int.from_bytes(probe.mask, "little")
    n = len(probe.mask)
    size = MIN_UNIT_SIZE + n
    born = probe.born_time
    mm = mf.mm
    base = mf.file_from_offset
    wrote = mf.wrote_position
    unpack = EXT_UNIT_HEAD.unpack_from
    for j, off in enumerate(offs.tolist()):
        pos = off - base
        if pos < 0 or pos + size > wrote:
            continue
        usize, _tags, ts, bml = unpack(mm, pos)
        if usize == size and bml == n and ts > born:
            bm = int.from_bytes(mm[pos + MIN_UNIT_SIZE : pos + size], "little")
            if bm & mask != mask:
                out[j] = True
