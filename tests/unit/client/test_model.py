"""The client's pure pieces: message model, selectors, validation, tag re-check, local offsets, queue choice."""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest

from sievemq.client.errors import MessageValidationError
from sievemq.client.message import (
    ConsumeFrom,
    Message,
    MessageQueue,
    Selector,
    decompress_body,
    restore_retry_topic,
)
from sievemq.client.offset_store import LocalFileOffsetStore
from sievemq.client.options import parse_namesrv
from sievemq.client.producer import PublishInfo, shard_selector
from sievemq.client.subscription import SubscriptionEntry, refusals_for
from sievemq.client.validation import validate_batch, validate_group, validate_message, validate_topic
from sievemq.protocol.message import MessageExt
from sievemq.protocol.reasons import RefusedSubscription


def test_wire_properties() -> None:
    m = Message("T", b"x", tags="TagA", keys=["a", "b"], properties={"p": "1"}, delay_level=3, wait_store=False)
    assert m.wire_properties() == {"p": "1", "TAGS": "TagA", "KEYS": "a b", "DELAY": "3", "WAIT": "false"}
    assert Message("T", b"x", keys="a  b").key_list() == ["a", "b"]
    assert Message("T", b"x").wire_properties() == {"WAIT": "true"}


def test_selectors() -> None:
    assert Selector.of(None) == Selector("*", "TAG")
    assert Selector.of("TagA || TagB") == Selector("TagA || TagB", "TAG")
    assert Selector.tag(["A", "B"]).expression == "A || B"
    assert Selector.tag("  ").expression == "*"
    s = Selector.sql(" a > 1 ")
    assert s.expression == "a > 1" and s.expression_type == "SQL92" and not s.is_tag
    with pytest.raises(ValueError):
        Selector.sql("  ")


def test_consume_from_parse() -> None:
    assert ConsumeFrom.parse("first") is ConsumeFrom.FIRST
    assert ConsumeFrom.parse("CONSUME_FROM_TIMESTAMP") is ConsumeFrom.TIMESTAMP
    assert ConsumeFrom.parse(ConsumeFrom.LAST) is ConsumeFrom.LAST
    with pytest.raises(ValueError, match="last, first or timestamp"):
        ConsumeFrom.parse("middle")


def test_message_queue_key_round_trip_and_order() -> None:
    mq = MessageQueue("%RETRY%g@x", "broker-a", 3)
    assert MessageQueue.from_key(mq.key()) == mq
    assert sorted([MessageQueue("T", "b", 0), MessageQueue("T", "a", 1), MessageQueue("S", "z", 9)]) == [
        MessageQueue("S", "z", 9),
        MessageQueue("T", "a", 1),
        MessageQueue("T", "b", 0),
    ]


def test_decompress_and_retry_topic_restore() -> None:
    m = MessageExt("%RETRY%g", zlib.compress(b"payload"), sys_flag=0x1, properties={"RETRY_TOPIC": "orders"})
    decompress_body(m)
    restore_retry_topic(m, "g")
    assert m.body == b"payload" and m.topic == "orders"
    zlib_typed = MessageExt("T", zlib.compress(b"p2"), sys_flag=0x301)
    decompress_body(zlib_typed)
    assert zlib_typed.body == b"p2"
    broken = MessageExt("T", b"not zlib", sys_flag=0x1)
    decompress_body(broken)  # logged, left as stored
    assert broken.body == b"not zlib"
    other = MessageExt("%RETRY%other", b"", properties={"RETRY_TOPIC": "orders"})
    restore_retry_topic(other, "g")
    assert other.topic == "%RETRY%other"


@pytest.mark.parametrize("topic", ["a" * 127, "%RETRY%g", "a|b", "A-b_9"])
def test_valid_topics(topic: str) -> None:
    validate_topic(topic, for_send=False)


@pytest.mark.parametrize("topic", ["", " ", "a" * 128, "a b", "a.b", "ü", "a/b"])
def test_invalid_topics(topic: str) -> None:
    with pytest.raises(MessageValidationError):
        validate_topic(topic)


def test_group_and_message_validation() -> None:
    validate_group("orders-c")
    for bad in ("", "a b", "x" * 256):
        with pytest.raises(MessageValidationError):
            validate_group(bad)
    with pytest.raises(MessageValidationError, match="bytes"):
        validate_message(Message("T", "text"))  # type: ignore[arg-type]
    with pytest.raises(MessageValidationError, match="larger than the limit 10"):
        validate_message(Message("T", b"x" * 11), max_body=10)
    with pytest.raises(MessageValidationError, match=r"sievemq\.Message"):
        validate_message(MessageExt("T", b"x"))  # type: ignore[arg-type]
    with pytest.raises(MessageValidationError, match="retry topic"):
        validate_batch([Message("%RETRY%g", b"x")])
    with pytest.raises(MessageValidationError, match="wait_store"):
        validate_batch([Message("T", b"x"), Message("T", b"y", wait_store=False)])


def test_tag_recheck_drops_hash_collisions() -> None:
    entry = SubscriptionEntry.create("T", "Aa || TagB")
    sub = entry.to_subscription()
    assert sub.sub_string == "Aa || TagB" and sub.expression_type == "TAG" and sub.tags == {"Aa", "TagB"}
    got = entry.accept(
        [MessageExt("T", b"1", properties={"TAGS": "Aa"}), MessageExt("T", b"2", properties={"TAGS": "BB"}),
         MessageExt("T", b"3"), MessageExt("T", b"4", properties={"TAGS": "TagB"})],
        min_offset=0,
        max_offset=9,
    )  # fmt: skip
    assert [m.body for m in got] == [b"1", b"4"]
    assert got[0].properties["MIN_OFFSET"] == "0" and got[0].properties["MAX_OFFSET"] == "9"
    assert len(SubscriptionEntry.create("T", "*").accept([MessageExt("T", b"x")], 0, 1)) == 1
    sql = SubscriptionEntry.create("T", Selector.sql("a = 1"))
    assert sql.tags is None and sql.to_subscription().expression_type == "SQL92"
    with pytest.raises(ValueError):
        SubscriptionEntry.create("T", "||")


def test_refusals_for_picks_the_groups_remarks() -> None:
    refused = [
        RefusedSubscription("g1", "T", "inconsistent subscription: consumer group 'g1' subscribes ..."),
        RefusedSubscription("g2", "T", "consumer group 'g2' ..."),
    ]
    assert refusals_for("g1", refused) == [refused[0].remark]
    assert refusals_for("g", refused) == []


def test_local_offset_store_survives_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "c@1" / "g" / "offsets.json"
    store = LocalFileOffsetStore(path)
    mq = MessageQueue("T", "broker-a", 1)
    store.update(mq, 7)
    store.update(mq, 5, increase_only=True)
    assert store.read_memory(mq) == 7
    store._write()
    store.update(mq, 9)
    store._write()
    again = LocalFileOffsetStore(path)
    assert again.read_memory(mq) == 9
    assert path.with_suffix(".json.bak").exists()
    path.unlink()
    assert LocalFileOffsetStore(path).read_memory(mq) == 7  # falls back to the previous file


def test_round_robin_avoids_failed_brokers_and_shard_keys_are_stable() -> None:
    qs = [MessageQueue("T", b, i) for b in ("a", "b") for i in range(2)]
    info = PublishInfo(qs, counter=0)
    assert [info.select(set(), None).queue_id for _ in range(4)] == [0, 1, 0, 1]
    assert {info.select({"a"}, None).broker_name for _ in range(6)} == {"b"}
    assert info.select(set(), "b").broker_name == "a"
    assert info.select({"a", "b"}, "a").broker_name == "b"  # all avoided: at least not the last failed one
    sel = shard_selector("user-42")
    assert len({sel(qs, Message("T", b"x")) for _ in range(5)}) == 1
    assert shard_selector("user-42")(qs, Message("T", b"x")) == sel(qs, Message("T", b"y"))


def test_parse_namesrv(monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_namesrv("a:1; b:2") == ("a:1", "b:2")
    assert parse_namesrv(["a:1"]) == ("a:1",)
    monkeypatch.setenv("SIEVEMQ_NAMESRV", "env:9")
    assert parse_namesrv(None) == ("env:9",)
    with pytest.raises(ValueError):
        parse_namesrv("nohost")
