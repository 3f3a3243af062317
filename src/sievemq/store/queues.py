"""The store's consume queues by topic and queue id, and their folders (``consumequeue/``, ``consumequeue_ext/``)."""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

from sievemq.store.consume_queue import ConsumeQueue

__all__ = ["QueueTable", "is_safe_folder_name"]


def is_safe_folder_name(topic: str) -> bool:
    """True when ``topic`` can name a folder under a store base without leaving it (one plain path component).

    The broker validates names at the edge (charset and length); this is the store's own last line: no path
    is ever built from a name that could climb out of ``consumequeue/``.
    """
    return bool(topic) and topic not in (".", "..") and "/" not in topic and "\x00" not in topic


class QueueTable:
    """Every consume queue of a store; created on first dispatch, loaded from disk at start-up."""

    __slots__ = ("_queues", "cq_base", "entries_per_file", "ext_base", "ext_file_size")

    def __init__(self, cq_base: Path, ext_base: Path, entries_per_file: int, ext_file_size: int) -> None:
        self.cq_base = cq_base
        self.ext_base = ext_base
        self.entries_per_file = entries_per_file
        self.ext_file_size = ext_file_size
        self._queues: dict[str, dict[int, ConsumeQueue]] = {}

    def _new(self, topic: str, queue_id: int) -> ConsumeQueue:
        if not is_safe_folder_name(topic):
            raise ValueError(f"topic {topic!r} cannot name a store folder")
        return ConsumeQueue(self.cq_base, topic, queue_id, self.entries_per_file, ext_base=self.ext_base,
                            ext_file_size=self.ext_file_size)  # fmt: skip

    def load(self) -> None:
        """Map every queue found on disk (folders without data files are ignored)."""
        base = self.cq_base
        for topic in sorted(os.listdir(base)) if base.is_dir() else []:
            tdir = base / topic
            if not tdir.is_dir() or not is_safe_folder_name(topic):
                continue
            for q in sorted(os.listdir(tdir)):
                if not q.isdigit():
                    continue
                cq = self._new(topic, int(q))
                cq.load()
                if not cq.mfq.files:
                    continue
                if cq.ext is not None:
                    cq.ext.load()
                self._queues.setdefault(topic, {})[int(q)] = cq

    def find(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        """The queue, or None when nothing was ever dispatched to it."""
        qs = self._queues.get(topic)
        return qs.get(queue_id) if qs is not None else None

    def get_or_create(self, topic: str, queue_id: int) -> ConsumeQueue:
        """The queue, created (with no file yet) when new."""
        qs = self._queues.get(topic)
        if qs is None:
            qs = self._queues[topic] = {}
        cq = qs.get(queue_id)
        if cq is None:
            cq = qs[queue_id] = self._new(topic, queue_id)
            if cq.ext is not None and cq.ext.directory.exists():
                shutil.rmtree(cq.ext.directory, ignore_errors=True)  # left over from a queue gone before
        return cq

    def is_live(self, cq: ConsumeQueue) -> bool:
        """True while ``cq`` is the table's queue for its topic and id (not deleted or replaced)."""
        return self.find(cq.topic, cq.queue_id) is cq

    def all(self) -> list[ConsumeQueue]:
        """Every queue."""
        return [cq for qs in self._queues.values() for cq in qs.values()]

    def topic_queues(self) -> dict[str, list[int]]:
        """Every known topic and its queue ids."""
        return {t: sorted(qs) for t, qs in self._queues.items()}

    def remove_topic(self, topic: str) -> list[ConsumeQueue]:
        """Forget the topic's queues (returned, still open) and delete its folders."""
        if not is_safe_folder_name(topic):
            return []
        qs = self._queues.pop(topic, None)
        for base in (self.cq_base, self.ext_base):
            with contextlib.suppress(FileNotFoundError):
                shutil.rmtree(base / topic)
        return list(qs.values()) if qs else []

    def close(self) -> None:
        """Unmap every queue and forget them."""
        for cq in self.all():
            cq.close()
        self._queues.clear()
