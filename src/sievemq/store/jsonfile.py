"""Crash-safe JSON files (the broker's ``config/*.json``: topics, consumer offsets, groups).

On disk, for ``path`` = ``x.json``: ``x.json`` (current), ``x.json.bak`` (the previous version) and,
only while a write is in progress, ``x.json.tmp``. A write goes: serialize, write ``.tmp``, fsync it,
rename the current file to ``.bak``, rename ``.tmp`` to the current name, fsync the directory. At
every instant at least one of ``x.json`` / ``x.json.bak`` is a complete document, so ``read_json``
falls back to ``.bak`` when the main file is missing or does not parse.

Blocking (fsync): a caller on the event loop should run ``atomic_write_json`` in an executor when
the file is large or written often.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from sievemq.store.mapped_file import fsync_dir

__all__ = ["atomic_write_bytes", "atomic_write_json", "read_json"]


def _bak(path: Path) -> Path:
    return path.with_name(path.name + ".bak")


def atomic_write_json(path: Path | str, obj: Any) -> None:
    """Durably replace ``path`` with ``obj`` as JSON, keeping the previous version as ``.bak``."""
    atomic_write_bytes(path, json.dumps(obj, ensure_ascii=False, indent=1, sort_keys=True).encode("utf-8"))


def atomic_write_bytes(path: Path | str, data: bytes) -> None:
    """Durably replace ``path`` with ``data`` (a document already encoded), keeping the previous version as
    ``.bak``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        os.fsync(fd)
    except BaseException:  # a full disk: the partial .tmp would only take space (the document is unchanged)
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    if path.exists():
        os.replace(path, _bak(path))
    os.replace(tmp, path)
    fsync_dir(path.parent)


def _load(path: Path) -> tuple[bool, Any]:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return False, None
    if not data.strip():
        return False, None
    try:
        return True, json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return False, None


def read_json(path: Path | str, default: Any = None) -> Any:
    """The document at ``path``; its ``.bak`` if the main file is missing or corrupt; else ``default``."""
    path = Path(path)
    ok, value = _load(path)
    if ok:
        return value
    ok, value = _load(_bak(path))
    if ok:
        return value
    return default
