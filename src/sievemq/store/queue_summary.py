"""A clean stop's summary of the consume queues: the next start knows them without opening 400,000 files.

On disk: ``consumequeue/.summary`` (docs/many-topics.md), JSON::

    {"version": 1, "commitlog_end": <the commit log's end at the stop>, "file_size": <bytes per queue file>,
     "queues": [[topic, queue_id, [[file start, allocated], ...], written in the last file, min offset,
                 [last entry phy, last entry end] or null, floor phy], ...],
     "scan": [[topic, queue_id], ...]}

``MessageStore.shutdown`` writes it after its last flush (tmp file, fsync, rename, directory fsync): every queue
without extension files in ``queues``, those with extension files in ``scan`` (start-up looks at their files). The
next ``load`` reads it only after a clean stop (no ``abort`` file) whose checkpoint still names the commit-log offset
the summary does, and deletes it before the store writes anything: a summary is never trusted after the queues may
have changed. Anything unexpected in it (a torn or foreign file, a name that cannot be a folder, numbers out of range)
makes start-up ignore it and look at every queue's files. A summary is trusted: damage done to the files between a
clean stop and the next start is not looked for (without a summary, start-up checks each queue's last entries).
"""

from __future__ import annotations

import contextlib
import logging
import os
from dataclasses import dataclass
from pathlib import Path

import orjson

from sievemq.store.consume_queue import ConsumeQueue
from sievemq.store.mapped_file import fsync_dir

__all__ = ["SUMMARY_NAME", "QueueState", "Summary", "read_summary", "write_summary"]

log = logging.getLogger("sievemq.store")

SUMMARY_NAME = ".summary"
VERSION = 1
_MAX = 1 << 62


@dataclass(frozen=True, slots=True)
class QueueState:
    """What a queue was at the clean stop."""

    topic: str
    queue_id: int
    files: tuple[tuple[int, int], ...]
    """``(start byte offset, bytes allocated)`` of each file, oldest first."""
    wrote: int
    """Bytes written in the last file."""
    min_offset: int
    last: tuple[int, int] | None
    """``(phy, end)`` of the last real entry (None: none)."""
    floor_phy: int


@dataclass(frozen=True, slots=True)
class Summary:
    """A summary as read: the queues it knows, and those start-up looks at on disk."""

    queues: list[QueueState]
    scan: list[tuple[str, int]]


def _state(cq: ConsumeQueue) -> list[object] | None:
    files = cq.mfq.files
    if not files or (cq.ext is not None and cq.ext.has_files):
        return None
    floor, tail = (cq.floor_phy, cq.tail) if cq.parked else cq.edges()
    return [cq.topic, cq.queue_id, [[f.file_from_offset, f.allocated] for f in files], files[-1].wrote_position,
            cq.min_logic_offset, None if tail is None else list(tail), floor]  # fmt: skip


def write_summary(base: Path, cqs: list[ConsumeQueue], commitlog_end: int, file_size: int) -> None:
    """Write the summary of ``cqs`` (blocking; after the store's last flush)."""
    rows: list[list[object]] = []
    scan: list[list[object]] = []
    for cq in cqs:
        row = _state(cq)
        if row is not None:
            rows.append(row)
        elif cq.mfq.files:
            scan.append([cq.topic, cq.queue_id])
    doc = {"version": VERSION, "commitlog_end": commitlog_end, "file_size": file_size, "queues": rows, "scan": scan}
    path = base / SUMMARY_NAME
    tmp = base / (SUMMARY_NAME + ".tmp")
    with open(tmp, "wb") as f:
        f.write(orjson.dumps(doc))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(base)


def _int(v: object, lo: int = 0, hi: int = _MAX) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
        raise ValueError(f"not an integer in {lo}..{hi}: {v!r}")
    return v


def _topic(topic: object) -> str:
    if not isinstance(topic, str) or not topic or topic in (".", "..") or "/" in topic or "\x00" in topic:
        raise ValueError(f"not a folder name: {topic!r}")
    return topic


def _parse(row: object, file_size: int) -> QueueState:
    if not isinstance(row, list) or len(row) != 7:
        raise ValueError("a queue row is a list of 7")
    topic, qid, files, wrote, min_off, last, floor = row
    topic = _topic(topic)
    if not isinstance(files, list) or not files:
        raise ValueError("a queue has files")
    spans: list[tuple[int, int]] = []
    for item in files:
        if not isinstance(item, list) or len(item) != 2:
            raise ValueError("a file is [start, allocated]")
        start, allocated = _int(item[0]), _int(item[1], 0, file_size)
        if start % file_size or (spans and spans[-1][0] + file_size != start):
            raise ValueError("files must follow each other")
        spans.append((start, allocated))
    ends: tuple[int, int] | None = None
    if last is not None:
        if not isinstance(last, list) or len(last) != 2:
            raise ValueError("last is [phy, end]")
        ends = (_int(last[0]), _int(last[1]))
    return QueueState(topic, _int(qid, 0, 1 << 31), tuple(spans), _int(wrote, 0, file_size), _int(min_off), ends,
                      _int(floor, -1))  # fmt: skip


def read_summary(base: Path, commitlog_end: int, file_size: int, *, trust: bool) -> Summary | None:
    """The queues of a summary that fits this store (None: none, not ``trust``-ed (an unclean stop), or not to be
    trusted); the file is deleted in every case."""
    path = base / SUMMARY_NAME
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    finally:
        for p in (path, base / (SUMMARY_NAME + ".tmp")):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(p)
    fsync_dir(base)
    if not trust:
        return None
    try:
        doc = orjson.loads(raw)
        if not isinstance(doc, dict) or doc.get("version") != VERSION:
            raise ValueError("unknown version")
        if doc.get("commitlog_end") != commitlog_end or doc.get("file_size") != file_size:
            log.info("consume-queue summary ignored: the checkpoint or the queue file size changed since it was "
                     "written")  # fmt: skip
            return None
        rows, scan = doc.get("queues"), doc.get("scan")
        if not isinstance(rows, list) or not isinstance(scan, list):
            raise ValueError("no queues")
        pairs: list[tuple[str, int]] = []
        for item in scan:
            if not isinstance(item, list) or len(item) != 2:
                raise ValueError("a scan entry is [topic, queue id]")
            pairs.append((_topic(item[0]), _int(item[1], 0, 1 << 31)))
        return Summary([_parse(row, file_size) for row in rows], pairs)
    except (ValueError, orjson.JSONDecodeError) as e:
        log.warning("consume-queue summary %s ignored (%s): every queue is looked at instead", path, e)
        return None
