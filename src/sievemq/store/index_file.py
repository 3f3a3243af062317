"""The key index: ``topic#key`` -> commit-log offsets, as on-disk hash files (after RocketMQ ``IndexFile``).

On disk: ``<root>/index/<20-digit phy offset of the first record indexed in it>``, each file a
pre-sized mapping of ``48 + slots*4 + max_entries*24`` bytes (big-endian)::

    header  magic u32 "SIX1" | reserved u32 | beginTimestamp i64 | endTimestamp i64 |
            beginPhyOffset i64 | endPhyOffset i64 | slotCount i32 | entryCount i32
    slots   slotCount x i32: number of the newest entry whose key hashes to the slot (0 = none)
    entries entry k (k >= 1) at 48 + slots*4 + (k-1)*24:
            keyHash u32 (crc32 of "topic#key") | phyOffset i64 | storeTimestamp i64 | prevEntry i32

Entries are appended in commit-log order, so within a file and across files phy offsets grow; a
hash chain (slot -> entry -> prevEntry ...) lists a key's entries newest first. A chain may hold
other keys with the same hash: callers re-check the record. Writes go entry, slot, then header;
recovery drops entries beyond the header count and anything at or after a commit-log offset that
must be rebuilt (``truncate_from_phy``), after which the store re-indexes from the commit log.

Allocation (why: ``disk.py``): a file is ~500 MB with the default geometry, almost all of it entries, and most
files never fill up. The header and slots get their blocks when the file is created, the entry area in chunks
of ``ENTRY_CHUNK`` bytes when the next entry reaches the allocated end (``IndexFile.put`` allocates before it
writes, so a full disk raises ``OSError`` there instead of faulting); a put decides and allocates what its keys
need beforehand (``bytes_needed`` / ``prepare``), the next file included, as a spare (``next-<n>.spare``) that
takes its name when the first key goes to it.
"""

from __future__ import annotations

import mmap
import os
import struct
import sys
import zlib
from array import array
from pathlib import Path

from sievemq.protocol import accel as _accel
from sievemq.store.mapped_file import MappedFile, file_name, fsync_dir
from sievemq.store.mapped_file_queue import SPARE_SUFFIX

__all__ = ["ENTRY_CHUNK", "IndexFile", "IndexService", "key_hash"]

ENTRY_CHUNK = 4 << 20
"""Bytes of entry area allocated at a time (174762 entries): one ``fallocate`` every ~87k messages with two keys."""

_HEADER = struct.Struct(">IIqqqqii")
_HEADER_SIZE = 48
_MAGIC = 0x53495831  # "SIX1"
_SLOT = struct.Struct(">i")
_ENTRY = struct.Struct(">Iqqi")
_ENTRY_SIZE = 24
_ENTRY_PHY = struct.Struct(">q")
_ZERO_ENTRY = bytes(_ENTRY_SIZE)


def key_hash(key: str) -> int:
    """Hash of an index key (``topic#key``), unsigned 32-bit."""
    return zlib.crc32(key.encode("utf-8"))


def index_put(mm: mmap.mmap, slots: int, count: int, topic: str, keys: list[str], phys: list[int], tss: list[int],
              start: int, n: int) -> int:
    """Write ``n`` entries (``keys[start:start + n]``) after entry ``count`` of an index file's mapping and link each
    into its hash slot's chain; returns the new count. The caller made sure they fit and are allocated."""
    base = _HEADER_SIZE + slots * 4
    for i in range(start, start + n):
        h = zlib.crc32(f"{topic}#{keys[i]}".encode())
        slot_pos = _HEADER_SIZE + (h % slots) * 4
        prev = _SLOT.unpack_from(mm, slot_pos)[0]
        if prev < 0 or prev > count:
            prev = 0
        count += 1
        _ENTRY.pack_into(mm, base + (count - 1) * _ENTRY_SIZE, h, phys[i], tss[i], prev)
        _SLOT.pack_into(mm, slot_pos, count)
    return count


REFERENCE: dict[str, object] = {"index_put": index_put}
"""The pure-Python ``index_put``, kept whatever runs (the accelerator's tests compare against it)."""
_accel.install(sys.modules[__name__], REFERENCE, "init_index")


class IndexFile:
    """One hash index file."""

    __slots__ = ("begin_phy", "begin_ts", "count", "end_phy", "end_ts", "limit", "max_entries", "mf", "slots")

    def __init__(self, mf: MappedFile, slots: int, max_entries: int, *, fresh: bool) -> None:
        self.mf = mf
        if fresh:
            self.slots = slots
            self.max_entries = max_entries
            self.begin_ts = self.end_ts = 0
            self.begin_phy = self.end_phy = mf.file_from_offset
            self.count = 0
            self._write_header()
        else:
            magic, _r, bts, ets, bphy, ephy, nslots, count = _HEADER.unpack(mf.read_at(0, _HEADER_SIZE))
            if magic != _MAGIC or nslots <= 0:
                raise ValueError(f"index file {mf.path.name}: bad header")
            self.slots = nslots
            self.max_entries = (mf.file_size - _HEADER_SIZE - nslots * 4) // _ENTRY_SIZE
            self.begin_ts, self.end_ts, self.begin_phy, self.end_phy = bts, ets, bphy, ephy
            self.count = max(0, min(count, self.max_entries))
        mf.wrote_position = mf.file_size
        self.limit = 0
        """Entries that fit in the allocated blocks (at most ``max_entries``)."""
        self._allocated()

    def _allocated(self) -> None:
        fit = (self.mf.allocated - _HEADER_SIZE - self.slots * 4) // _ENTRY_SIZE
        self.limit = max(0, min(fit, self.max_entries))

    @staticmethod
    def file_size(slots: int, max_entries: int) -> int:
        """Bytes of an index file with that geometry."""
        return _HEADER_SIZE + slots * 4 + max_entries * _ENTRY_SIZE

    @staticmethod
    def first_allocation(slots: int, max_entries: int, entries: int) -> int:
        """Bytes a new file gets blocks for: header, slots and a chunk of entries (at least ``entries`` of them)."""
        size = IndexFile.file_size(slots, max_entries)
        return min(size, _HEADER_SIZE + slots * 4 + max(ENTRY_CHUNK, entries * _ENTRY_SIZE))

    def growth_for(self, n: int) -> int:
        """New bytes of blocks the next ``n`` entries need (0: already there)."""
        end = self._entry_pos(self.count + n + 1)
        have = self.mf.allocated
        return 0 if end <= have else min(self.mf.file_size, max(end, have + ENTRY_CHUNK)) - have

    def allocate_for(self, n: int) -> None:
        """Allocate what the next ``n`` entries need (``OSError`` ENOSPC, nothing changed, when it cannot)."""
        self.mf.ensure_allocated(self._entry_pos(self.count + n + 1), ENTRY_CHUNK)
        self._allocated()

    @property
    def is_full(self) -> bool:
        """No room for another entry."""
        return self.count >= self.max_entries

    def _entry_pos(self, k: int) -> int:
        return _HEADER_SIZE + self.slots * 4 + (k - 1) * _ENTRY_SIZE

    def _write_header(self) -> None:
        _HEADER.pack_into(self.mf.mm, 0, _MAGIC, 0, self.begin_ts, self.end_ts, self.begin_phy, self.end_phy,
                          self.slots, self.count)  # fmt: skip

    def entry(self, k: int) -> tuple[int, int, int, int]:
        """``(hash, phy, store_ts, prev)`` of entry ``k``."""
        h, phy, ts, prev = _ENTRY.unpack_from(self.mf.mm, self._entry_pos(k))
        return h, phy, ts, prev

    def put(self, h: int, phy: int, ts: int, *, header: bool = True) -> None:
        """Add an entry (caller checked ``is_full``); ``OSError`` (ENOSPC) before writing when it has no blocks.

        ``header=False`` leaves the header to a later ``write_header`` (a batch writes it once, at its end; a
        crash in between leaves entries past the header's count, which loading drops and recovery indexes again).
        """
        mm = self.mf.mm
        k = self.count + 1
        pos = self._entry_pos(k)
        if pos + _ENTRY_SIZE > self.mf.allocated:
            self.mf.ensure_allocated(pos + _ENTRY_SIZE, ENTRY_CHUNK)
            self._allocated()
        slot_pos = _HEADER_SIZE + (h % self.slots) * 4
        prev = _SLOT.unpack_from(mm, slot_pos)[0]
        if prev < 0 or prev > self.count:
            prev = 0
        _ENTRY.pack_into(mm, pos, h, phy, ts, prev)
        _SLOT.pack_into(mm, slot_pos, k)
        if self.count == 0:
            self.begin_ts = ts
            self.begin_phy = phy
        self.count = k
        self.end_ts = ts
        self.end_phy = phy
        if header:
            self._write_header()

    def put_keys(self, topic: str, keys: list[str], phys: list[int], tss: list[int], start: int) -> int:
        """Index ``topic#keys[i]`` for the records at ``phys[i]`` stored at ``tss[i]``, from ``start`` on, as many as
        fit this file; the header is left to ``write_header``. Returns how many it took.

        The same entries and slots as one ``put`` per key (``_codec.index_put`` is its compiled twin).
        """
        n = min(len(keys) - start, self.max_entries - self.count)
        if n <= 0:
            return 0
        end = self._entry_pos(self.count + n) + _ENTRY_SIZE
        if end > self.mf.allocated:
            self.mf.ensure_allocated(end, ENTRY_CHUNK)
            self._allocated()
        if self.count == 0:
            self.begin_ts, self.begin_phy = tss[start], phys[start]
        self.count = index_put(self.mf.mm, self.slots, self.count, topic, keys, phys, tss, start, n)
        self.end_ts, self.end_phy = tss[start + n - 1], phys[start + n - 1]
        return n

    def write_header(self) -> None:
        """Write the header (count, time and offset range) as it stands."""
        self._write_header()

    def lookup(self, h: int, begin_ts: int, end_ts: int, limit: int, out: list[int]) -> None:
        """Append to ``out`` the phy offsets of entries with hash ``h`` stored in ``[begin_ts, end_ts]``."""
        mm = self.mf.mm
        k = _SLOT.unpack(self.mf.read_at(_HEADER_SIZE + (h % self.slots) * 4, 4))[0]  # files of older versions: holes
        guard = self.count
        while 0 < k <= self.count and guard > 0 and len(out) < limit:
            eh, phy, ts, prev = _ENTRY.unpack_from(mm, self._entry_pos(k))
            if eh == h and begin_ts <= ts <= end_ts:
                out.append(phy)
            if ts < begin_ts or prev >= k:
                break
            k = prev
            guard -= 1

    # ------------------------------------------------------------------------------------------ recovery
    def truncate_to(self, keep: int) -> None:
        """Keep entries ``1..keep``; unlink later ones from their hash chains and zero them."""
        mm = self.mf.mm
        extra = range(keep + 1, self.count + 1)
        for k in extra:
            h = _ENTRY.unpack_from(mm, self._entry_pos(k))[0]
            self._fix_slot(_HEADER_SIZE + (h % self.slots) * 4, keep)
        self._fix_all_slots(keep)
        if self.count > keep:
            start = self._entry_pos(keep + 1)
            mm[start : self._entry_pos(self.count + 1)] = bytes(_ENTRY_SIZE * (self.count - keep))
        self.count = keep
        if keep:
            _h, phy, ts, _p = self.entry(keep)
            self.end_phy, self.end_ts = phy, ts
        else:
            self.begin_ts = self.end_ts = 0
            self.begin_phy = self.end_phy = self.mf.file_from_offset
        self._write_header()

    def _fix_slot(self, slot_pos: int, keep: int) -> None:
        mm = self.mf.mm
        k = _SLOT.unpack_from(mm, slot_pos)[0]
        while k > keep:
            if k > self.max_entries:
                k = 0
                break
            prev = _ENTRY.unpack_from(mm, self._entry_pos(k))[3]
            k = prev if 0 <= prev < k else 0
        _SLOT.pack_into(mm, slot_pos, max(k, 0))

    def _fix_all_slots(self, keep: int) -> None:
        """Repair slots that still point past ``keep`` (e.g. a header count that lagged a crash)."""
        raw = array("i")
        raw.frombytes(self.mf.read_at(_HEADER_SIZE, self.slots * 4))
        if sys.byteorder == "little":
            raw.byteswap()
        if not raw or (max(raw) <= keep and min(raw) >= 0):
            return
        for i, v in enumerate(raw):
            if v > keep or v < 0:
                self._fix_slot(_HEADER_SIZE + i * 4, keep)

    def first_entry_with_phy_at_least(self, phy_limit: int) -> int:
        """Number of the first entry whose phy >= ``phy_limit`` (``count + 1`` if none)."""
        lo, hi = 1, self.count + 1
        mm = self.mf.mm
        while lo < hi:
            mid = (lo + hi) // 2
            if _ENTRY_PHY.unpack_from(mm, self._entry_pos(mid) + 4)[0] >= phy_limit:
                hi = mid
            else:
                lo = mid + 1
        return lo


class IndexService:
    """All index files of a store, newest last."""

    __slots__ = ("_dirty", "_spare_seq", "_spares", "_unwritten_header", "directory", "files", "max_entries", "slots")

    def __init__(self, directory: Path, slots: int, max_entries: int) -> None:
        self.directory = directory
        self.slots = slots
        self.max_entries = max_entries
        self.files: list[IndexFile] = []
        self._dirty: dict[int, MappedFile] = {}
        """Files written since the flusher last took them (keyed by start offset)."""
        self._spares: list[MappedFile] = []
        """The next files, allocated ahead by ``prepare``; named when their first key comes."""
        self._spare_seq = 0
        self._unwritten_header: IndexFile | None = None

    def load(self) -> None:
        """Map the index files; unreadable ones are deleted (their keys get re-indexed by recovery)."""
        if not self.directory.is_dir():
            return
        size = IndexFile.file_size(self.slots, self.max_entries)
        listing = os.listdir(self.directory)
        for name in listing:
            if name.endswith(SPARE_SUFFIX):  # left by a crash; holds nothing
                (self.directory / name).unlink(missing_ok=True)
        for name in sorted(n for n in listing if len(n) == 20 and n.isdigit()):
            mf = MappedFile(self.directory / name, size)
            try:
                f = IndexFile(mf, self.slots, self.max_entries, fresh=mf.new_file)
            except ValueError:
                mf.destroy()
                continue
            self.files.append(f)
        # Entries past the header count of the last file may be torn: drop them.
        if self.files:
            last = self.files[-1]
            last.truncate_to(last.count)

    @property
    def exists(self) -> bool:
        """True if the index directory holds at least one file."""
        return bool(self.files)

    @property
    def begin_phy(self) -> int:
        """Phy offset of the oldest indexed record (or of the first file's name)."""
        return self.files[0].begin_phy if self.files else 0

    def put(self, key: str, phy: int, ts: int, *, header: bool = True) -> None:
        """Index ``key`` (already ``topic#key``) for the record at ``phy``; ``OSError`` (ENOSPC) before writing.

        ``header=False``: the file's header is written by ``finish()`` (a put's whole batch, once).
        """
        f = self.files[-1] if self.files else None
        if f is None or f.is_full:
            self.finish()
            f = self._new_file(phy)
        f.put(key_hash(key), phy, ts, header=header)
        if not header:
            self._unwritten_header = f
        self._dirty[f.mf.file_from_offset] = f.mf

    @staticmethod
    def header_count(f: IndexFile) -> int:
        """The entry count as ``f``'s header on the mapping says it (what a restart would read)."""
        return int(_HEADER.unpack_from(f.mf.mm, 0)[-1])

    def put_keys(self, topic: str, keys: list[str], phys: list[int], tss: list[int]) -> None:
        """``put(f"{topic}#{key}", phy, ts, header=False)`` for each triple, in order, for less."""
        done = 0
        while done < len(keys):
            f = self.files[-1] if self.files else None
            if f is None or f.is_full:
                self.finish()
                f = self._new_file(phys[done])
            done += f.put_keys(topic, keys, phys, tss, done)
            self._unwritten_header = f
            self._dirty[f.mf.file_from_offset] = f.mf

    def finish(self) -> None:
        """Write the header that ``put(header=False)`` left (nothing when there is none)."""
        f = self._unwritten_header
        if f is not None:
            self._unwritten_header = None
            f.write_header()

    def _new_file(self, phy: int) -> IndexFile:
        path = self.directory / file_name(phy)
        if self._spares:
            mf = self._spares.pop(0)
            mf.rename(path, phy)
        else:
            self.directory.mkdir(parents=True, exist_ok=True)
            size = IndexFile.file_size(self.slots, self.max_entries)
            mf = MappedFile(path, size, allocate=IndexFile.first_allocation(self.slots, self.max_entries, 1))
        f = IndexFile(mf, self.slots, self.max_entries, fresh=True)
        self.files.append(f)
        return f

    # ------------------------------------------------------------------------------------------ space
    def _plan(self, n: int) -> list[tuple[MappedFile | None, int]]:
        """Where ``n`` more keys go: (spare or None for a file still to create, keys in it), after the last file."""
        f = self.files[-1] if self.files else None
        if f is not None and not f.is_full:
            n -= min(n, f.max_entries - f.count)
        out: list[tuple[MappedFile | None, int]] = []
        i = 0
        while n > 0:
            k = min(n, self.max_entries)
            out.append((self._spares[i] if i < len(self._spares) else None, k))
            n -= k
            i += 1
        return out

    def room(self) -> int:
        """Keys that can be indexed now without allocating anything (0 when the last file is full or missing)."""
        if not self.files:
            return 0
        f = self.files[-1]
        return f.limit - f.count

    def bytes_needed(self, n: int) -> int:
        """New bytes of blocks indexing ``n`` more keys needs: a chunk of the last file, new files (0: none)."""
        if n <= 0:
            return 0
        f = self.files[-1] if self.files else None
        need = f.growth_for(min(n, f.max_entries - f.count)) if f is not None and not f.is_full else 0
        for spare, k in self._plan(n):
            first = IndexFile.first_allocation(self.slots, self.max_entries, k)
            need += first if spare is None else max(0, first - spare.allocated)
        return need

    def prepare(self, n: int) -> None:
        """Allocate what ``bytes_needed(n)`` counted (``OSError`` ENOSPC when it cannot; spares made so far stay)."""
        if n <= 0:
            return
        f = self.files[-1] if self.files else None
        if f is not None and not f.is_full:
            f.allocate_for(min(n, f.max_entries - f.count))
        for spare, k in self._plan(n):
            first = IndexFile.first_allocation(self.slots, self.max_entries, k)
            if spare is not None:
                spare.ensure_allocated(first, 0)
                continue
            self.directory.mkdir(parents=True, exist_ok=True)
            self._spare_seq += 1
            path = self.directory / f"next-{self._spare_seq}{SPARE_SUFFIX}"
            size = IndexFile.file_size(self.slots, self.max_entries)
            self._spares.append(MappedFile(path, size, start=0, allocate=first))

    def allocate_last(self) -> None:
        """Blocks for the last file up to its next entry (start-up: a file of an older version is sparse)."""
        f = self.files[-1] if self.files else None
        if f is not None and not f.is_full:
            f.allocate_for(1)

    def lookup(self, key: str, limit: int, begin_ts: int, end_ts: int) -> list[int]:
        """Phy offsets of records indexed under ``key`` (newest first, possibly with hash collisions)."""
        h = key_hash(key)
        out: list[int] = []
        for f in reversed(self.files):
            if len(out) >= limit:
                break
            if f.count == 0 or f.end_ts < begin_ts or f.begin_ts > end_ts:
                continue
            f.lookup(h, begin_ts, end_ts, limit, out)
        return out

    def truncate_from_phy(self, phy_limit: int) -> None:
        """Forget every entry for a record at or after ``phy_limit``."""
        while self.files:
            f = self.files[-1]
            if len(self.files) > 1 and (f.count == 0 or f.begin_phy >= phy_limit):
                self.files.pop()
                self._dirty.pop(f.mf.file_from_offset, None)
                f.mf.destroy()
                continue
            k = f.first_entry_with_phy_at_least(phy_limit)
            if k <= f.count:
                f.truncate_to(k - 1)
            break
        fsync_dir(self.directory)

    def delete_expired(self, phy_min: int) -> list[MappedFile]:
        """Detach files (never the last) whose newest entry is below ``phy_min``; returned unclosed."""
        gone: list[MappedFile] = []
        while len(self.files) > 1 and self.files[0].end_phy < phy_min:
            mf = self.files.pop(0).mf
            self._dirty.pop(mf.file_from_offset, None)
            gone.append(mf)
        return gone

    # ------------------------------------------------------------------------------------------ flushing
    def take_dirty(self) -> list[MappedFile]:
        """The files written since the last call (the flusher syncs them, then calls ``mark_flushed``)."""
        files, self._dirty = list(self._dirty.values()), {}
        return files

    def restore_dirty(self, files: list[MappedFile]) -> None:
        """A sync of ``files`` failed: hand them back for the next round (files since deleted stay out)."""
        live = {f.mf.file_from_offset: f.mf for f in self.files}
        for mf in files:
            if live.get(mf.file_from_offset) is mf:
                self._dirty.setdefault(mf.file_from_offset, mf)

    def mark_all_dirty(self) -> None:
        """Every file must be synced again (recovery rewrote entries)."""
        for f in self.files:
            self._dirty[f.mf.file_from_offset] = f.mf

    @staticmethod
    def mark_flushed(files: list[MappedFile]) -> None:
        """``files`` are on disk, their creation included."""
        for mf in files:
            mf.new_file = False

    def mapped_files(self) -> list[MappedFile]:
        """The files, oldest first."""
        return [f.mf for f in self.files]

    def close(self) -> None:
        """Unmap everything (spare files are deleted)."""
        for f in self.files:
            f.mf.close()
        for mf in self._spares:
            mf.destroy()
        self.files = []
        self._spares = []
