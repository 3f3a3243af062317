"""The broker's JSON files are written in a worker thread, in order, coalesced, and ``write`` waits for the disk."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from sievemq.broker import config_files
from sievemq.broker.config_files import ConfigWriter
from sievemq.store.jsonfile import read_json
from tests.support.quiet import quiet_period


async def test_writes_happen_off_the_loop_thread_and_coalesce(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    written: list[tuple[str, Any]] = []
    threads: set[str] = set()
    gate = threading.Event()
    real = config_files.atomic_write_json

    def slow_write(path: Path, document: Any) -> None:
        gate.wait(5)
        threads.add(threading.current_thread().name)
        written.append((path.name, document))
        real(path, document)

    monkeypatch.setattr(config_files, "atomic_write_json", slow_write)
    w = ConfigWriter()
    path = tmp_path / "offsets.json"
    for i in range(5):  # the first write starts; the next four wait, and only the newest of them is written
        w.save(path, {"n": i})
        await asyncio.sleep(0)
    gate.set()
    await w.write(path, {"n": 5})
    await w.close()
    assert written == [("offsets.json", {"n": 0}), ("offsets.json", {"n": 5})]
    assert threading.current_thread().name not in threads
    assert read_json(path) == {"n": 5}


async def test_write_raises_when_the_file_cannot_be_written(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    w = ConfigWriter()
    with pytest.raises(OSError):
        await w.write(blocker / "topics.json", {"a": 1})
    w.save(blocker / "topics.json", {"a": 2})  # logged, nobody waits: no "exception never retrieved"
    await w.flush()
    await w.write(tmp_path / "ok.json", {"a": 3})  # the writer goes on after a failure
    await w.close()
    assert read_json(tmp_path / "ok.json") == {"a": 3}


def test_without_an_event_loop_save_writes_at_once(tmp_path: Path) -> None:
    ConfigWriter().save(tmp_path / "groups.json", {"g": 1})
    assert read_json(tmp_path / "groups.json") == {"g": 1}


async def test_settled_waits_for_the_write_running_and_the_one_pending(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate, entered = threading.Event(), threading.Event()
    real = config_files.atomic_write_json

    def slow_write(path: Path, document: Any) -> None:
        entered.set()
        gate.wait(5)
        real(path, document)

    monkeypatch.setattr(config_files, "atomic_write_json", slow_write)
    w = ConfigWriter()
    path = tmp_path / "topics.json"
    await w.settled(path)  # nothing saved yet: at once
    w.save(path, {"n": 1})
    assert await asyncio.to_thread(entered.wait, 5), "the write of n=1 never started"  # now held at the gate
    running = asyncio.ensure_future(w.settled(path))
    w.save(path, {"n": 2})
    pending = asyncio.ensure_future(w.settled(path))
    await quiet_period(0.05, "settled returning before the disk had the document",
                       unchanged=lambda: (running.done(), pending.done()))  # fmt: skip
    assert not running.done() and not pending.done(), "settled returned before the disk had the document"
    gate.set()
    await running
    await pending
    assert read_json(path) == {"n": 2}
    await w.close()


async def test_settled_raises_when_the_write_failed(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    w = ConfigWriter()
    w.save(blocker / "topics.json", {"a": 1})
    with pytest.raises(OSError):
        await w.settled(blocker / "topics.json")
    await w.close()
