"""The consumer offset table's indexes (groups of a topic, topics of a group) and its incremental snapshot agree with
the table after any mix of commits, resets, merges, loads and removals."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sievemq.broker.offsets import ConsumerOffsetManager

names = st.sampled_from(["a", "b", "c"])
ops = st.lists(st.tuples(st.sampled_from(["commit", "reset", "merge", "remove_topic", "remove_group", "snap"]),
                         names, names, st.integers(0, 3), st.integers(0, 50)), max_size=40)  # fmt: skip


def _expected(m: ConsumerOffsetManager) -> dict[str, Any]:
    return {k: {str(q): o for q, o in sorted(v.items())} for k, v in m.table.items()}


@settings(max_examples=60, deadline=None)
@given(ops)
def test_indexes_and_snapshots_follow_the_table(steps: list[tuple[str, str, str, int, int]]) -> None:
    saved: list[dict[str, Any]] = []
    m = ConsumerOffsetManager(Path("/nonexistent"), save=lambda _p, doc: saved.append(doc))
    for op, topic, group, q, offset in steps:
        if op == "commit":
            m.commit(group, topic, q, offset)
        elif op == "reset":
            m.assign_reset(group, topic, q, offset)
        elif op == "merge":
            m.merge_max({f"{topic}@{group}": {str(q): offset}})
        elif op == "remove_topic":
            m.remove_topic(topic)
        elif op == "remove_group":
            m.remove_group(group)
        else:
            m.persist(force=True)
            assert saved[-1]["offsetTable"] == _expected(m)
    for topic in "abc":
        assert m.groups_of_topic(topic) == sorted(k.split("@")[1] for k in m.table if k.split("@")[0] == topic)
    for group in "abc":
        assert m.topics_of_group(group) == sorted(m.offsets_of_group(group))
        assert m.offsets_of_group(group) == {k.split("@")[0]: v for k, v in sorted(m.table.items())
                                             if k.split("@")[1] == group}  # fmt: skip
    assert m.groups() == {k.split("@")[1] for k in m.table}
    copy = m.take_snapshot(force=True, mark=False)
    assert copy is not None and copy["offsetTable"] == _expected(m)
    m.persist(force=True)
    assert saved[-1]["offsetTable"] == _expected(m)


def test_a_loaded_table_is_indexed(tmp_path: Path) -> None:
    (tmp_path / "consumerOffset.json").write_text('{"offsetTable": {"T@G": {"0": 5, "1": 7}, "U@G": {"0": 1}}}')
    m = ConsumerOffsetManager(tmp_path)
    m.load()
    assert m.groups_of_topic("T") == ["G"]
    assert m.offsets_of_group("G") == {"T": {0: 5, 1: 7}, "U": {0: 1}}
    assert m.take_snapshot(force=True) == {"offsetTable": {"T@G": {"0": 5, "1": 7}, "U@G": {"0": 1}}}
