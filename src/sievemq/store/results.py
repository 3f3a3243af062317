"""What the store answers: put and get outcomes (RocketMQ ``PutMessageStatus`` / ``GetMessageStatus``), errors."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from sievemq.errors import SieveError
from sievemq.protocol.message import MessageExt

__all__ = ["DiskFull", "DiskFullError", "GetResult", "GetStatus", "PutResult", "PutStatus", "StoreError"]


class StoreError(SieveError):
    """The store folder cannot be used (locked by another process, unreadable)."""


@dataclass(frozen=True, slots=True)
class DiskFull:
    """Why the store refused to write for lack of disk space (``PutResult.disk_full``; see ``store/disk.py``)."""

    folder: str
    """The store folder (its filesystem is the one that is full)."""
    free_bytes: int
    need_bytes: int
    """New bytes the refused write needed on disk (files to create or extend)."""
    reserve_bytes: int
    """Bytes the store leaves free (``disk_full_reserve_bytes``)."""
    read_only: bool = False
    """True when start-up could not finish its own writes: every put is refused until it can."""
    detail: str = ""

    def remark(self) -> str:
        """The refusal in words an operator can act on."""
        what = f"a put needs {self.need_bytes} new bytes"
        if self.read_only:
            what = f"the store is read-only ({self.detail})"
        return (
            f"disk full: {self.folder} has {self.free_bytes} bytes free; {what} and {self.reserve_bytes} bytes are "
            "kept in reserve. Free space on that filesystem (delete files there, let retention delete old commit-log "
            "segments, or grow the volume): sends work again within a second, without a restart; pulls keep working."
        )


class DiskFullError(StoreError):
    """A write was refused before any byte of it was written: not enough disk space (``info`` says how much)."""

    def __init__(self, info: DiskFull) -> None:
        super().__init__(info.remark())
        self.info = info


class PutStatus(Enum):
    """Outcome of a put (Java ``PutMessageStatus``)."""

    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"


@dataclass
class PutResult:
    """Status plus the stored messages (offsets, store time, body CRC and size filled in)."""

    status: PutStatus
    msgs: list[MessageExt]
    message_ids: list[str] = field(default_factory=list)
    """offsetMsgIds of the stored records (empty unless stored)."""
    disk_full: DiskFull | None = None
    """Set with ``SERVICE_NOT_AVAILABLE`` when the cause is the disk: nothing of the put was written."""

    @property
    def ok(self) -> bool:
        """True when the messages are stored (PUT_OK, or FLUSH_DISK_TIMEOUT: stored but not yet synced)."""
        return self.status in (PutStatus.PUT_OK, PutStatus.FLUSH_DISK_TIMEOUT)


class GetStatus(Enum):
    """Outcome of ``get_message`` (Java ``GetMessageStatus``); the table is docs/protocol/requests.md §6."""

    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


@dataclass
class GetResult:
    """Records found (raw stored bytes) and where the next pull should start."""

    status: GetStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    records: list[bytes] = field(default_factory=list)
    message_count: int = 0
    buffer_total_size: int = 0
    last_phy: int = -1
    """Commit-log offset of the last queue entry the scan looked at (-1: none); the master's end minus this is how
    far behind the pull reads (RocketMQ's ``maxPhyOffsetPulling``)."""
