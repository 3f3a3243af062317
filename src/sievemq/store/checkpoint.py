"""The store checkpoint: how far each kind of data is known to be on disk.

On disk: ``<root>/checkpoint``, 52 bytes, big-endian::

    physicMsgTimestamp i64 | logicsMsgTimestamp i64 | indexMsgTimestamp i64 |
    physicOffset i64 | logicsOffset i64 | indexOffset i64 | crc32 u32 (of the 48 bytes before)

``physicOffset`` is a commit-log record boundary below which the commit log was fsynced;
``logicsOffset`` / ``indexOffset`` are commit-log offsets below which every consume-queue / index
entry was fsynced; the timestamps are the wall-clock times (ms) of those flushes. The file is
rewritten in place (one small write inside one sector, then fdatasync); a torn or missing file
reads as all zeros, which makes recovery re-verify and re-dispatch everything.
"""

from __future__ import annotations

import os
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

from sievemq.store.mapped_file import sync_fd

__all__ = ["Checkpoint", "CheckpointFile"]

_BODY = struct.Struct(">qqqqqq")
_CRC = struct.Struct(">I")


@dataclass(slots=True)
class Checkpoint:
    """The values of the checkpoint file."""

    physic_timestamp: int = 0
    logics_timestamp: int = 0
    index_timestamp: int = 0
    physic_offset: int = 0
    logics_offset: int = 0
    index_offset: int = 0

    def encode(self) -> bytes:
        """File bytes of this checkpoint."""
        body = _BODY.pack(self.physic_timestamp, self.logics_timestamp, self.index_timestamp,
                          self.physic_offset, self.logics_offset, self.index_offset)  # fmt: skip
        return body + _CRC.pack(zlib.crc32(body))

    @classmethod
    def decode(cls, data: bytes) -> Checkpoint | None:
        """Parse file bytes; None if short or the CRC does not match."""
        if len(data) < _BODY.size + _CRC.size:
            return None
        body = data[: _BODY.size]
        if _CRC.unpack_from(data, _BODY.size)[0] != zlib.crc32(body):
            return None
        return cls(*_BODY.unpack(body))


class CheckpointFile:
    """Reads and rewrites ``<root>/checkpoint``."""

    __slots__ = ("fd", "path")

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)

    def read(self) -> Checkpoint:
        """Current values (zeros if the file is new or corrupt)."""
        data = os.pread(self.fd, 64, 0)
        return Checkpoint.decode(data) or Checkpoint()

    def write(self, cp: Checkpoint, *, sync: bool = True) -> None:
        """Overwrite the file with ``cp`` (blocking when ``sync``: run in an executor on hot paths)."""
        os.pwrite(self.fd, cp.encode(), 0)
        if sync:
            sync_fd(self.fd)

    def close(self) -> None:
        """Close the descriptor."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
