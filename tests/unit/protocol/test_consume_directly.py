"""CONSUME_MESSAGE_DIRECTLY's pure parts (docs/admin.md §8): the header as it arrives, the result body both ways
(RocketMQ's JSON field names), and hostile input."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sievemq.protocol.consume_directly import (
    DEFAULT_TIMEOUT_MS,
    MAX_TIMEOUT_MS,
    MIN_TIMEOUT_MS,
    CMResult,
    ConsumeDirectlyResult,
    DirectlyHeader,
)


def test_a_header_reads_back_and_its_timeout_is_held_within_bounds() -> None:
    h = DirectlyHeader("g", "10.0.0.1@1", "0A00000100002A9F0000000000000000", 2500, "broker-a")
    assert DirectlyHeader.parse({k: str(v) for k, v in h.to_fields().items()}) == h
    base = {"consumerGroup": "g", "clientId": "c", "msgId": "m"}
    assert DirectlyHeader.parse(base).timeout_ms == DEFAULT_TIMEOUT_MS
    assert DirectlyHeader.parse({**base, "timeoutMillis": "1"}).timeout_ms == MIN_TIMEOUT_MS
    assert DirectlyHeader.parse({**base, "timeoutMillis": "999999999"}).timeout_ms == MAX_TIMEOUT_MS


@pytest.mark.parametrize(
    "fields",
    [
        {"clientId": "c", "msgId": "m"},
        {"consumerGroup": "g", "msgId": "m"},
        {"consumerGroup": "g", "clientId": "c", "msgId": ""},
        {"consumerGroup": "g" * 256, "clientId": "c", "msgId": "m"},
        {"consumerGroup": "g", "clientId": "c", "msgId": "m", "timeoutMillis": "-5"},
        {"consumerGroup": "g", "clientId": "c", "msgId": "m", "timeoutMillis": "1e3"},
        {"consumerGroup": "g", "clientId": "c", "msgId": "m", "timeoutMillis": "1" * 40},
    ],
)
def test_a_broken_header_is_refused(fields: dict[str, str]) -> None:
    with pytest.raises(ValueError):
        DirectlyHeader.parse(fields)


def test_the_result_body_has_rocketmqs_field_names() -> None:
    r = ConsumeDirectlyResult(CMResult.CR_LATER, "why", 12, True, True)
    assert orjson.loads(r.encode()) == {"order": True, "autoCommit": True, "consumeResult": "CR_LATER",
                                        "remark": "why", "spentTimeMills": 12}  # fmt: skip
    assert ConsumeDirectlyResult.decode(r.encode()) == r
    # what a Java client writes (fastjson), unknown words and fields tolerated
    java = b'{"autoCommit":true,"consumeResult":"CR_SUCCESS","order":false,"remark":null,"spentTimeMills":3,"x":1}'
    assert ConsumeDirectlyResult.decode(java) == ConsumeDirectlyResult(CMResult.CR_SUCCESS, "", 3)
    assert ConsumeDirectlyResult.decode(b'{"consumeResult":"CR_NEWER"}').consume_result is None


@pytest.mark.parametrize("body", [b"", b"[]", b"null", b"\xff\xfe", b'"CR_SUCCESS"'])
def test_a_broken_result_body_is_a_value_error(body: bytes) -> None:
    with pytest.raises(ValueError):
        ConsumeDirectlyResult.decode(body)


@given(st.sampled_from([*CMResult, None]), st.text(max_size=50), st.integers(0, 2**40), st.booleans(), st.booleans())
def test_results_round_trip(word: CMResult | None, remark: str, spent: int, order: bool, auto: bool) -> None:
    r = ConsumeDirectlyResult(word, remark, spent, order, auto)
    assert ConsumeDirectlyResult.decode(r.encode()) == r
