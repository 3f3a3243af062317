"""The edge check of request headers and bodies (names and numbers), without sockets."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sievemq.broker.locks import MAX_LOCK_QUEUES, lock_request
from sievemq.errors import HeaderError, RemotingError
from sievemq.protocol import header_rules
from sievemq.protocol.header_rules import check_fields, check_request, reference_check_fields
from sievemq.protocol.heartbeat import MAX_SUBSCRIPTIONS, HeartbeatData
from sievemq.protocol.names import group_problem, topic_problem
from sievemq.protocol.route import TopicConfig
from sievemq.protocol.send_header import V2_TO_V1
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.headers import get_int

HOSTILE = ["..", "/x", "a/../..", "a\x00b", "x" * 128, "a\n", "名字", ".", "a b", "%RETRY%.."]


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_topics_are_refused_as_names(name: str) -> None:
    assert topic_problem(name) is not None
    with pytest.raises(RemotingError) as e:
        check_request(RequestCode.PULL_MESSAGE, {"topic": name, "consumerGroup": "g"})
    assert e.value.reason == "INVALID_NAME" and "'topic'" in e.value.remark


def test_legal_names_pass() -> None:
    for name in ("TopicA", "%RETRY%group_1", "MQ_INST_x%t|y", "x" * 127):
        assert topic_problem(name) is None
    assert group_problem("g" * 255) is None and group_problem("g" * 256) is not None
    check_request(RequestCode.PULL_MESSAGE, {"topic": "T", "consumerGroup": "G", "queueId": "3", "queueOffset": "0"})


def test_send_v2_short_keys_are_checked_as_their_names() -> None:
    with pytest.raises(RemotingError) as e:
        check_request(RequestCode.SEND_MESSAGE_V2, {"a": "g", "b": ".."})
    assert (e.value.code, e.value.reason) == (ResponseCode.INVALID_PARAMETER, "INVALID_NAME")  # a send's code: 29
    with pytest.raises(HeaderError):
        check_request(RequestCode.SEND_MESSAGE_V2, {"a": "g", "b": "T", "e": str(2**31)})  # queueId is an int
    check_request(RequestCode.PULL_MESSAGE, {"b": "..", "e": "x"})  # other codes: one-letter keys mean nothing


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"topicSysFlag": str(10**30)}, "topicSysFlag"),
        ({"perm": "16"}, "perm"),
        ({"queueId": "-2"}, "queueId"),
        ({"queueId": str(2**31)}, "queueId"),
        ({"queueOffset": str(2**63)}, "queueOffset"),
        ({"suspendTimeoutMillis": "-1"}, "suspendTimeoutMillis"),
        ({"commitOffset": "9" * 5000}, "commitOffset"),
        ({"maxMsgNums": "1e30"}, "maxMsgNums"),
        ({"brokerId": "-1"}, "brokerId"),
        ({"readQueueNums": "abc"}, "readQueueNums"),
    ],
)
def test_numbers_out_of_their_java_type_are_refused(fields: dict[str, str], field: str) -> None:
    with pytest.raises(HeaderError) as e:
        check_request(RequestCode.UPDATE_AND_CREATE_TOPIC, fields)
    assert e.value.reason == "INVALID_HEADER" and f"'{field}'" in e.value.remark


def test_numbers_in_range_and_lenient_forms_pass() -> None:
    check_request(17, {"perm": "6", "queueId": "-1", "queueOffset": str(2**63 - 1), "sysFlag": "3.0", "flag": "null"})
    assert get_int({"x": "7.0"}, "x") == 7
    with pytest.raises(HeaderError):
        get_int({"x": str(2**64)}, "x")  # nothing wider than a Java long, whatever the field


def test_saved_or_registered_topic_configs_are_checked() -> None:
    assert TopicConfig.from_json({"topicName": "T", "perm": 6}).perm == 6
    for bad in ({"topicName": ".."}, {"topicName": "T", "perm": 10**30}, {"topicName": "T", "readQueueNums": -1},
                {"topicName": "T", "topicSysFlag": "9" * 30}, {"topicName": 5}):  # fmt: skip
        with pytest.raises(ValueError):
            TopicConfig.from_json(bad)  # type: ignore[arg-type]


def _hb(**consumer: Any) -> HeartbeatData:
    return HeartbeatData.from_json({"clientID": "c", "consumerDataSet": [{"groupName": "G", **consumer}]})


def test_heartbeat_problems() -> None:
    assert _hb(subscriptionDataSet=[{"topic": "T"}]).problem() is None
    assert "illegal" in (_hb(subscriptionDataSet=[{"topic": ".."}]).problem() or "")
    assert "illegal" in (HeartbeatData.from_json({"producerDataSet": [{"groupName": "a/b"}]}).problem() or "")
    many = [{"topic": f"T{i}"} for i in range(MAX_SUBSCRIPTIONS + 1)]
    assert "more than" in (_hb(subscriptionDataSet=many).problem() or "")
    hb = _hb(subscriptionDataSet=[{"topic": "T", "subVersion": "9" * 400}])
    assert hb.consumers[0].subscriptions[0].sub_version == 0  # not a long: the default, never a huge int


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"consumerGroup": "G", "clientId": 5, "mqSet": []},
        {"consumerGroup": ["G"], "clientId": "c"},
        {"consumerGroup": "G", "clientId": "c", "mqSet": "x"},
        {"consumerGroup": "G", "clientId": "c", "mqSet": [5]},
        {"consumerGroup": "G", "clientId": "c", "mqSet": [{"topic": "T", "brokerName": "b"}]},
        {"consumerGroup": "G", "clientId": "c", "mqSet": [{"topic": "T", "brokerName": "b", "queueId": "x"}]},
        {"consumerGroup": "G", "clientId": "c", "mqSet": [{"topic": "..", "brokerName": "b", "queueId": 0}]},
        {"consumerGroup": "G", "clientId": "c", "mqSet": [{"topic": "T", "brokerName": "b", "queueId": 2**40}]},
        {"consumerGroup": "G", "clientId": "c",
         "mqSet": [{"topic": "T", "brokerName": "b", "queueId": 0}] * (MAX_LOCK_QUEUES + 1)},
    ],
)
def test_malformed_lock_bodies_are_clean_refusals(body: dict[str, Any]) -> None:
    with pytest.raises(RemotingError) as e:
        lock_request(body)
    assert e.value.reason in ("INVALID_HEADER", "INVALID_NAME")


def test_a_good_lock_body() -> None:
    body = {"consumerGroup": "G", "clientId": "c", "mqSet": [{"topic": "T", "brokerName": "b", "queueId": "2"}]}
    assert lock_request(body) == ("G", "c", [("T", "b", 2)])


_KEYS = ["topic", "consumerGroup", "brokerName", "queueId", "perm", "queueOffset", "sysFlag", "other", "b", "e"]
_VALUES = st.one_of(
    st.sampled_from(["", "null", "T", "..", "a b", "0", "7", "-1", "-2", "3.0", "1e3", "1_0", " 5", "16", "x" * 128]),
    st.sampled_from(["²", "٣", "9" * 20, "0" * 30 + "1"]),
    st.integers(-(2**64), 2**64).map(str),
    st.text(max_size=8),
)


def _outcome(fn: Any, fields: dict[str, str], rename: dict[str, str] | None) -> tuple[str, str, str | None]:
    try:
        fn(fields, rename)
    except RemotingError as e:
        return type(e).__name__, e.remark or "", e.reason
    return "ok", "", None


@settings(max_examples=400, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from(_KEYS), _VALUES, max_size=5), min_size=1, max_size=4), st.booleans())
def test_check_fields_decides_as_the_reference(requests: list[dict[str, str]], v2: bool) -> None:
    """The remembering fast check and the plain one agree on every request, also when values repeat."""
    rename = V2_TO_V1 if v2 else None
    for fields in requests + requests:  # the second pass meets remembered values
        assert _outcome(check_fields, fields, rename) == _outcome(reference_check_fields, fields, rename), fields


def test_remembered_names_stay_bounded() -> None:
    for i in range(3 * header_rules._PASSED_MAX):
        check_fields({"topic": f"T{i}"})
    assert len(header_rules._PASSED["topic"]) <= header_rules._PASSED_MAX
    with pytest.raises(RemotingError):
        check_fields({"topic": ".."})  # refused names are never remembered
    with pytest.raises(RemotingError):
        check_fields({"topic": ".."})
