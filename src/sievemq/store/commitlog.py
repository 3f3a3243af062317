"""The commit log: every stored message record, back to back, in segment files (RocketMQ ``CommitLog``).

On disk: ``<root>/commitlog/<20-digit start offset>``, each ``commitlog_file_size`` bytes. A segment
holds whole records (docs/protocol/message-format.md §1 layout, magic ``0xDAA320A7``) from position 0; a record never
straddles two segments. When the next record (plus 8 spare bytes) does not fit in the rest of a
segment, a blank end-of-file marker is written there -- TOTALSIZE = bytes remaining, MAGICCODE
``0xCBD43194`` -- and writing continues at the start of the next segment. After the last record the
file is zero (pre-sized and allocated, see ``mapped_file.py``), so end of data is "TOTALSIZE 0 / bad magic".

A record's physical offset (the 8 bytes at record offset 28) equals its position in the stream;
recovery uses that, the lengths adding up to TOTALSIZE and (after an unclean stop) the body CRC to
find the first torn record.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from pathlib import Path

from sievemq.protocol.message import BLANK_MAGIC, MAGIC_V1, RecordSummary, read_record_summary
from sievemq.protocol.sysflag import BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG
from sievemq.store.mapped_file import MappedFile
from sievemq.store.mapped_file_queue import MappedFileQueue

__all__ = ["END_FILE_MIN_BLANK_LENGTH", "CommitLog"]

END_FILE_MIN_BLANK_LENGTH = 8
ALLOCATION_CHUNK = 64 * 1024 * 1024
"""A segment gets blocks this many bytes at a time as it fills (the whole segment when it is smaller), so a store
takes about the disk space of its data, not of its segments. Larger than a frame: one put never needs two chunks
of a new segment."""
"""Room always left at a segment's end for the blank marker (TOTALSIZE + MAGICCODE)."""

_SIZE_MAGIC = struct.Struct(">iI")
_HEAD = struct.Struct(">iIiiiqqiq")  # total, magic, crc, qid, flag, qoff, phy, sysflag, born_ts (48 bytes)
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_PHY_POS = 28
_MIN_RECORD = 91

_BLANK = -1
_END = 0


def _store_ts_pos(sys_flag: int) -> int:
    return 68 if sys_flag & BORNHOST_V6_FLAG else 56


def check_record(buf: MappedFile, pos: int, expect_phy: int, check_crc: bool) -> int:
    """Validate the record at file position ``pos`` of ``buf``.

    Returns its total size (> 0), ``-1`` for a blank end-of-file marker, or ``0`` when the bytes
    there are not a whole valid record (end of data, torn write, CRC mismatch). Nothing past the file's
    ``allocated`` end is read: that is a hole, zeros (see ``mapped_file.py``).
    """
    mm = buf.mm
    limit = buf.allocated
    if pos + 8 > limit:
        return _END
    total, magic = _SIZE_MAGIC.unpack_from(mm, pos)
    if magic == BLANK_MAGIC:
        return _BLANK if total == buf.file_size - pos else _END
    if magic != MAGIC_V1 or total < _MIN_RECORD or pos + total > limit:
        return _END
    _t, _m, crc, _qid, _flag, _qoff, phy, sys_flag, _born = _HEAD.unpack_from(mm, pos)
    if phy != expect_phy:
        return _END
    body_len_pos = pos + 84 + (12 if sys_flag & BORNHOST_V6_FLAG else 0)
    body_len_pos += 12 if sys_flag & STOREHOSTADDRESS_V6_FLAG else 0
    end = pos + total
    if body_len_pos + 4 > end:
        return _END
    body_len = _I32.unpack_from(mm, body_len_pos)[0]
    p = body_len_pos + 4 + body_len
    if body_len < 0 or p + 3 > end:
        return _END
    topic_len = mm[p]
    if topic_len == 0 or topic_len > 127:
        return _END
    p += 1 + topic_len
    if p + 2 > end:
        return _END
    props_len = _I16.unpack_from(mm, p)[0]
    if props_len < 0 or p + 2 + props_len != end:
        return _END
    if check_crc:
        with memoryview(mm) as mv:
            actual = zlib.crc32(mv[body_len_pos + 4 : body_len_pos + 4 + body_len]) & 0x7FFFFFFF
        if actual != crc:
            return _END
    return int(total)


class CommitLog:
    """Append-only record log over a ``MappedFileQueue``."""

    __slots__ = ("file_size", "mfq")

    def __init__(self, directory: Path, file_size: int) -> None:
        self.file_size = file_size
        self.mfq = MappedFileQueue(directory, file_size, ALLOCATION_CHUNK)

    def load(self) -> None:
        """Map the segment files (positions are fixed by ``recover``)."""
        self.mfq.load()

    def close(self) -> None:
        """Unmap all segments."""
        self.mfq.close()

    # ------------------------------------------------------------------------------------------ offsets
    @property
    def min_offset(self) -> int:
        """Offset of the oldest byte still stored (start of the oldest segment)."""
        return self.mfq.min_offset

    @property
    def max_offset(self) -> int:
        """Offset where the next record will be written (one past the last written byte)."""
        return self.mfq.max_offset

    def roll_next(self, offset: int) -> int:
        """Start offset of the segment after the one containing ``offset``."""
        return offset + self.file_size - offset % self.file_size if self.file_size else offset

    # ------------------------------------------------------------------------------------------ append
    def new_files_for(self, records: list[bytes], total: int) -> list[int]:
        """Start offsets of the segments that appending ``records`` (``total`` bytes) would create ([]: they fit)."""
        mf = self.mfq.last
        if mf is not None and total + END_FILE_MIN_BLANK_LENGTH <= mf.remaining:
            return []
        starts: list[int] = [] if mf is not None else [0]
        nxt, rem = (mf.end_offset, mf.remaining) if mf is not None else (self.file_size, self.file_size)
        for rec in records:
            if len(rec) + END_FILE_MIN_BLANK_LENGTH > rem:
                starts.append(nxt)
                nxt += self.file_size
                rem = self.file_size
            rem -= len(rec)
        return starts

    def _allocation_target(self, total: int) -> tuple[int, int]:
        """``(upto, end)``: the current segment must hold blocks below ``upto`` for ``total`` more bytes (or, when
        they do not fit it, for the end-of-segment marker); ``end`` is how far to allocate then."""
        mf = self.mfq.last
        if mf is None:
            return 0, 0
        upto = mf.wrote_position + total + END_FILE_MIN_BLANK_LENGTH
        if upto > mf.file_size:  # a roll: only the marker is written here
            upto = min(mf.file_size, mf.wrote_position + END_FILE_MIN_BLANK_LENGTH)
        if upto <= mf.allocated:
            return upto, mf.allocated
        return upto, min(mf.file_size, max(upto, mf.allocated + ALLOCATION_CHUNK))

    def allocation_needed(self, total: int) -> int:
        """Bytes the current segment must still allocate before ``total`` more bytes are appended (0: none)."""
        mf = self.mfq.last
        _upto, end = self._allocation_target(total)
        return 0 if mf is None else max(0, end - mf.allocated)

    def allocate_for(self, total: int) -> None:
        """Allocate what ``allocation_needed(total)`` counted (``OSError`` ENOSPC, nothing changed, if it cannot)."""
        mf = self.mfq.last
        upto, end = self._allocation_target(total)
        if mf is not None and upto > mf.allocated:
            mf.ensure_allocated(upto, end - mf.allocated)

    def new_files_for_raw(self, offset: int, n: int) -> list[int]:
        """Start offsets of the segments that ``append_raw(offset, <n bytes>)`` would create."""
        mf = self.mfq.last
        return list(range(mf.end_offset if mf is not None else offset, offset + n, self.file_size))

    def reserve(self, size: int) -> int:
        """Where a record of ``size`` bytes will be written; writes a blank marker and rolls if needed.

        ``size + 8`` must not exceed the segment size (the caller rejects bigger records).
        """
        mfq = self.mfq
        mf = mfq.last
        if mf is None:
            mf = mfq.create_file(0)
        need = size + END_FILE_MIN_BLANK_LENGTH
        if need > mf.remaining:
            rest = mf.remaining
            if rest >= END_FILE_MIN_BLANK_LENGTH:
                mf.append(_SIZE_MAGIC.pack(rest, BLANK_MAGIC))
            mf.wrote_position = mf.file_size
            mf = mfq.create_file(mf.end_offset)
            if need > mf.remaining:
                raise ValueError(f"record of {size} bytes cannot fit a {mf.file_size}-byte segment")
        return mf.file_from_offset + mf.wrote_position

    def write(self, phy: int, record: bytes | bytearray) -> None:
        """Append ``record`` at ``phy`` (which must be the value ``reserve`` just returned)."""
        mf = self.mfq.files[-1]
        if mf.file_from_offset + mf.wrote_position != phy:
            raise ValueError(f"commit log write at {phy} but the end is {self.max_offset}")
        mf.append(record)

    @staticmethod
    def patch_phy_offset(record: bytes, phy: int) -> bytearray:
        """A copy of ``record`` with its PHYSICALOFFSET field set to ``phy``."""
        out = bytearray(record)
        _I64.pack_into(out, _PHY_POS, phy)
        return out

    def append_raw(self, offset: int, data: bytes | bytearray | memoryview) -> int:
        """Append stream bytes exactly as another commit log holds them at ``offset`` (a slave's copy).

        ``offset`` must be the current end; an empty log may start at any segment boundary. The bytes may
        end in the middle of a record and may cross into the next segment. Returns the new end.
        """
        mfq = self.mfq
        if mfq.last is None:
            if offset % self.file_size:
                raise ValueError(f"an empty commit log can start at a segment boundary only, not at {offset}")
            mfq.create_file(offset)
        elif offset != self.max_offset:
            raise ValueError(f"commit log copy at {offset} but the end is {self.max_offset}")
        view = memoryview(data)
        while view:
            mf = mfq.last_or_create()
            n = min(mf.remaining, len(view))
            mf.append(view[:n])
            view = view[n:]
        return self.max_offset

    def read_raw(self, offset: int, max_bytes: int) -> bytes:
        """Up to ``max_bytes`` stream bytes from ``offset``, within one segment (b"" when none are there)."""
        mf = self.mfq.find(offset)
        if mf is None or max_bytes <= 0:
            return b""
        pos = offset - mf.file_from_offset
        end = min(mf.wrote_position, pos + max_bytes)
        return mf.mm[pos:end] if end > pos else b""

    def complete_records(self, start: int, end: int) -> tuple[list[RecordSummary], int]:
        """The whole records in ``[start, end)`` from a record boundary, and the offset after the last one.

        A blank end-of-segment marker moves on to the next segment; a record cut off by ``end`` stops the
        walk before it. Bytes that are neither a record nor a marker raise ``ValueError``.
        """
        out: list[RecordSummary] = []
        phy = start
        mfq = self.mfq
        while phy < end:
            mf = mfq.find(phy)
            if mf is None:
                break
            pos = phy - mf.file_from_offset
            limit = min(mf.wrote_position, end - mf.file_from_offset)
            if pos + 8 > limit:
                break
            total, magic = _SIZE_MAGIC.unpack_from(mf.mm, pos)
            if magic == BLANK_MAGIC:
                if total != mf.file_size - pos:
                    raise ValueError(f"end-of-segment marker at {phy} does not end the segment (segment sizes differ?)")
                phy = mf.end_offset
                continue
            if magic != MAGIC_V1 or total < _MIN_RECORD:
                raise ValueError(f"no record at commit-log offset {phy}")
            if pos + total > limit:
                break
            s = read_record_summary(mf.mm, pos)
            if s.commit_log_offset != phy:
                raise ValueError(f"record at {phy} claims offset {s.commit_log_offset}")
            out.append(s)
            phy += total
        return out, phy

    # ------------------------------------------------------------------------------------------ read
    def read(self, phy: int, size: int) -> bytes | None:
        """``size`` bytes at ``phy`` (a copy), or None if not stored (deleted, past the end, straddling)."""
        mf = self.mfq.find(phy)
        if mf is None:
            return None
        pos = phy - mf.file_from_offset
        if size <= 0 or pos + size > mf.wrote_position:
            return None
        return mf.mm[pos : pos + size]

    def record_at(self, phy: int) -> bytes | None:
        """The raw stored record at ``phy`` if a message record starts there."""
        mf = self.mfq.find(phy)
        if mf is None:
            return None
        pos = phy - mf.file_from_offset
        if pos + 8 > mf.wrote_position:
            return None
        total, magic = _SIZE_MAGIC.unpack_from(mf.mm, pos)
        if magic != MAGIC_V1 or total < _MIN_RECORD or pos + total > mf.wrote_position:
            return None
        return mf.mm[pos : pos + total]

    def record_from(self, phy: int) -> bytes | None:
        """``record_at(phy)``, or when a segment's blank filler starts at ``phy``, the next segment's first record."""
        rec = self.record_at(phy)
        if rec is not None:
            return rec
        mf = self.mfq.find(phy)
        if mf is None:
            return None
        pos = phy - mf.file_from_offset
        if pos + 8 > mf.wrote_position or _SIZE_MAGIC.unpack_from(mf.mm, pos)[1] != BLANK_MAGIC:
            return None
        return self.record_at(mf.end_offset)

    def store_timestamp_at(self, phy: int) -> int | None:
        """STORETIMESTAMP of the record at ``phy``, or None when the record is gone."""
        mf = self.mfq.find(phy)
        if mf is None:
            return None
        pos = phy - mf.file_from_offset
        if pos + 76 > mf.wrote_position:
            return None
        mm = mf.mm
        if _SIZE_MAGIC.unpack_from(mm, pos)[1] != MAGIC_V1:
            return None
        sys_flag = _I32.unpack_from(mm, pos + 36)[0]
        return int(_I64.unpack_from(mm, pos + _store_ts_pos(sys_flag))[0])

    def summary_at(self, phy: int) -> RecordSummary | None:
        """Parsed header/properties of the record at ``phy`` (no body copy), or None."""
        mf = self.mfq.find(phy)
        if mf is None:
            return None
        pos = phy - mf.file_from_offset
        if pos + 8 > mf.wrote_position:
            return None
        try:
            return read_record_summary(mf.mm, pos)
        except ValueError:
            return None

    def iter_summaries(self, start: int, end: int) -> Iterator[RecordSummary]:
        """Every record in ``[start, end)`` (``start`` must be a record boundary); blanks skipped."""
        mfq = self.mfq
        phy = start
        while phy < end:
            mf = mfq.find(phy)
            if mf is None:
                if phy < mfq.min_offset:
                    phy = mfq.min_offset
                    continue
                return
            pos = phy - mf.file_from_offset
            limit = min(mf.wrote_position, end - mf.file_from_offset)
            mm = mf.mm
            while pos + 8 <= limit:
                total, magic = _SIZE_MAGIC.unpack_from(mm, pos)
                if magic != MAGIC_V1 or total <= 0:
                    break
                try:
                    s = read_record_summary(mm, pos)
                except ValueError:
                    break
                yield s
                pos += total
            phy = mf.end_offset

    # ------------------------------------------------------------------------------------------ recovery
    def is_boundary(self, offset: int) -> bool:
        """True if ``offset`` looks like a record boundary: segment start, zeros, a record or a blank."""
        mf = self.mfq.find(offset)
        if mf is None:
            return False
        pos = offset - mf.file_from_offset
        if pos == 0:
            return True
        if pos + 8 <= mf.file_size and _SIZE_MAGIC.unpack_from(mf.read_at(pos, 8)) == (0, 0):
            return True  # end of data (the checkpoint was written at the end)
        return check_record(mf, pos, offset, False) != _END

    def recover(self, start: int | None, check_crc: bool) -> int:
        """Find the end of valid data by walking records from ``start``; truncate everything after it.

        ``start`` must be a record boundary (checked by the caller with ``is_boundary``); ``None``
        means "the beginning of the third-last segment". Returns the new end offset.
        """
        files = self.mfq.files
        if not files:
            return 0
        if start is None or self.mfq.find(start) is None:
            start = files[max(0, len(files) - 3)].file_from_offset
        idx = self.mfq.index_of(start)
        end = start
        for mf in files[idx:]:
            pos = start - mf.file_from_offset if mf.file_from_offset <= start else 0
            phy = mf.file_from_offset + pos
            while True:
                n = check_record(mf, pos, phy, check_crc)
                if n > 0:
                    pos += n
                    phy += n
                    continue
                break
            if n == _BLANK or pos >= mf.file_size:
                end = mf.end_offset
                continue
            end = phy
            break
        self.mfq.set_end(end)
        last = self.mfq.last
        if last is not None:  # the zeroed tail must reach the disk with the next flush
            self.mfq.mark_unflushed_from(last.file_from_offset)
        return end
