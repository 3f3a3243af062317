"""A broker's epoch history (RocketMQ 5's ``EpochFileCache``) and the consistent point of two commit logs.

Under automatic failover each master of a broker set writes in an *epoch*, one higher than the previous master's.
Every broker keeps, for its own commit log, the list of ``(epoch, start)``: from which commit-log offset on the bytes
were written in that epoch. Epochs strictly increase along the list, starts never decrease (an epoch in which the
master wrote nothing starts where the next one does). An epoch's bytes end where the next entry starts; the last
epoch's bytes end at the log's end.

Two logs are identical up to the end of the highest epoch that both histories hold *with the same start*: one
master writes one byte sequence per epoch, and both copies of it begin at the same offset only if everything before
was the same (RocketMQ's ``findConsistentPoint``). ``consistent_point`` gives that offset; a replica that holds more
(an old master coming back) truncates its log there before it follows (``truncate.py``).

On disk: ``<store root>/epochs.json``, ``{"epochs": [[epoch, start], ...]}`` (the shape of the ``epochs`` list of
the set's state in ``ha/set_state.py``), replaced atomically by ``jsonfile.atomic_write_json`` (temp file, fsync,
rename, fsync of the folder; the previous version stays as ``epochs.json.bak``, which ``load_epochs`` falls back to
when the main file is missing or does not parse). Falling back one version is safe under two rules the callers keep:
an epoch is saved before its first byte is written (so a lost append loses an epoch with no byte in this log), and
a cut is saved after the truncation it follows (so a lost cut leaves entries that start at or past the log's end,
which claim no byte: ``end_of`` never reaches past the log's end, and the next truncation cuts them again).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sievemq.store.jsonfile import atomic_write_json, read_json

__all__ = ["EPOCHS_FILE", "EpochEntry", "EpochHistory", "consistent_point", "load_epochs", "save_epochs"]

EPOCHS_FILE = "epochs.json"
"""The history's file name in the store root."""


@dataclass(frozen=True, slots=True)
class EpochEntry:
    """From commit-log offset ``start`` on, the bytes were written in ``epoch``."""

    epoch: int
    start: int


def _check_int(name: str, v: object) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise ValueError(f"{name} must be an integer >= 0, not {v!r}")
    return v


def _check_next(last: EpochEntry | None, epoch: int, start: int) -> None:
    if last is None:
        return
    if epoch <= last.epoch:
        raise ValueError(f"epoch {epoch} (start {start}) does not follow epoch {last.epoch}: epochs must increase")
    if start < last.start:
        raise ValueError(
            f"epoch {epoch} starts at {start}, before epoch {last.epoch} (start {last.start}): starts must not decrease"
        )


class EpochHistory:
    """Entries ordered by epoch (strictly increasing), starts non-decreasing; checked on every change."""

    __slots__ = ("_entries", "_epochs")

    def __init__(self, entries: Iterable[EpochEntry | tuple[int, int]] = ()) -> None:
        """Build from entries in order (``ValueError`` naming the first one out of order or invalid)."""
        self._entries: list[EpochEntry] = []
        self._epochs: list[int] = []
        for e in entries:
            epoch, start = (e.epoch, e.start) if isinstance(e, EpochEntry) else e
            self._push(_check_int("epoch", epoch), _check_int("start", start))

    def _push(self, epoch: int, start: int) -> None:
        _check_next(self.last, epoch, start)
        self._entries.append(EpochEntry(epoch, start))
        self._epochs.append(epoch)

    # ------------------------------------------------------------------------------------------ reading
    @property
    def entries(self) -> tuple[EpochEntry, ...]:
        """Every entry, oldest first."""
        return tuple(self._entries)

    @property
    def last(self) -> EpochEntry | None:
        """The newest entry (None when empty)."""
        return self._entries[-1] if self._entries else None

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[EpochEntry]:
        return iter(tuple(self._entries))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EpochHistory) and self._entries == other._entries

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return f"EpochHistory({[(e.epoch, e.start) for e in self._entries]})"

    def _index(self, epoch: int) -> int:
        i = bisect.bisect_left(self._epochs, epoch)
        return i if i < len(self._epochs) and self._epochs[i] == epoch else -1

    def get(self, epoch: int) -> EpochEntry | None:
        """The entry of ``epoch``, or None when the history does not hold it."""
        i = self._index(epoch)
        return self._entries[i] if i >= 0 else None

    def end_of(self, epoch: int, log_end: int) -> int:
        """Where ``epoch``'s bytes end in a log that ends at ``log_end``: the next entry's start (never past
        ``log_end``), or ``log_end`` for the last entry. ``KeyError`` when the history does not hold ``epoch``."""
        i = self._index(epoch)
        if i < 0:
            raise KeyError(f"epoch {epoch} is not in the history")
        if i + 1 < len(self._entries):
            return min(self._entries[i + 1].start, log_end)
        return log_end

    # ------------------------------------------------------------------------------------------ changing
    def append(self, epoch: int, start: int) -> bool:
        """Record that ``epoch`` starts at ``start``; False when that very entry is already the last (idempotent).

        ``ValueError`` when ``epoch`` is not above the last epoch (or is the last with another start), or ``start``
        is below the last start.
        """
        _check_int("epoch", epoch)
        _check_int("start", start)
        last = self.last
        if last is not None and last.epoch == epoch:
            if last.start == start:
                return False
            raise ValueError(f"epoch {epoch} is already recorded with start {last.start}, not {start}")
        self._push(epoch, start)
        return True

    def cut(self, offset: int) -> int:
        """After the log was truncated at ``offset``: drop the entries that start at or past it (they own no byte
        any more; RocketMQ's ``truncateSuffixByOffset``). Returns how many were dropped."""
        _check_int("offset", offset)
        keep = len(self._entries)
        while keep and self._entries[keep - 1].start >= offset:
            keep -= 1
        dropped = len(self._entries) - keep
        del self._entries[keep:]
        del self._epochs[keep:]
        return dropped

    # ------------------------------------------------------------------------------------------ JSON
    def to_json(self) -> dict[str, Any]:
        """The file's document: ``{"epochs": [[epoch, start], ...]}``."""
        return {"epochs": [[e.epoch, e.start] for e in self._entries]}

    @classmethod
    def from_json(cls, doc: Any) -> EpochHistory:
        """Parse a document of ``to_json``'s shape (``ValueError`` saying what is wrong)."""
        if not isinstance(doc, dict) or not isinstance(doc.get("epochs"), list):
            raise ValueError(f'an epoch history must be {{"epochs": [[epoch, start], ...]}}, not {doc!r:.200}')
        pairs: list[tuple[int, int]] = []
        for item in doc["epochs"]:
            if not isinstance(item, list) or len(item) != 2:
                raise ValueError(f"an epoch entry must be [epoch, start], not {item!r:.200}")
            pairs.append((item[0], item[1]))
        return cls(pairs)


def consistent_point(mine: EpochHistory, my_end: int, theirs: EpochHistory, their_end: int | None) -> int:
    """The highest commit-log offset up to which my log (ending at ``my_end``) is known identical to theirs.

    The highest epoch both histories hold with the same start decides: the point is the smaller of its ends in
    either log (``their_end`` None: their last epoch is still open, its end unbounded). No such epoch: 0, everything
    of mine must go. Never above ``my_end`` nor ``their_end``.
    """
    _check_int("my_end", my_end)
    if their_end is not None:
        _check_int("their_end", their_end)
    for e in reversed(mine.entries):
        other = theirs.get(e.epoch)
        if other is None or other.start != e.start:
            continue
        point = mine.end_of(e.epoch, my_end)
        last = theirs.last
        if last is not None and last.epoch == e.epoch and their_end is None:
            return point
        return min(point, theirs.end_of(e.epoch, their_end if their_end is not None else point))
    return 0


def load_epochs(path: Path | str) -> EpochHistory:
    """The history saved at ``path`` (its ``.bak`` if the file is missing or does not parse; empty when neither
    exists). ``ValueError`` when the document parses but is not a valid history."""
    doc = read_json(path, None)
    return EpochHistory() if doc is None else EpochHistory.from_json(doc)


def save_epochs(path: Path | str, history: EpochHistory) -> None:
    """Replace the file at ``path`` with ``history``, durably (blocking: fsyncs)."""
    atomic_write_json(path, history.to_json())
