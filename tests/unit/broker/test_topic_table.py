"""The topic table at scale (docs/topic-table.md): O(1) counting, the journal beside topics.json, compactions, a
crash at each step of one, RocketMQ's format on disk, GET_ALL_TOPIC_CONFIG's pages."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import orjson
import pytest

from sievemq.broker import topics as topics_module
from sievemq.broker.config_files import ConfigWriter
from sievemq.broker.config_journal import Journal, encode_line, read_lines
from sievemq.broker.groups import GroupConfig, SubscriptionGroupManager
from sievemq.broker.metadata_sync import MetadataSync
from sievemq.broker.processors.admin import AdminProcessor, _same_version
from sievemq.broker.topics import TopicConfigManager, stored_topics
from sievemq.errors import RemotingError
from sievemq.protocol.reasons import Reason
from sievemq.protocol.route import TopicConfig
from sievemq.remoting.codes import RequestCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection, ConnectionPool

BROKER, CLUSTER = "broker-t", "TestCluster"


def manager(config_dir: Path, writer: ConfigWriter | None, max_topics: int = 1_000_000) -> TopicConfigManager:
    """A topic table in ``config_dir`` (with ``writer``: the journal)."""
    m = TopicConfigManager(config_dir, BROKER, CLUSTER, 4, True, max_topics=max_topics, writer=writer)
    m.load()
    return m


def ours(m: TopicConfigManager) -> dict[str, TopicConfig]:
    """The table less the broker's own topics."""
    return {n: tc for n, tc in m.table.items() if n[:1] in "TXYZ" and n[1:2] in ("", *"0123456789")}


# ---------------------------------------------------------------------------------------------------------- counting
def test_counted_follows_creations_deletions_and_outside_changes(tmp_path: Path) -> None:
    m = manager(tmp_path, None, max_topics=5)
    assert m.counted() == 0  # system topics and the broker's own do not count
    m.update_many([TopicConfig(f"T{i}", 4, 4) for i in range(3)])
    m.update(TopicConfig("%RETRY%g", 1, 1))  # a group's: not counted
    m.update(TopicConfig("T0", 8, 8))  # an update: no new topic
    assert m.counted() == 3
    assert m.delete("T1") and not m.delete("T1")
    assert m.counted() == 2
    m.table.setdefault("T9", TopicConfig("T9", 1, 1))  # the controller adds the trace topic so
    assert m.counted() == 3
    m.check_room_for(["T0", "T3", "T4"])  # two new: room for exactly two
    with pytest.raises(RemotingError) as e:
        m.check_room_for(["T3", "T4", "T5"])
    assert e.value.reason == Reason.TOO_MANY_TOPICS and "maxTopics (5)" in str(e.value)
    m.check_room("%DLQ%g")  # never counted


def test_a_list_is_one_change(tmp_path: Path) -> None:
    m = manager(tmp_path, None)
    before, revision = m.data_version["counter"], m.revision
    m.update_many([TopicConfig(f"T{i}", 4, 4) for i in range(50)])
    assert m.data_version["counter"] == before + 1 and m.revision == revision + 1


# ---------------------------------------------------------------------------------------------------------- journal
def test_replay_stops_at_a_torn_or_damaged_line() -> None:
    lines = [encode_line({"put": i}) for i in range(3)]
    assert list(read_lines(b"".join(lines))) == [{"put": 0}, {"put": 1}, {"put": 2}]
    assert list(read_lines(b"".join(lines) + lines[0][:-5])) == [{"put": 0}, {"put": 1}, {"put": 2}]
    damaged = lines[1].replace(b'"put":1', b'"put":7')
    assert list(read_lines(lines[0] + damaged + lines[2])) == [{"put": 0}]
    assert list(read_lines(lines[0] + b"\0" * 40 + b"\n" + lines[2])) == [{"put": 0}]


async def test_changes_are_in_the_journal_before_saved_and_survive_a_reload(tmp_path: Path) -> None:
    writer = ConfigWriter()
    m = manager(tmp_path, writer)
    m.update(TopicConfig("T1", 4, 4))
    m.update_many([TopicConfig(f"T{i}", 2, 2, attributes={"message.type": "FIFO"}) for i in range(2, 40)])
    assert m.delete("T3")
    await m.saved()
    assert not (tmp_path / "topics.json").exists()  # nothing rewrote the whole table: one line per change
    gens = m.journal.generations() if m.journal else []
    assert len(gens) == 1
    # a crash now: what the journal holds is the table
    again = manager(tmp_path, ConfigWriter())
    assert ours(again) == ours(m) and again.data_version == m.data_version
    await m.close()
    await writer.close()


async def test_a_compaction_writes_rocketmq_format_and_retires_the_journal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(topics_module, "COMPACT_MIN_BYTES", 4096)
    writer = ConfigWriter()
    m = manager(tmp_path, writer)
    for i in range(100):
        m.update(TopicConfig(f"T{i:03d}", 4, 4))
        await m.saved()
    await writer.flush()
    await m.close()
    doc = json.loads((tmp_path / "topics.json").read_text())
    assert set(doc) == {"dataVersion", "topicConfigTable"} and set(doc["dataVersion"]) == {"counter", "timestamp"}
    row = doc["topicConfigTable"]["T000"]
    assert row == {"order": False, "perm": 6, "readQueueNums": 4, "topicFilterType": "SINGLE_TAG",
                   "topicName": "T000", "topicSysFlag": 0, "writeQueueNums": 4}  # fmt: skip
    assert m.journal is not None
    gens = m.journal.generations()
    assert gens and gens[0][0] > 0, "the generations a compaction covers are deleted"
    left = sum(p.stat().st_size for _, p in gens)
    assert left <= (tmp_path / "topics.json").stat().st_size + 300, "compacted once it outgrows topics.json"
    again = manager(tmp_path, ConfigWriter())
    assert ours(again) == ours(m) and len(ours(m)) == 100 and again.data_version == m.data_version
    await writer.close()


async def test_a_snapshot_is_taken_once_per_write_not_per_change(tmp_path: Path) -> None:
    writer = ConfigWriter()
    gate = threading.Event()
    takes: list[int] = []

    def take() -> Any:
        takes.append(1)

        def encode() -> bytes:
            gate.wait(5)
            return b"{}"

        return encode

    path = tmp_path / "x.json"
    writer.save_lazy(path, take)
    await asyncio.sleep(0)  # the first write starts (and blocks in the thread)
    for _ in range(500):
        writer.save_lazy(path, take)
    gate.set()
    await writer.flush()
    assert len(takes) == 2
    await writer.close()


def test_every_crash_point_of_a_compaction_gives_the_same_table(tmp_path: Path) -> None:
    """A compaction's steps, stopped after each: the files on disk replay to the table the changes made."""

    def put(name: str, queues: int = 4) -> dict[str, Any]:
        return {"put": TopicConfig(name, queues, queues).to_json()}

    before = [put("X"), put("Y"), {"del": "X"}, put("Y", 8)]
    after = [put("X", 2), {"del": "Y"}, put("Z")]
    old_snapshot = {"dataVersion": {"counter": 1, "timestamp": 1},
                    "topicConfigTable": {"Y": TopicConfig("Y", 1, 1).to_json()}}  # fmt: skip
    new_snapshot = {"dataVersion": {"counter": 5, "timestamp": 5},
                    "topicConfigTable": {"Y": TopicConfig("Y", 8, 8).to_json()}}  # fmt: skip
    expected = {"X": TopicConfig("X", 2, 2), "Z": TopicConfig("Z", 4, 4)}
    stages = {  # (topics.json, generation 0, generation 1)
        "rotated, snapshot not written": (old_snapshot, before, after),
        "snapshot written, old generation not deleted": (new_snapshot, before, after),
        "old generation deleted": (new_snapshot, None, after),
    }
    for name, (snapshot, gen0, gen1) in stages.items():
        d = tmp_path / name.replace(" ", "_").replace(",", "")
        d.mkdir()
        (d / "topics.json").write_bytes(orjson.dumps(snapshot))
        for gen, entries in ((0, gen0), (1, gen1)):
            if entries is not None:
                (d / f"topics.json.journal.{gen}").write_bytes(b"".join(encode_line(e) for e in entries))
        m = manager(d, ConfigWriter())
        assert ours(m) == expected, name


async def test_appends_after_a_reload_go_to_a_new_generation(tmp_path: Path) -> None:
    (tmp_path / "topics.json.journal.3").write_bytes(encode_line({"put": TopicConfig("T1", 4, 4).to_json()}) + b"12")
    writer = ConfigWriter()
    m = manager(tmp_path, writer)
    assert "T1" in m.table
    m.update(TopicConfig("T2", 4, 4))
    await m.saved()
    await m.close()
    assert m.journal is not None and [g for g, _ in m.journal.generations()] == [3, 4]
    assert set(ours(manager(tmp_path, ConfigWriter()))) == {"T1", "T2"}
    await writer.close()


async def test_a_failed_append_is_written_again_with_the_next_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = Journal(tmp_path / "topics.json")
    journal.replay()
    real = os.fdatasync
    fail = [True]

    def fdatasync(fd: int) -> None:
        if fail.pop() if fail else False:
            raise OSError(28, "No space left on device")
        real(fd)

    monkeypatch.setattr(os, "fdatasync", fdatasync)
    journal.append({"put": 1})
    with pytest.raises(OSError):
        await journal.synced()
    journal.append({"put": 2})
    await journal.synced()
    await journal.close()
    assert [g for g, _ in journal.generations()] == [0, 1], "the next lines go to a new generation"
    assert Journal(tmp_path / "topics.json").replay() == [{"put": 1}, {"put": 1}, {"put": 2}]


def test_without_a_loop_a_change_writes_the_file(tmp_path: Path) -> None:
    m = manager(tmp_path, ConfigWriter())
    m.update(TopicConfig("T1", 4, 4))
    assert "T1" in json.loads((tmp_path / "topics.json").read_text())["topicConfigTable"]
    assert Journal(tmp_path / "topics.json").generations() == []


# ---------------------------------------------------------------------------------------------------------- copies
def test_replace_all_journals_only_the_difference(tmp_path: Path) -> None:
    m = manager(tmp_path, None)
    m.update_many([TopicConfig(f"T{i}", 4, 4) for i in range(10)])
    master: dict[str, Any] = {"dataVersion": {"counter": 77, "timestamp": 9}, "topicConfigTable": {
        n: tc.to_json() for n, tc in m.table.items() if n != "T3"}}  # fmt: skip
    master["topicConfigTable"]["T4"] = TopicConfig("T4", 8, 8).to_json()
    assert m.replace_all(master)
    assert "T3" not in m.table and m.table["T4"].read_queue_nums == 8 and m.data_version["counter"] == 77
    assert m.counted() == 9
    assert not m.replace_all(master)


def test_pages_are_in_name_order_and_follow_changes(tmp_path: Path) -> None:
    m = manager(tmp_path, None)
    m.update_many([TopicConfig(f"T{i:02d}", 4, 4) for i in range(30)])
    names = sorted(m.table)
    assert list(m.page(0, 5)) == names[:5] and list(m.page(5, 5)) == names[5:10]
    m.update(TopicConfig("T000", 1, 1))
    assert "T000" in m.page(0, len(m.table))
    assert _same_version(orjson.dumps({**m.data_version, "stateVersion": 0}).decode(), m.data_version)
    assert not _same_version("", m.data_version) and not _same_version("{", m.data_version)


# ---------------------------------------------------------------------------------------------------------- groups
async def test_groups_are_snapshotted_per_write_in_rocketmq_format(tmp_path: Path) -> None:
    writer = ConfigWriter()
    g = SubscriptionGroupManager(tmp_path, True, 16, writer=writer)
    for i in range(200):
        g.find(f"G{i}")
    g.update({"groupName": "G7", "retryMaxTimes": 3, "consumeMessageOrderly": True})
    await writer.flush()
    doc = json.loads((tmp_path / "subscriptionGroup.json").read_text())
    assert doc["subscriptionGroupTable"]["G7"]["retryMaxTimes"] == 3
    again = SubscriptionGroupManager(tmp_path, True, 16)
    again.load()
    assert again.table == g.table and again.table["G7"] == GroupConfig("G7", consumeMessageOrderly=True,
                                                                       retryMaxTimes=3)  # fmt: skip
    await writer.close()


# ---------------------------------------------------------------------------------------------------------- a slave
class _Master:
    """A pool whose one address answers GET_ALL_TOPIC_CONFIG from ``topics`` (the admin processor's code)."""

    def __init__(self, topics: TopicConfigManager) -> None:
        self.admin = cast(AdminProcessor, SimpleNamespace(topics=topics))
        self.asked: list[dict[str, Any]] = []
        self.between_pages: Callable[[], None] | None = None

    async def request(self, addr: str, cmd: RemotingCommand, timeout: float = 3.0) -> RemotingCommand:
        assert cmd.code == RequestCode.GET_ALL_TOPIC_CONFIG
        cmd.ext_fields = {k: str(v) for k, v in cmd.ext_fields.items()}
        self.asked.append(dict(cmd.ext_fields))
        resp = await AdminProcessor.all_topic_config(self.admin, Connection(), cmd)
        if self.between_pages is not None and cmd.ext_fields.get("maxTopicNum") != "1":
            self.between_pages()
            self.between_pages = None
        return resp


async def test_a_slave_copies_in_pages_and_skips_an_unchanged_master(tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    (tmp_path / "s").mkdir()
    master, slave = manager(tmp_path / "m", None), manager(tmp_path / "s", None)
    master.update_many([TopicConfig(f"T{i:05d}", 4, 4) for i in range(5000)])
    pool = _Master(master)
    none = cast(Any, None)  # groups, offsets, delay progress, filters: not copied here
    sync = MetadataSync(cast(ConnectionPool, pool), lambda: "m:1", slave, none, none, none, none, lambda: 0)
    await sync._copy_topics("m:1", False)
    assert slave.table == master.table and slave.data_version == master.data_version
    assert len(pool.asked) == 1 + 3  # a one-topic probe, then 5,007 topics in pages of 2,000
    pool.asked.clear()
    await sync._copy_topics("m:1", False)
    assert len(pool.asked) == 1, "an unchanged master: its one-topic probe only"
    master.delete("T00007")
    pool.between_pages = lambda: master.update(TopicConfig("T99999", 1, 1))  # changes while the slave pages
    pool.asked.clear()
    await sync._copy_topics("m:1", False)
    assert slave.table == master.table and "T00007" not in slave.table and "T99999" in slave.table
    assert len(pool.asked) == 1 + 2 + 3, "the page that saw the change, then from the first page again"


async def test_stored_topics_reads_the_file_and_its_journal(tmp_path: Path) -> None:
    writer = ConfigWriter()
    m = manager(tmp_path, writer)
    m.update_many([TopicConfig("T1", 4, 4), TopicConfig("T2", 4, 4)])
    m.delete("T1")
    await m.saved()
    stored = stored_topics(tmp_path)
    assert "T1" not in stored and stored["T2"]["writeQueueNums"] == 4
    await m.close()
    await writer.close()


async def test_topics_json_is_current_soon_after_a_burst(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(topics_module, "COMPACT_IDLE_S", 0.05)
    writer = ConfigWriter()
    m = manager(tmp_path, writer)
    m.update_many([TopicConfig(f"T{i}", 4, 4) for i in range(10)])
    await m.saved()
    path = tmp_path / "topics.json"
    async with asyncio.timeout(10):
        while not (path.exists() and "T9" in json.loads(path.read_text())["topicConfigTable"]):
            await asyncio.sleep(0.01)  # the state waited for: the idle compaction wrote the file
    await writer.flush()
    await m.close()
    assert m.journal is not None and m.journal.generations() == []
    await writer.close()
