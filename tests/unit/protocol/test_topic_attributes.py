"""Topic attributes: the change syntax and RocketMQ 5's rules for applying it (protocol/topic_attributes.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sievemq.protocol.route import TopicConfig
from sievemq.protocol.topic_attributes import (
    MESSAGE_TYPES,
    TopicAttributeError,
    alter,
    check_stored,
    parse_change,
)


def test_the_change_syntax_is_mqadmins() -> None:
    assert parse_change("") == {}
    assert parse_change("+message.type=FIFO,-queue.type") == {"+message.type": "FIFO", "-queue.type": ""}
    for bad in ("message.type=FIFO", "+message.type", "+a=b=c", "+a=1,+a=2", "x" * 300):
        with pytest.raises(TopicAttributeError):
            parse_change(bad)


def test_a_new_topic_takes_only_additions_of_known_keys_and_values() -> None:
    assert alter(True, {}, parse_change("+message.type=NORMAL")) == {"message.type": "NORMAL"}
    for bad in ("-message.type", "+message.type=ORDERED", "+colour=red"):
        with pytest.raises(TopicAttributeError):
            alter(True, {}, parse_change(bad))


def test_an_existing_topic_changes_changeable_keys_and_removes_set_ones() -> None:
    current = {"message.type": "NORMAL", "queue.type": "SimpleCQ"}
    assert alter(False, current, parse_change("+message.type=FIFO")) == {"message.type": "FIFO",
                                                                        "queue.type": "SimpleCQ"}  # fmt: skip
    assert alter(False, current, parse_change("-message.type")) == {"queue.type": "SimpleCQ"}
    with pytest.raises(TopicAttributeError, match="unchangeable"):
        alter(False, current, parse_change("+queue.type=SimpleCQ"))
    with pytest.raises(TopicAttributeError, match="nonexistent"):
        alter(False, {}, parse_change("-message.type"))
    assert current == {"message.type": "NORMAL", "queue.type": "SimpleCQ"}  # not changed in place


def test_what_sievemq_does_not_implement_is_refused_not_stored() -> None:
    for change in ("+queue.type=BatchCQ", "+cleanup.policy=COMPACTION", "+reserve.time=3600"):
        with pytest.raises(TopicAttributeError, match="not supported by sievemq"):
            alter(True, {}, parse_change(change))


@given(st.sampled_from(MESSAGE_TYPES), st.sampled_from(MESSAGE_TYPES))
def test_message_type_round_trips_through_the_stored_form(first: str, second: str) -> None:
    attrs = alter(False, alter(True, {}, {"+message.type": first}), {"+message.type": second})
    tc = TopicConfig("T", attributes=attrs)
    assert TopicConfig.from_json(tc.to_json()).attributes == {"message.type": second}


def test_stored_attributes_are_checked_for_shape() -> None:
    assert check_stored(None) == {}
    assert "attributes" not in TopicConfig("T").to_json()  # as before when none are set
    for bad in ([], {"a": 1}, {str(i): "x" for i in range(10)}, {"k": "v" * 300}):
        with pytest.raises(ValueError):
            check_stored(bad)
