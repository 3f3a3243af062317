"""RocketMQ's compressed RegisterBrokerBody (protocol/register_body.py) against bytes RocketMQ 5.5.0's own
``RegisterBrokerBody.encode(true)`` produced, and its limits on hostile bodies."""

from __future__ import annotations

import struct
import zlib

import orjson
import pytest

from sievemq.protocol import register_body as rb
from sievemq.protocol.names import IllegalName
from sievemq.protocol.route import TopicConfig

# RocketMQ 5.5.0: a body with DataVersion(timestamp 1700000000123, counter 7), topics %RETRY%g1 (1/1 queues, perm 6,
# attribute +message.type=FIFO) and TopicA (4/4, perm 6), filter server 127.0.0.1:40001; encode(true) gave JAVA_BODY,
# and Java's InflaterInputStream read it back as JAVA_INFLATED.
JAVA_BODY = bytes.fromhex(
    "78da636060b0a8564ace2fcd2b492d52b232d7512a2e492c490d4b2d2acecccf53b232d0512ac9cc4d050ae6162859199a1b4081a191712d0"
    "3030313101bab06b9860445aaa61b2a80a09942b0a79fbb8f6b7c88a3bb42b59236507371627aaa5e496541aa9295929ba79bbf1248ab5448"
    "7e4166b2a3820910a2ea01c90a472b191a99eb1900a1a19509c842a558a030030058232c03"
)
JAVA_INFLATED = bytes.fromhex(
    "000000387b22636f756e746572223a372c22737461746556657273696f6e223a302c2274696d657374616d70223a313730303030303030"
    "303132337d00000002000000332552455452592567312031203120362053494e474c455f544147207b222b6d6573736167652e7479706522"
    "3a224649464f227d0000001a546f706963412034203420362053494e474c455f544147207b7d000000135b223132372e302e302e313a3430"
    "303031225d00000000"
)
RETRY = TopicConfig("%RETRY%g1", 1, 1, 6, attributes={"+message.type": "FIFO"})
TOPIC_A = TopicConfig("TopicA", 4, 4, 6)
DV = {"counter": 7, "timestamp": 1700000000123}


def entry(text: bytes) -> bytes:
    return struct.pack(">i", len(text)) + text


def body(*topic_entries: bytes, count: int | None = None, tail: bytes = b"\x00\x00\x00\x02[]\x00\x00\x00\x00") -> bytes:
    dv = b'{"counter":1,"stateVersion":0,"timestamp":2}'
    n = len(topic_entries) if count is None else count
    return zlib.compress(entry(dv) + struct.pack(">i", n) + b"".join(topic_entries) + tail)


def test_java_bytes_decode() -> None:
    assert zlib.decompress(JAVA_BODY) == JAVA_INFLATED
    got = rb.decode(JAVA_BODY, compressed=True)
    assert got.data_version == {"counter": 7, "stateVersion": 0, "timestamp": 1700000000123}
    assert got.topics == [RETRY, TOPIC_A]
    assert got.filter_servers == ["127.0.0.1:40001"]
    assert got.mapping_count == 0


def test_encode_gives_javas_bytes_once_inflated() -> None:
    ours = rb.encode_compressed(DV, [RETRY, TOPIC_A], ["127.0.0.1:40001"])
    assert zlib.decompress(ours) == JAVA_INFLATED
    assert rb.encode_compressed(DV, [RETRY, TOPIC_A], ["127.0.0.1:40001"], level=9)[:2] == JAVA_BODY[:2]  # 78 da


def test_the_text_form_carries_no_sys_flag_nor_order() -> None:
    tc = TopicConfig("T", 8, 4, 2, "MULTI_TAG", topic_sys_flag=3, order=True)
    assert rb.topic_text(tc) == b"T 8 4 2 MULTI_TAG {}"
    back = rb.decode_compressed(rb.encode_compressed(DV, [tc], [])).topics
    assert back == [TopicConfig("T", 8, 4, 2, "MULTI_TAG")]


def test_compressed_is_recognised_without_the_header_flag() -> None:
    # RocketMQ 5.x brokers send compressed bodies with compressed=false
    assert rb.looks_compressed(JAVA_BODY)
    assert rb.decode(JAVA_BODY, compressed=False).topics == [RETRY, TOPIC_A]
    js = rb.encode_json(DV, [TOPIC_A], [])
    assert not rb.looks_compressed(js) and not rb.looks_compressed(b" \n{}") and not rb.looks_compressed(b"")
    assert rb.decode(js, compressed=False).topics == [TOPIC_A]
    assert rb.decode(b"", compressed=True) == rb.RegisterBody()


def test_json_form_round_trip_keeps_everything() -> None:
    tc = TopicConfig("T", 8, 4, 2, "MULTI_TAG", topic_sys_flag=3, order=True, attributes={"+message.type": "FIFO"})
    got = rb.decode_json(rb.encode_json(DV, [tc, TOPIC_A], ["a:1"]))
    assert got.topics == [tc, TOPIC_A] and got.filter_servers == ["a:1"]
    assert rb.version_key(got.data_version) == (0, 1700000000123, 7)


def test_large_table_round_trip() -> None:
    topics = [TopicConfig(f"topic-{i:06d}", 4, 4) for i in range(20_000)]
    encoded = rb.encode_compressed(DV, topics, [])
    assert len(encoded) < 100_000  # 20,000 topics: ~1 MB as JSON
    assert rb.decode_compressed(encoded).topics == topics


def test_version_key_reads_dataversions_as_rocketmq_compares_them() -> None:
    assert rb.version_key({"counter": 1, "timestamp": 2}) == rb.version_key(
        {"counter": 1, "stateVersion": 0, "timestamp": 2}
    )
    assert rb.version_key(None) == rb.version_key([1]) == rb.version_key({"counter": "x"}) == (0, 0, 0)


def test_table_part() -> None:
    assert rb.table_part(None) is None and rb.table_part("") is None
    assert rb.table_part("1/1") == (1, 1) and rb.table_part("3/7") == (3, 7)
    for bad in ("0/1", "2/1", "1", "a/b", "1/-1", "1/"):
        with pytest.raises(ValueError, match="topicTablePart"):
            rb.table_part(bad)


# ------------------------------------------------------------------ hostile bodies
def test_a_body_inflating_past_the_cap_is_refused() -> None:
    z = zlib.compressobj()
    bomb = b"".join(z.compress(bytes(1 << 20)) for _ in range(3)) + z.flush()
    assert len(bomb) < 10_000
    with pytest.raises(rb.BodyError, match="inflates past 2097152 bytes"):
        rb.decode_compressed(bomb, limit=2 << 20)
    z = zlib.compressobj()
    bomb = b"".join(z.compress(bytes(1 << 20)) for _ in range(rb.MAX_INFLATED_BYTES // (1 << 20) + 1)) + z.flush()
    with pytest.raises(rb.BodyError, match="inflates past"):
        rb.decode(bomb, compressed=True)  # the default cap


def test_topic_counts_past_the_cap_or_past_the_bytes_are_refused() -> None:
    with pytest.raises(rb.BodyError, match="lists 2000001 topics"):
        rb.decode_compressed(body(count=rb.MAX_TOPICS + 1))
    with pytest.raises(rb.BodyError, match="lists -1 topics"):
        rb.decode_compressed(body(count=-1))
    with pytest.raises(rb.BodyError, match="lists 1000 topics but holds"):
        rb.decode_compressed(body(entry(b"T 1 1 6 SINGLE_TAG"), count=1000, tail=b""))
    many = orjson.dumps({"topicConfigSerializeWrapper": {"topicConfigTable": {f"t{i}": {} for i in range(3)}}})
    with pytest.raises(rb.BodyError, match="lists 3 topics"):
        rb.decode_json(many, max_topics=2)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"not zlib at all", "not a zlib stream"),
        (zlib.compress(b"\x00\x00"), "ends inside the length of the DataVersion"),
        (zlib.compress(b"\x7f\xff\xff\xff{}"), "DataVersion of 2147483647 bytes"),
        (zlib.compress(entry(b"[1]")), "not a JSON object"),
        (zlib.compress(entry(b"{x")), "not JSON"),
        (body(struct.pack(">i", -5)), "a topic entry of -5 bytes"),
        (body(struct.pack(">i", 99) + b"T 1"), "a topic entry of 99 bytes"),
        (body(entry(b"T 1 1 6")), "has 4 fields"),
        (body(entry(b"T 1 1 6 OTHER_TAG")), "filter type 'OTHER_TAG'"),
        (body(entry(b"T x 1 6 SINGLE_TAG")), "must be integers"),
        (body(entry(b"T 1 1 99999999999 SINGLE_TAG")), r"0 to 2\^31-1"),
        (body(entry(b"T 1 1 6 SINGLE_TAG {}"), count=2, tail=b""), "ends inside the length of a topic entry"),
    ],
)
def test_malformed_bodies_are_refused_with_a_reason(raw: bytes, message: str) -> None:
    with pytest.raises(rb.BodyError, match=message):
        rb.decode(raw, compressed=True)


def test_a_bad_topic_name_is_an_illegal_name() -> None:
    with pytest.raises(IllegalName, match="illegal characters"):
        rb.decode(body(entry(b"bad/name 1 1 6 SINGLE_TAG {}")), compressed=True)
    with pytest.raises(IllegalName):
        rb.decode(body(entry(b"T" * 128 + b" 1 1 6 SINGLE_TAG {}")), compressed=True)


def test_lenient_where_rocketmq_is() -> None:
    got = rb.decode(body(entry(b"T 1 2 6 SINGLE_TAG {not json"), tail=b"\x00\x00\x00\x03[x]"), compressed=True)
    assert got.topics == [TopicConfig("T", 1, 2, 6)]  # attributes that do not parse are dropped
    assert got.filter_servers == [] and got.mapping_count == 0  # so is a filter list that does not parse
    assert rb.decode(body(tail=b""), compressed=True).filter_servers == []  # a 4.x body may end after the topics
