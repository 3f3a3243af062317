"""Retention: which commit-log segments to delete, and the consume-queue / index follow-up.

Policy (after RocketMQ ``CleanCommitLogService`` / ``CleanConsumeQueueService``):

* A commit-log segment is *expired* when its last-modified time is older than
  ``file_reserved_hours``. Expired segments are deleted at the configured hours
  (``delete_when_hours``, RocketMQ's ``deleteWhen``; none: any hour), or at any hour once the store's filesystem
  is fuller than
  ``disk_max_used_space_ratio``. Above ``disk_force_clean_ratio`` the oldest segments are deleted
  even if not expired. Only a prefix of the log is deleted (oldest first, stopping at the first
  segment that must stay), at most ``max_files`` per run, and never the segment being written.
* Then consume-queue files whose entries all point below the new commit-log start are deleted
  (never a queue's last file) and every queue's min offset is moved to its first surviving message;
  index files whose newest entry is below the commit-log start are deleted.

This module only decides; ``retention.py`` detaches, closes and unlinks.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sievemq.store.disk import used_percent_ratio
from sievemq.store.mapped_file import MappedFile

__all__ = ["CleanupDecision", "decide", "disk_used_ratio", "expired_prefix", "unlink_files"]


@dataclass(frozen=True, slots=True)
class CleanupDecision:
    """Whether to delete now, and whether to ignore file age."""

    delete: bool
    force: bool
    disk_ratio: float


def disk_used_ratio(path: Path) -> float:
    """Used fraction of the filesystem holding ``path`` as Apache RocketMQ measures it for retention and reports it
    (``commitLogDiskRatio``) and as ``df`` shows Use%: used / (used + usable by the broker), rounded up to a whole
    percent, so blocks reserved for root count as full and ``diskMaxUsedSpaceRatio`` means what it means there
    (0.0 if it cannot be measured)."""
    try:
        st = os.statvfs(path)
    except OSError:
        return 0.0
    used = (st.f_blocks - st.f_bfree) * st.f_frsize
    ratio = float(used_percent_ratio(used, st.f_bavail * st.f_frsize))
    return max(ratio, 0.0)


def decide(
    *, now: float, delete_when_hours: tuple[int, ...], disk_ratio: float, max_used_ratio: float, force_ratio: float
) -> CleanupDecision:
    """Apply the hour / disk-usage rules (``delete_when_hours`` empty: any hour)."""
    hour_ok = not delete_when_hours or time.localtime(now).tm_hour in delete_when_hours
    space_high = disk_ratio > max_used_ratio
    force = disk_ratio > max(force_ratio, max_used_ratio)
    return CleanupDecision(hour_ok or space_high or force, force, disk_ratio)


def expired_prefix(files: Sequence[MappedFile], *, now: float, reserved_s: float, force: bool,
                   max_files: int) -> int:  # fmt: skip
    """How many of the oldest ``files`` to delete (the last file is never counted)."""
    n = 0
    for mf in files[:-1]:
        if n >= max_files:
            break
        if not force and mf.mtime() + reserved_s > now:
            break
        n += 1
    return n


def unlink_files(paths: Sequence[Path]) -> None:
    """Unlink files (blocking: run in an executor; unlinking a large file can take a while)."""
    for p in paths:
        try:
            os.unlink(p)
        except FileNotFoundError:
            pass
