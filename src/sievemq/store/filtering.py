"""What a pull filter must offer the store (``MessageFilter``), typed in full.

The store asks a filter at three points of a scan (``scan.py``), cheapest first:

1. ``bitmap_probe()`` once per scan: a ``BitmapProbe`` (SQL92 groups with Bloom bits,
   docs/protocol/bloom.md §7) lets the store test the extension bitmaps of the whole window at
   once; the entries it rejects are reported with ``on_probe_rejected(n)`` and cost nothing more.
2. ``match_cq(tags_code, unit)`` per remaining entry, from the consume queue alone (tag codes,
   extension units); skipped altogether when ``ignores_cq`` is true.
3. ``match_record(record)`` on the stored record of entries that passed (SQL92 on properties).

``AcceptingFilter`` is a base with the neutral answer at each point, for filters that decide at one.
"""

from __future__ import annotations

from typing import Protocol

from sievemq.store.consume_queue_ext import BitmapProbe, CqExtUnit

__all__ = ["AcceptingFilter", "MessageFilter"]


class MessageFilter(Protocol):
    """Server-side filter applied by ``MessageStore.get_message``."""

    @property
    def ignores_cq(self) -> bool:
        """True when ``match_cq`` would always answer True: the store skips it and the unit reads it needs."""
        ...

    def bitmap_probe(self) -> BitmapProbe | None:
        """The bitmap test to apply to a whole window's extension units; None: none.

        A filter that offers a probe promises that its ``match_cq`` returns False for every unit it rejects.
        """
        ...

    def on_probe_rejected(self, n: int) -> None:
        """The store skipped ``n`` entries because the probe rejected their units (for counts)."""
        ...

    def match_cq(self, tags_code: int, ext: CqExtUnit | None) -> bool:
        """Decide from the consume-queue entry alone; False skips without reading the commit log.

        ``tags_code`` is the real tag code; ``ext`` the entry's extension unit, None when it has none.
        An entry whose unit cannot be read any more is not offered here (it passes, as in RocketMQ).
        """
        ...

    def match_record(self, record: memoryview) -> bool:
        """Decide from the stored record (SQL on properties); tag filters return True."""
        ...


class AcceptingFilter:
    """Neutral answers at every point; subclasses override where they decide."""

    ignores_cq: bool = False

    def bitmap_probe(self) -> BitmapProbe | None:
        """No bitmap test."""
        return None

    def on_probe_rejected(self, n: int) -> None:
        """Nothing to count."""

    def match_cq(self, tags_code: int, ext: CqExtUnit | None) -> bool:
        """Passes every entry."""
        return True

    def match_record(self, record: memoryview) -> bool:
        """Passes every record."""
        return True
