"""Reading the POP state back at start (docs/pop.md §3): the snapshot in ``config/pop.json`` and the POP log records
after the offset it covers, replayed onto it."""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path

from sievemq.broker.pop.book import PopBook
from sievemq.broker.pop.records import POP_LOG_TOPIC, parse_record
from sievemq.protocol.message import decode_record
from sievemq.store import MessageStore
from sievemq.store.jsonfile import read_json

__all__ = ["load_book"]

log = logging.getLogger(__name__)

_READ_CHUNK = 256


def load_book(store: MessageStore, path: Path) -> PopBook:
    """The book the snapshot at ``path`` and the POP log records after it hold (the log alone when the snapshot is
    missing or unreadable)."""
    start = store.get_min_offset(POP_LOG_TOPIC, 0)
    book = PopBook()
    doc = read_json(path)
    if isinstance(doc, dict):
        try:
            book = PopBook.from_snapshot(doc)
            start = max(start, int(doc.get("log", 0)))
        except (ValueError, KeyError, TypeError):
            log.warning("pop: %s is not a POP snapshot; rebuilding from the POP log alone", path)
            book = PopBook()
    replayed = 0
    offset = start
    while entries := store.read_cq_entries(POP_LOG_TOPIC, 0, offset, _READ_CHUNK):
        for phy, _size, _tags in entries:
            raw = store.look_message_by_offset(phy) if phy >= 0 else None
            if raw is not None:
                with contextlib.suppress(ValueError):
                    rec = parse_record(decode_record(raw)[0])
                    if rec is not None:
                        book.apply(rec)
                        replayed += 1
            offset += 1
    log.info("pop: %d leases in %d queues (%d records replayed)", book.leased(), len(book.queues), replayed)
    return book
