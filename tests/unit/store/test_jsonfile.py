"""Atomic JSON files: replace via tmp + rename, ``.bak`` kept, reads fall back to it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sievemq.store import atomic_write_json, read_json


def test_write_read_and_backup(tmp_path: Path) -> None:
    p = tmp_path / "config" / "topics.json"
    assert read_json(p, {"default": True}) == {"default": True}
    atomic_write_json(p, {"v": 1, "name": "中文"})
    assert read_json(p) == {"v": 1, "name": "中文"}
    atomic_write_json(p, {"v": 2})
    assert read_json(p) == {"v": 2}
    assert read_json(p.with_name("topics.json.bak")) == {"v": 1, "name": "中文"}
    assert not p.with_name("topics.json.tmp").exists()


@pytest.mark.parametrize("damage", [b'{"v": 3, "trunc', b"", b"\x00\x00\x00"])
def test_corrupt_main_falls_back_to_bak(tmp_path: Path, damage: bytes) -> None:
    p = tmp_path / "offsets.json"
    atomic_write_json(p, {"v": 1})
    atomic_write_json(p, {"v": 2})
    p.write_bytes(damage)
    assert read_json(p, None) == {"v": 1}


def test_missing_main_after_crash_between_renames(tmp_path: Path) -> None:
    p = tmp_path / "offsets.json"
    atomic_write_json(p, {"v": 1})
    atomic_write_json(p, {"v": 2})
    os.replace(p, p.with_name("offsets.json.bak"))  # state right after the first rename
    assert read_json(p) == {"v": 2}
    assert read_json(tmp_path / "nothing.json", []) == []


def test_failed_write_leaves_previous_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "groups.json"
    atomic_write_json(p, {"v": 1})

    def boom(fd: int) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(os, "fsync", boom)
    with pytest.raises(OSError):
        atomic_write_json(p, {"v": 2})
    monkeypatch.undo()
    assert read_json(p) == {"v": 1}
