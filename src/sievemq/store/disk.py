"""Disk space: mapped files get real blocks before they are written, and writes the disk cannot back are refused.

Why: a page of a shared mapping that the filesystem cannot back (no free block) faults with SIGBUS on its first
write, and that kills the process. So every file written through a mapping is allocated for real
(``posix_fallocate``, ``allocate``) before it is written: commit-log segments, consume-queue and extension files
whole when they are created, index files in chunks (``index_file.py``); files found at start-up are allocated
too before they are written (``readonly.py``). Allocating needs free space, so what a put will need is decided,
and allocated, before any byte of it is written (``put_space.py``).

The decision (``decide``): a write that needs ``need`` new bytes is allowed when it needs none (it goes to blocks
the store already holds), or when ``reserve`` bytes stay free after it: a file is never created into the last
``reserve`` bytes of the filesystem, so the check is never weaker than "the file fits". Free space is ``statvfs``'s
blocks available to unprivileged users, measured when a write needs space and, while writes are refused, at most
once per ``recheck_s`` (``DiskGuard``): a put that needs no new space costs no system call.

States (``DiskGuard``): *writable*; *full* (the last write that needed space was refused; puts that need none
still succeed); *read-only* (start-up could not make its own writes: every put is refused until they are done).
Entering *full* or *read-only* is logged at ERROR with what to do, leaving it at WARNING; reminders at most once a
minute.
"""

from __future__ import annotations

import errno
import logging
import math
import os
import time
from collections.abc import Callable
from pathlib import Path

from sievemq.store.results import DiskFull
from sievemq.util.ratelimit import RateLimitedLog

__all__ = ["DiskGuard", "allocate", "decide", "is_allocated", "is_no_space", "statvfs_free"]

log = logging.getLogger("sievemq.store")

_NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})
_BLOCK = 4096
REMIND_S = 60.0
"""Seconds between reminders while writes are refused."""


def is_no_space(e: BaseException) -> bool:
    """True for "no space left" / "quota exceeded" errors."""
    return isinstance(e, OSError) and e.errno in _NO_SPACE


def allocate(fd: int, offset: int, length: int) -> None:
    """Give ``[offset, offset + length)`` of an open file real blocks; ``OSError`` (ENOSPC, EDQUOT) when it cannot.

    Bytes already there are kept. Where the filesystem has no ``fallocate``, one byte per block is read and
    written back instead (what glibc does itself when the call is not supported).
    """
    if length <= 0:
        return
    try:
        os.posix_fallocate(fd, offset, length)
    except OSError as e:
        if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
            raise
        _allocate_by_writing(fd, offset, length)


def _allocate_by_writing(fd: int, offset: int, length: int) -> None:
    end = offset + length
    pos = offset - offset % _BLOCK
    while pos < end:
        here = max(pos, offset)
        os.pwrite(fd, os.pread(fd, 1, here) or b"\0", here)
        pos += _BLOCK


def is_allocated(fd: int, size: int) -> bool:
    """True when the file holds at least ``size`` bytes of blocks (a file created by ``ftruncate`` holds none)."""
    return os.fstat(fd).st_blocks * 512 >= size


def statvfs_free(path: Path) -> int:
    """Bytes available on the filesystem holding ``path`` (unknown: a huge number, allocation decides then)."""
    try:
        st = os.statvfs(path)
    except OSError:
        return 1 << 62
    return st.f_bavail * st.f_frsize


def decide(free: int, need: int, reserve: int) -> bool:
    """Whether a write needing ``need`` new bytes may go ahead with ``free`` bytes free, keeping ``reserve``."""
    return need <= 0 or free - need >= reserve


class DiskGuard:
    """Free space of the store's filesystem (cached), the decisions, and the full / read-only state."""

    def __init__(
        self,
        root: Path,
        reserve: int,
        *,
        free_fn: Callable[[Path], int] = statvfs_free,
        clock: Callable[[], float] = time.monotonic,
        recheck_s: float = 1.0,
    ) -> None:
        """``free_fn(root)`` measures free bytes (tests inject one); ``recheck_s`` bounds how stale it may be."""
        self.root = root
        self.reserve = reserve
        self.recheck_s = recheck_s
        self.free_fn = free_fn
        self._clock = clock
        self._free = 0
        self._measured = -math.inf
        self.full: DiskFull | None = None
        """The last refusal while *full* (None: writable)."""
        self.read_only: str | None = None
        """While *read-only*: what start-up could not write."""
        self._limit = RateLimitedLog(REMIND_S, clock=clock)
        self._refused = 0

    # ------------------------------------------------------------------------------------------ free space
    def free_bytes(self, *, max_age: float = 0.0) -> int:
        """Free bytes, measured again when the last measure is older than ``max_age`` seconds."""
        now = self._clock()
        if now - self._measured > max_age:
            self._free = self.free_fn(self.root)
            self._measured = now
        return self._free

    def invalidate(self) -> None:
        """Space changed (a file was allocated or deleted): measure again next time."""
        self._measured = -math.inf

    # ------------------------------------------------------------------------------------------ decisions
    def check(self, need: int) -> DiskFull | None:
        """None when a write needing ``need`` new bytes may go ahead, else the refusal (see the module docstring)."""
        if self.read_only is not None:
            return self._refuse(need, self.read_only)
        if need <= 0:
            return None
        free = self.free_bytes(max_age=self.recheck_s if self.full is not None else 0.0)
        if decide(free, need, self.reserve):
            return None
        return self._refuse(need, "")

    def fits(self, need: int) -> bool:
        """Whether ``need`` new bytes may be allocated now (free space up to ``recheck_s`` old; no state change)."""
        return self.read_only is None and decide(self.free_bytes(max_age=self.recheck_s), need, self.reserve)

    def allocation_failed(self, need: int, err: OSError) -> DiskFull:
        """The decision allowed a write but allocating its files failed (space went meanwhile): refuse it."""
        self.invalidate()
        return self._refuse(need, f"allocating failed: {err.strerror or err}")

    def allocated(self) -> None:
        """A write's files were allocated: writable again if it was full."""
        self.invalidate()
        if self.full is not None:
            log.warning("store disk: space is back on %s (%d bytes free); puts are accepted again after %d refusals",
                        self.root, self.free_bytes(), self._refused)  # fmt: skip
            self.full = None
            self._refused = 0
            self._limit.reset("full")

    def _refuse(self, need: int, detail: str) -> DiskFull:
        info = DiskFull(str(self.root), self.free_bytes(max_age=self.recheck_s), need, self.reserve,
                        self.read_only is not None, detail)  # fmt: skip
        self._refused += 1
        if self.read_only is not None:  # ``enter_read_only`` said why
            return info
        self.full = info
        held = self._limit.allow("full")
        if held is not None:
            log.error("store disk full, put refused (%d more refused since the last message): %s", held, info.remark())
        return info

    # ------------------------------------------------------------------------------------------ read-only
    def enter_read_only(self, detail: str) -> None:
        """Start-up could not make its writes (``detail`` says which): refuse every put until ``leave_read_only``."""
        first = self.read_only is None
        self.read_only = detail
        if first:
            self._limit.reset("read-only")
        if self._limit.allow("read-only") is not None:
            log.error("store is READ-ONLY: %s (%s has %d bytes free, %d kept in reserve). Pulls are served; sends are "
                      "refused until space is freed on that filesystem (delete files there or grow the volume), "
                      "then the store finishes by itself, without a restart",
                      detail, self.root, self.free_bytes(), self.reserve)  # fmt: skip

    def runtime_info(self) -> dict[str, str]:
        """What GET_BROKER_RUNTIME_INFO says of the disk: ``storeDiskTotalBytes``, ``storeDiskFreeBytes``,
        ``commitLogDiskRatio`` (the used share of the store's filesystem as RocketMQ and ``df`` count it:
        ``used_percent_ratio``) and ``storeDiskState``
        (``writable``, ``full``, ``read-only``). One ``statvfs``; nothing of the sizes when it fails."""
        state = "read-only" if self.read_only is not None else "full" if self.full is not None else "writable"
        info = {"storeDiskState": state}
        try:
            st = os.statvfs(self.root)
        except OSError:
            return info
        total = st.f_blocks * st.f_frsize
        used = total - st.f_bfree * st.f_frsize
        usable = st.f_bavail * st.f_frsize
        info.update(storeDiskTotalBytes=str(total), storeDiskFreeBytes=str(usable),
                    commitLogDiskRatio=used_percent_ratio(used, usable))  # fmt: skip
        return info

    def leave_read_only(self) -> None:
        """Start-up's writes are done: puts are decided by space again."""
        if self.read_only is not None:
            log.warning("store is writable again (%d bytes free on %s)", self.free_bytes(), self.root)
            self.read_only = None
            self._limit.reset("read-only")
        self.invalidate()


def used_percent_ratio(used: int, usable: int) -> str:
    """RocketMQ's disk ratio (``UtilAll.getDiskPartitionSpaceUsedPercent``), as ``df`` counts Use%: the used share
    of what is used or usable by the broker (blocks reserved for root count as neither), rounded up to a whole
    percent, as Java prints the double (``0.38``)."""
    whole = used + usable
    if whole <= 0:
        return "-1.0"
    percent = -(-used * 100 // whole)
    return repr(percent / 100.0)
