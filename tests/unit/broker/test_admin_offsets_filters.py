"""Offsets, administration and SQL92 filter bitmaps, called directly with their services (no sockets)."""

from __future__ import annotations

import asyncio

import orjson
import pytest

from sievemq.broker.filters import SqlFilter, build_filter
from sievemq.broker.processors.admin import AdminProcessor, AdminSettings
from sievemq.broker.processors.offsets import OffsetProcessor
from sievemq.errors import RemotingError
from sievemq.protocol.heartbeat import Subscription
from sievemq.protocol.message import MessageExt, encode_record
from sievemq.protocol.reasons import Reason
from sievemq.protocol.route import TopicConfig
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.store import CqExtUnit
from sievemq.store.jsonfile import read_json
from tests.unit.broker.conftest import BROKER, CLUSTER, Parts


def commit_cmd(offset: int, *, oneway: bool = False) -> RemotingCommand:
    fields = {"consumerGroup": "g", "topic": "T", "queueId": 0, "commitOffset": offset}
    return RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, fields, oneway=oneway)


def offset_processor(parts: Parts, **kw: bool) -> OffsetProcessor:
    """The processor over ``parts``, where group ``g`` and topic ``T`` (4 queues) exist."""
    parts.groups.find("g")
    parts.topics.update(TopicConfig("T", read_queue_nums=4, write_queue_nums=4))
    return OffsetProcessor(parts.offsets, parts.store, parts.writer, parts.groups, parts.topics, **kw)


async def test_sync_flush_commit_is_on_disk_when_answered(parts: Parts) -> None:
    p = offset_processor(parts, sync_flush=True)
    await p.update_consumer_offset(parts.conn(), commit_cmd(42))
    assert read_json(parts.offsets.path) == {"offsetTable": {"T@g": {"0": 42}}}
    await p.update_consumer_offset(parts.conn(), commit_cmd(43, oneway=True))  # one-way: saved in the background
    assert read_json(parts.offsets.path) == {"offsetTable": {"T@g": {"0": 42}}}
    parts.offsets.persist()
    await parts.writer.flush()
    assert read_json(parts.offsets.path) == {"offsetTable": {"T@g": {"0": 43}}}


async def test_query_consumer_offset(parts: Parts) -> None:
    p = offset_processor(parts)
    q = RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": "g", "topic": "T", "queueId": 0})
    assert (await p.query_consumer_offset(parts.conn(), q)).ext_fields == {"offset": "0"}, "new group, queue at 0"
    await p.update_consumer_offset(parts.conn(), commit_cmd(5))
    assert (await p.query_consumer_offset(parts.conn(), q)).ext_fields == {"offset": "5"}


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"consumerGroup": "nobody"}, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST),
        ({"topic": "Nowhere"}, ResponseCode.TOPIC_NOT_EXIST),
        ({"queueId": 4}, ResponseCode.INVALID_PARAMETER),
    ],
)
async def test_a_commit_names_what_exists(parts: Parts, fields: dict[str, object], code: int) -> None:
    """A group and topic the broker has, and a queue of the topic: nothing else grows the offset table."""
    p = offset_processor(parts)
    cmd = commit_cmd(7)
    cmd.ext_fields.update({k: str(v) for k, v in fields.items()})
    with pytest.raises(RemotingError) as e:
        await p.update_consumer_offset(parts.conn(), cmd)
    assert e.value.code == code
    assert parts.offsets.table == {}


async def test_topic_admin_is_on_disk_and_registered_when_answered(parts: Parts) -> None:
    registered: list[int] = []

    async def register_now() -> None:
        registered.append(len(read_json(parts.topics.path, {}).get("topicConfigTable", {})))

    admin = AdminProcessor(
        parts.topics, parts.groups, parts.offsets, parts.store, parts.consumers, parts.hold, parts.stats,
        parts.writer, register_now, AdminSettings(BROKER, CLUSTER, "10.1.2.3:10911", 4),
    )  # fmt: skip
    create = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "Made", "readQueueNums": 2})
    assert (await admin.create_topic(parts.conn(), create)).code == ResponseCode.SUCCESS
    assert "Made" in read_json(parts.topics.path)["topicConfigTable"] and registered, "written before registering"
    for bad in ({"topic": "TBW102"}, {"topic": CLUSTER}, {"topic": "X", "writeQueueNums": 5000}):
        with pytest.raises(RemotingError) as e:
            await admin.create_topic(parts.conn(), RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, bad))
        if "writeQueueNums" in bad:
            assert e.value.reason == Reason.INVALID_HEADER, e.value
    await parts.put("Made", b"x")
    delete = RemotingCommand.request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "Made"})
    await admin.delete_topic(parts.conn(), delete)
    assert "Made" not in read_json(parts.topics.path)["topicConfigTable"]
    assert "Made" not in parts.store.topic_queues()
    names = orjson.loads((await admin.topic_names(parts.conn(), RemotingCommand.request(23))).body)
    assert "Made" not in names["topicList"] and names["brokerAddr"] == "10.1.2.3:10911"


async def test_sql_filters_use_the_vectorised_bitmap_probe_and_trust_only_bitmaps_of_their_length(
    parts: Parts,
) -> None:
    entry = parts.filters.register("g", "T", "a > 5")
    assert entry is not None and len(entry.mask) == parts.filters.bloom.m // 8
    assert all(entry.mask[p >> 3] & (1 << (p & 7)) for p in entry.bit_positions)
    flt = build_filter(Subscription("T", "a > 5", "SQL92"), "g", parts.filters)
    assert isinstance(flt, SqlFilter)
    probe = flt.bitmap_probe()
    assert probe is not None and probe.mask == entry.mask, "the store can test a whole window at once"
    later = entry.born_time + 1
    miss = CqExtUnit(0, later, bytes(len(entry.mask)))
    assert not flt.match_cq(0, miss), "a bitmap of the right length without the group's bits: filtered out"
    assert flt.match_cq(0, CqExtUnit(0, later, bytes(len(entry.mask) + 2))), "other Bloom settings: not trusted"
    assert flt.match_cq(0, CqExtUnit(0, entry.born_time, bytes(len(entry.mask)))), "older than the filter"
    assert flt.match_cq(0, CqExtUnit(0, later, entry.mask))

    # End to end through the store: messages the group's filter did not match are skipped by their bitmaps.
    parts.topics.create_system_topic("T", 1)
    await asyncio.sleep(0.005)  # bitmaps count for messages stored after the filter's registration (ms)
    for a in (1, 9, 2, 8):
        await parts.put("T", str(a).encode(), a=str(a))
    before = flt.counts.filtered_by_bitmap
    result = parts.store.get_message("T", 0, 0, 32, flt)
    assert result.message_count == 2 and flt.counts.filtered_by_bitmap == before + 2


def test_a_bitmap_that_says_maybe_and_an_evaluation_that_says_no_count_as_a_false_positive(parts: Parts) -> None:
    entry = parts.filters.register("g", "T", "a > 5")
    assert entry is not None
    flt = build_filter(Subscription("T", "a > 5", "SQL92"), "g", parts.filters)
    assert isinstance(flt, SqlFilter)
    later = entry.born_time + 1
    record = memoryview(encode_record(MessageExt("T", b"x", properties={"a": "1"}, born_host=("10.0.0.1", 1),
                                                 store_host=("10.0.0.2", 2))))  # fmt: skip
    assert flt.match_cq(0, CqExtUnit(0, later, entry.mask)) and not flt.match_record(record)
    assert (flt.counts.filtered_by_evaluation, flt.counts.bitmap_false_positives) == (1, 1)
    # no bitmap to trust (a message stored before the filter): evaluated, filtered out, no false positive
    assert flt.match_cq(0, CqExtUnit(0, entry.born_time, entry.mask)) and not flt.match_record(record)
    assert (flt.counts.filtered_by_evaluation, flt.counts.bitmap_false_positives) == (2, 1)
    assert parts.filters.counts_for("g", "T").as_dict()["bitmap_false_positives"] == 1
