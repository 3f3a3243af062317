"""SQL92 filters of consumer groups: one compiled selector per (group, topic), its Bloom bit positions, counts,
and persistence to ``config/consumerFilter.json`` so filtering survives a broker restart (RocketMQ loses them).

At dispatch, ``calc_bitmap`` evaluates every filter of the message's topic once and sets the group's Bloom bits
in a bitmap the store keeps in the consume-queue extension. At pull, ``SqlFilter`` first tests the group's bits
(no commit-log read for a "no"), then evaluates the survivors' properties (Bloom false positives never cause a
wrong delivery).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sievemq.filter.bloom import BloomFilter
from sievemq.filter.sql92 import Selector, SqlError, compile_selector
from sievemq.store.jsonfile import atomic_write_json, read_json

log = logging.getLogger(__name__)

SQL92 = "SQL92"


@dataclass
class FilterCounts:
    """Messages matched and filtered out for one (group, topic), by stage (``/metrics`` reads them by kind,
    docs/metrics.md §4)."""

    tag_matched: int = 0
    """Delivered by a tag filter."""
    sql_matched: int = 0
    """Delivered by a SQL92 filter (its evaluation said yes)."""
    filtered_by_tag: int = 0
    filtered_by_bitmap: int = 0
    filtered_by_evaluation: int = 0
    evaluation_errors: int = 0
    bitmap_false_positives: int = 0
    """Of ``filtered_by_evaluation``: messages whose trusted bitmap had the group's bits (a Bloom false positive)."""

    @property
    def matched(self) -> int:
        """Delivered by either filter."""
        return self.tag_matched + self.sql_matched

    def as_dict(self) -> dict[str, int]:
        """JSON-able counts."""
        return {"matched": self.matched, **self.__dict__}


@dataclass
class FilterEntry:
    """A group's compiled SQL92 filter of one topic."""

    group: str
    topic: str
    expression: str
    selector: Selector
    born_time: int
    client_version: int = 0
    bit_positions: list[int] = field(default_factory=list)
    counts: FilterCounts = field(default_factory=FilterCounts)
    mask: bytes = b""
    """The group's bits set in an otherwise empty bitmap of the broker's Bloom length (what a pull tests)."""


class ConsumerFilterManager:
    """Compiled SQL92 filters by (group, topic)."""

    def __init__(
        self, config_dir: Path, bloom: BloomFilter, save: Callable[[Path, Any], None] = atomic_write_json
    ) -> None:
        """``save(path, document)`` writes the file (the broker's ``ConfigWriter.save``: off the event loop)."""
        self.path = config_dir / "consumerFilter.json"
        self._save = save
        self.bloom = bloom
        self.entries: dict[tuple[str, str], FilterEntry] = {}
        self.by_topic: dict[str, list[FilterEntry]] = {}
        self.errors: dict[tuple[str, str], str] = {}
        self.counts: dict[tuple[str, str], FilterCounts] = {}
        self._dirty = False

    def counts_for(self, group: str, topic: str) -> FilterCounts:
        """The counters of (group, topic), for any kind of subscription."""
        c = self.counts.get((group, topic))
        if c is None:
            c = self.counts[(group, topic)] = FilterCounts()
        return c

    # ---------------------------------------------------------------------------------------- registry
    def compile(self, expression: str) -> Selector:
        """Compile an expression (SqlError with position and expectation when it does not)."""
        return compile_selector(expression)

    def register(self, group: str, topic: str, expression: str, version: int = 0) -> FilterEntry | None:
        """Make ``expression`` the group's filter of ``topic``; None (and the error kept) when it does not compile."""
        key = (group, topic)
        old = self.entries.get(key)
        if old is not None and old.expression == expression:
            old.client_version = max(old.client_version, version)
            return old
        try:
            selector = self.compile(expression)
        except SqlError as e:
            self.errors[key] = str(e)
            if old is not None:
                self._remove(key)
            log.warning("group %s topic %s: SQL92 expression does not compile: %s", group, topic, e)
            return None
        self.errors.pop(key, None)
        positions = self.bloom.bit_positions(f"{group}#{topic}")
        mask = self.bloom.empty_bitmap()
        self.bloom.set_bits(mask, positions)
        entry = FilterEntry(
            group,
            topic,
            expression,
            selector,
            int(time.time() * 1000),
            version,
            positions,
            self.counts_for(group, topic),
            bytes(mask),
        )
        if old is not None:
            self._remove(key)
        self.entries[key] = entry
        self.by_topic.setdefault(topic, []).append(entry)
        self._dirty = True
        log.info("group %s topic %s: SQL92 filter %r registered", group, topic, expression)
        return entry

    def _remove(self, key: tuple[str, str]) -> None:
        entry = self.entries.pop(key, None)
        if entry is None:
            return
        lst = self.by_topic.get(entry.topic, [])
        lst[:] = [e for e in lst if e is not entry]
        if not lst:
            self.by_topic.pop(entry.topic, None)
        self._dirty = True

    def unregister(self, group: str, topic: str) -> None:
        """The group no longer subscribes ``topic`` with SQL92."""
        self._remove((group, topic))
        self.errors.pop((group, topic), None)

    def get(self, group: str, topic: str) -> FilterEntry | None:
        """The group's filter of ``topic``."""
        return self.entries.get((group, topic))

    def error(self, group: str, topic: str) -> str | None:
        """Why the group's expression of ``topic`` did not compile, if it did not."""
        return self.errors.get((group, topic))

    def groups_of(self, group: str) -> list[FilterEntry]:
        """Every filter of ``group``."""
        return [e for (g, _), e in sorted(self.entries.items()) if g == group]

    # ---------------------------------------------------------------------------------------- dispatch
    def calc_bitmap(self, topic: str, properties: Mapping[str, str], tags: str | None) -> bytes | None:
        """The Bloom bitmap of a message being dispatched: bits of every group whose filter matches it."""
        entries = self.by_topic.get(topic)
        if not entries:
            return None
        bits = bytearray(self.bloom.m // 8)
        for e in entries:
            if e.selector.verdict(properties) is not False:  # TRUE, or an error the pull evaluates again and counts
                self.bloom.set_bits(bits, e.bit_positions)
        return bytes(bits)

    # ---------------------------------------------------------------------------------------- persistence
    def load(self) -> None:
        """Recompile the persisted filters (they keep filtering before the group's first heartbeat)."""
        data = read_json(self.path, None) or {}
        for item in data.get("filters") or []:
            entry = self.register(
                str(item["group"]), str(item["topic"]), str(item["expression"]), int(item.get("clientVersion", 0))
            )
            if entry is not None:
                entry.born_time = int(item.get("bornTime", entry.born_time))
        self._dirty = False

    def persist(self) -> None:
        """Write the filters if they changed."""
        if not self._dirty:
            return
        self._dirty = False
        self._save(self.path, self.document())

    def document(self) -> dict[str, Any]:
        """The filters as ``consumerFilter.json`` holds them (also what a slave copies)."""
        filters: list[dict[str, Any]] = [
            {
                "group": e.group,
                "topic": e.topic,
                "expression": e.expression,
                "expressionType": SQL92,
                "bornTime": e.born_time,
                "clientVersion": e.client_version,
            }
            for _, e in sorted(self.entries.items())
        ]
        return {"filters": filters}

    def replace_from(self, document: dict[str, Any]) -> None:
        """Hold exactly the filters of ``document`` (a master's): born times kept, so bitmaps are trusted alike."""
        wanted = {(str(i["group"]), str(i["topic"])): i for i in document.get("filters") or []}
        for key in [k for k in self.entries if k not in wanted]:
            self._remove(key)
        for (group, topic), item in wanted.items():
            entry = self.register(group, topic, str(item["expression"]), int(item.get("clientVersion", 0)))
            if entry is not None and entry.born_time != int(item.get("bornTime", entry.born_time)):
                entry.born_time = int(item["bornTime"])
                self._dirty = True
