"""PULL_MESSAGE header: one definition read by the broker and the filter server, written by client and filter server."""

from __future__ import annotations

import pytest

from sievemq.errors import HeaderError
from sievemq.protocol.pull_header import (
    FLAG_CLASS_FILTER,
    FLAG_COMMIT_OFFSET,
    FLAG_SUBSCRIPTION,
    FLAG_SUSPEND,
    PullMessageHeader,
    pull_sys_flag,
)


def test_flag_values_are_rocketmqs() -> None:
    assert (FLAG_COMMIT_OFFSET, FLAG_SUSPEND, FLAG_SUBSCRIPTION, FLAG_CLASS_FILTER) == (1, 2, 4, 8)
    assert pull_sys_flag(commit_offset=True, suspend=True, subscription=True, class_filter=False) == 7
    assert pull_sys_flag(commit_offset=False, suspend=False, subscription=False, class_filter=True) == 8


def test_round_trip_through_ext_fields() -> None:
    h = PullMessageHeader("g", "T", 3, 42, 16, FLAG_SUBSCRIPTION | FLAG_SUSPEND, 40, 5000, "a > 1", "SQL92", 7)
    wire = {k: str(v) for k, v in h.to_fields().items()}  # extFields travel as strings
    back = PullMessageHeader.parse(wire)
    assert back == h
    assert back.has_subscription and back.suspend and not back.commits_offset and not back.class_filter


def test_without_subscription_no_expression_fields_travel() -> None:
    h = PullMessageHeader("g", "T", 0, 0, sys_flag=FLAG_CLASS_FILTER)
    assert "subscription" not in h.to_fields() and "expressionType" not in h.to_fields()


def test_lenient_defaults_and_required_fields() -> None:
    h = PullMessageHeader.parse({"consumerGroup": "g", "topic": "T", "queueId": "1", "queueOffset": "9"})
    assert (h.max_msg_nums, h.sys_flag, h.commit_offset, h.suspend_timeout_millis) == (32, 0, -1, 15000)
    assert PullMessageHeader.parse({"consumerGroup": "g", "topic": "T", "queueId": "1", "queueOffset": "9",
                                    "maxMsgNums": "0"}).max_msg_nums == 1  # fmt: skip
    with pytest.raises(HeaderError, match="queueOffset"):
        PullMessageHeader.parse({"consumerGroup": "g", "topic": "T", "queueId": "1"})
