"""A file whose parsed contents are reloaded when it changes (the ACL file, the dashboard's users file).

``current()`` looks at the file's size, times and inode at most once per ``check_interval`` seconds and parses it
again when they changed; a file that no longer parses is logged as an error and the previous contents stay in
force until it is fixed. The first load raises: a server does not start on a bad file.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

__all__ = ["CHECK_INTERVAL", "WatchedFile"]

log = logging.getLogger(__name__)

CHECK_INTERVAL = 2.0
"""Seconds between two looks at a file's size and modification time."""
T = TypeVar("T")


def _stamp(path: Path) -> tuple[int, int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)


class WatchedFile(Generic[T]):
    """The contents of one file as ``load`` parses them, reloaded when the file changes."""

    def __init__(
        self,
        path: str | Path,
        load: Callable[[Path], T],
        error: type[Exception],
        what: str,
        check_interval: float = CHECK_INTERVAL,
    ) -> None:
        """``load`` raises ``error`` for a file that cannot be used; ``what`` names the contents in log lines
        ("ACL rules")."""
        self.path = Path(path)
        self.check_interval = check_interval
        self._load = load
        self._error = error
        self._what = what
        self._stamp = _stamp(self.path)
        self.value = load(self.path)
        """The contents in force."""
        self._next_check = time.monotonic() + check_interval
        self.reloads = 0
        self.failed_reloads = 0

    def current(self) -> T:
        """The contents in force, after a cheap look at the file (at most once per ``check_interval``)."""
        now = time.monotonic()
        if now >= self._next_check:
            self._next_check = now + self.check_interval
            self.refresh()
        return self.value

    def refresh(self) -> bool:
        """Reload now if the file changed; True when new contents are in force."""
        stamp = _stamp(self.path)
        if stamp == self._stamp:
            return False
        self._stamp = stamp
        try:
            value = self._load(self.path)
        except self._error as e:
            self.failed_reloads += 1
            log.error("%s; the previous %s stay in force", e, self._what)
            return False
        self.value = value
        self.reloads += 1
        log.info("%s reloaded: %s", self.path, self.summary(value))
        return True

    def summary(self, value: T) -> str:
        """What a reload brought, for its log line."""
        return self._what
