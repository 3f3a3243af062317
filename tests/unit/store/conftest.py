"""Shared helpers for the store tests: small geometries so that rolling and retention show up."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sievemq.protocol.message import MessageExt
from sievemq.store import MessageStore, StoreConfig

HOST = ("10.1.2.3", 10911)
SEG = 4096  # commit-log segment size used by most tests
CQ_PER_FILE = 16


def make_config(root: Path, **over: Any) -> StoreConfig:
    """A config with tiny files (4 KiB segments, 16-entry CQ files, tiny index)."""
    kw: dict[str, Any] = {
        "root": root,
        "commitlog_file_size": SEG,
        "cq_entries_per_file": CQ_PER_FILE,
        "index_hash_slots": 16,
        "index_max_entries": 64,
        "delete_when_hours": (),
    }
    kw.update(over)
    return StoreConfig(**kw)


def msg(topic: str = "T", body: bytes = b"hello", queue_id: int = 0, *, tags: str | None = None,
        keys: str | None = None, uniq: str | None = None, **props: str) -> MessageExt:  # fmt: skip
    """A message to put."""
    p = dict(props)
    if tags is not None:
        p["TAGS"] = tags
    if keys is not None:
        p["KEYS"] = keys
    if uniq is not None:
        p["UNIQ_KEY"] = uniq
    return MessageExt(topic, body, properties=p, queue_id=queue_id, born_host=("10.9.9.9", 5555), born_timestamp=1)


@pytest.fixture
def open_store(tmp_path: Path) -> Iterator[Callable[..., MessageStore]]:
    """Factory: ``open_store(**config_overrides)`` loads a store on ``tmp_path / "store"``.

    Stores still open at the end of the test are abandoned (files closed, no clean mark).
    """
    opened: list[MessageStore] = []

    def factory(**over: Any) -> MessageStore:
        s = MessageStore(make_config(tmp_path / "store", **over), HOST)
        s.load()
        opened.append(s)
        return s

    yield factory
    for s in opened:
        if s.available:
            s.abandon()
