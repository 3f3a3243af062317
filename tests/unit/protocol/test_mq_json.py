"""RocketMQ's queue-keyed JSON (protocol/mq_json.py) and the admin bodies built on it (protocol/admin_bodies.py):
what fastjson writes reads back, what we write is that form, and hostile text is refused with ValueError only."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sievemq.protocol.admin_bodies import (
    Connection,
    ConsumerConnection,
    ConsumeStats,
    OffsetWrapper,
    decode_consume_stats,
    decode_consumer_connection,
    decode_group_list,
    decode_reset_body,
    encode_consume_stats,
    encode_consumer_connection,
    encode_group_list,
    encode_reset_body,
    encode_reset_body_for_c,
)
from sievemq.protocol.mq_json import MAX_DEPTH, QueueKey, QueueMap, dumps, loads

# A ConsumeStats body as RocketMQ 4.9's broker writes it (fastjson: queue objects as keys, fields sorted).
FASTJSON_CONSUME_STATS = (
    b'{"consumeTps":0.5,"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"TopicTest"}:'
    b'{"brokerOffset":12,"consumerOffset":10,"lastTimestamp":1700000000123},'
    b'{"brokerName":"broker-a","queueId":1,"topic":"TopicTest"}:{"brokerOffset":3,"consumerOffset":3,'
    b'"lastTimestamp":0}}}'
)

names = st.text(alphabet="abcXYZ09_-%|", min_size=1, max_size=12)
keys = st.builds(QueueKey, names, names, st.integers(0, 2**31 - 1))
scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1), st.text(max_size=20),
                    st.floats(allow_nan=False, allow_infinity=False))  # fmt: skip
documents = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.text(max_size=8), inner, max_size=4),
        st.dictionaries(keys, inner, max_size=4).map(QueueMap),
    ),
    max_leaves=20,
)


def test_reads_what_rocketmq_writes() -> None:
    stats = decode_consume_stats(FASTJSON_CONSUME_STATS)
    assert stats.consume_tps == 0.5
    assert stats.offsets == {
        QueueKey("TopicTest", "broker-a", 0): OffsetWrapper(12, 10, 10, 1700000000123),
        QueueKey("TopicTest", "broker-a", 1): OffsetWrapper(3, 3, 3, 0),
    }


def test_writes_queue_objects_as_keys_as_rocketmq_reads_them() -> None:
    body = encode_consume_stats(ConsumeStats({QueueKey("T", "b", 1): OffsetWrapper(5, 4, 4, 9)}))
    assert body == (b'{"offsetTable":{{"brokerName":"b","queueId":1,"topic":"T"}:'
                    b'{"brokerOffset":5,"consumerOffset":4,"lastTimestamp":9,"pullOffset":4}}}')  # fmt: skip
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(body)  # not JSON: exactly RocketMQ's form
    reset = b'{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:7}}'
    assert encode_reset_body({QueueKey("T", "b", 0): 7}) == reset


@settings(max_examples=300, deadline=None)
@given(documents)
def test_any_document_reads_back(doc: object) -> None:
    assert loads(dumps(doc)) == _plain(doc)


def _plain(doc: object) -> object:
    """What ``loads`` gives back for ``doc``: QueueMaps as dicts keyed by QueueKey, tuples as lists, floats as read."""
    if isinstance(doc, dict):
        return {k: _plain(v) for k, v in doc.items()}
    if isinstance(doc, list | tuple):
        return [_plain(v) for v in doc]
    if isinstance(doc, float):
        return orjson.loads(orjson.dumps(doc))
    return doc


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=60), st.binary(max_size=60)))
def test_hostile_text_is_refused_with_value_error_only(data: str | bytes) -> None:
    try:
        loads(data)
    except ValueError:
        pass


@pytest.mark.parametrize(
    "text",
    [
        "[" * (MAX_DEPTH + 2) + '{{"brokerName":"b","queueId":0,"topic":"t"}:1}' + "]" * (MAX_DEPTH + 2),  # deep
        '{{"a":1}:2}',  # an object key that is not a queue
        '{1.5:2}',  # a number key that is not a whole number
        '{true:2}',  # nor a literal
        '{{"brokerName":"b","queueId":true,"topic":"t"}:1}',  # a boolean queue id
        '{{"brokerName":"b","queueId":0,"topic":"t"}:1',  # cut
        '{{"brokerName":"b","queueId":0,"topic":"t"}:1} x',  # trailing text
        "\ud800",  # not encodable
    ],
)
def test_malformed(text: str) -> None:
    with pytest.raises(ValueError):
        loads(text.encode("utf-8", errors="surrogatepass"))


def test_number_keys_as_rocketmq_writes_them() -> None:
    """RocketMQ writes a map keyed by numbers with bare keys (the name server's cluster info, a broker's
    GET_ALL_CONSUMER_OFFSET): read as their text, as a JSON writer would have quoted them."""
    cluster = b'{"brokerAddrTable":{"b":{"brokerAddrs":{0:"127.0.0.1:10911",-1:"x"}}},"n":{"0":1}}'
    assert loads(cluster) == {"brokerAddrTable": {"b": {"brokerAddrs": {"0": "127.0.0.1:10911", "-1": "x"}}},
                              "n": {"0": 1}}  # fmt: skip
    assert loads(b'{"offsetTable":{"T@g":{0:2,1:3}}}') == {"offsetTable": {"T@g": {"0": 2, "1": 3}}}


def test_deep_nesting_never_recurses_without_bound() -> None:
    queue_map = '{{"brokerName":"b","queueId":0,"topic":"t"}:1}'
    with pytest.raises(ValueError, match="deeper"):
        loads("[" * 100_000 + queue_map + "]" * 100_000)
    with pytest.raises(ValueError):
        loads("[" * 100_000 + "]" * 100_000)  # plain JSON: orjson's own limit


def test_reset_body_in_both_forms() -> None:
    table = {QueueKey("T", "b", 1): 4, QueueKey("T", "b", 0): 2}
    assert decode_reset_body(encode_reset_body(table)) == table
    assert orjson.loads(encode_reset_body_for_c(table)) == {"offsetTable": [
        {"brokerName": "b", "offset": 2, "queueId": 0, "topic": "T"},
        {"brokerName": "b", "offset": 4, "queueId": 1, "topic": "T"}]}  # fmt: skip
    assert decode_reset_body(encode_reset_body_for_c(table)) == table
    for bad in (b'{"offsetTable":[{"topic":"T"}]}', b'{"offsetTable":{"T":1}}', b"[]",
                b'{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:"x"}}'):  # fmt: skip
        with pytest.raises(ValueError):
            decode_reset_body(bad)


def test_consumer_connection_and_group_list() -> None:
    cc = ConsumerConnection([Connection("c1", "1.2.3.4:5", "JAVA", 401)], {"T": {"subString": "*"}},
                            "CONSUME_PASSIVELY", "CLUSTERING", "CONSUME_FROM_LAST_OFFSET")  # fmt: skip
    assert decode_consumer_connection(encode_consumer_connection(cc)) == cc
    assert decode_group_list(encode_group_list(["b", "a"])) == ["a", "b"]
    with pytest.raises(ValueError):
        decode_group_list(b'{"groupList":[1]}')
    with pytest.raises(ValueError):
        decode_consumer_connection(b'{"connectionSet":[{"clientId":3}]}')
