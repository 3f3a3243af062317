"""How many files the store keeps mapped at most: its setting, bounded by what the process may hold.

Every mapped file costs one of the kernel's ``vm.max_map_count`` mappings (65,530 by default) and two descriptors of
``RLIMIT_NOFILE`` (often 1,024 soft): the store's own, and the one Python's ``mmap`` keeps (a ``dup`` of it). The
consume queues' files are kept within the budget by parking the least recently used ones (``queues.py``); the rest
of the descriptors go to connections (``remoting/guard.py``) and the other mappings to the interpreter's libraries.
docs/many-topics.md explains the choice.
"""

from __future__ import annotations

import logging
from pathlib import Path

try:
    import resource
except ImportError:  # pragma: no cover - not on Linux
    resource = None  # type: ignore[assignment]

__all__ = ["MIN_BUDGET", "mapped_files_budget", "max_map_count", "open_files_limit"]

log = logging.getLogger("sievemq.store")

MIN_BUDGET = 64
"""The budget is never set below this (a store needs a few files of each kind mapped)."""
DEFAULT_MAP_COUNT = 65530
"""Linux's ``vm.max_map_count`` default, used when ``/proc/sys/vm/max_map_count`` cannot be read."""


def max_map_count(path: Path = Path("/proc/sys/vm/max_map_count")) -> int:
    """The kernel's limit of mappings per process."""
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return DEFAULT_MAP_COUNT


def open_files_limit() -> int | None:
    """The soft ``RLIMIT_NOFILE`` (None: unlimited or unknown)."""
    if resource is None:
        return None
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return None if soft == resource.RLIM_INFINITY or soft < 0 else int(soft)


def mapped_files_budget(configured: int, *, nofile: int | None = None, map_count: int | None = None) -> int:
    """Files the process may keep mapped: ``configured`` (0: no setting) within half of ``RLIMIT_NOFILE`` (two
    descriptors a file) and half of ``vm.max_map_count`` (the other halves: connections, libraries, sockets), at
    least ``MIN_BUDGET``."""
    nofile = open_files_limit() if nofile is None else nofile
    map_count = max_map_count() if map_count is None else map_count
    room = map_count // 2
    if nofile is not None:
        room = min(room, nofile // 4)
    budget = room if configured <= 0 else min(configured, room)
    if 0 < room < configured:
        log.warning("maxMappedFiles %d is more than this process may map (RLIMIT_NOFILE %s, vm.max_map_count %d): "
                    "%d files at most; raise `ulimit -n` or vm.max_map_count", configured, nofile, map_count, room)
    return max(MIN_BUDGET, budget)
