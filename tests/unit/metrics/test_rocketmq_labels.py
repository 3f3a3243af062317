"""Label values of RocketMQ 5's families (docs/metrics-rocketmq.md §2): client versions by ``MQVersion.Version``
name (ordinals read from RocketMQ 5.3's enum), message types as ``BrokerMetricsManager.getMessageType`` decides,
system topics and groups, the message-size histogram's per-request samples, and how labelled families are bounded."""

from __future__ import annotations

import pytest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from sievemq.broker.metrics.rocketmq_counts import MESSAGE_SIZE_BUCKETS, RocketMQCounts, message_type
from sievemq.broker.metrics.rocketmq_labels import consume_mode, is_retry_or_dlq, is_system, version_desc
from sievemq.broker.metrics.rocketmq_names import NODE_LABELS, _bounded

VERSIONS = [(0, "v3_0_0_snapshot"), (15, "v3_0_0_final"), (85, "v3_2_9"), (87, "v3_3_1"), (213, "v4_0_0"),
            (401, "v4_9_4"), (409, "v4_9_8"), (479, "v5_3_3"), (612, "higher_version"), (100_000, "higher_version"),
            (-1, "unknown")]  # fmt: skip
TYPES = [({}, "normal"), ({"TAGS": "a"}, "normal"), ({"TRAN_MSG": "true", "DELAY": "3"}, "transaction"),
         ({"TRAN_MSG": "false"}, "normal"), ({"__SHARDINGKEY": "k", "DELAY": "2"}, "fifo"), ({"DELAY": "2"}, "delay"),
         ({"TIMER_DELIVER_MS": "1"}, "delay"), ({"TIMER_DELAY_SEC": "5"}, "delay"), ({"TIMER_DELAY_MS": "5"}, "delay"),
         ({"__STARTDELIVERTIME": "1"}, "delay")]  # fmt: skip


@pytest.mark.parametrize(("ordinal", "name"), VERSIONS)
def test_version_names_are_rocketmqs(ordinal: int, name: str) -> None:
    assert version_desc(ordinal) == name


@pytest.mark.parametrize(("props", "kind"), TYPES)
def test_message_type_as_rocketmq_decides(props: dict[str, str], kind: str) -> None:
    assert message_type(props) == kind


def test_system_topics_groups_and_modes() -> None:
    assert is_system("RMQ_SYS_TRANS_HALF_TOPIC") and is_system("rmq_sys_wheel_timer") and is_system("TBW102")
    assert is_system("Orders", "CID_RMQ_SYS_TRACE") and is_system("Orders", "cid_rmq_sys_x")
    assert not is_system("Orders", "billing") and not is_system("%RETRY%billing")
    assert is_retry_or_dlq("%RETRY%g") and is_retry_or_dlq("%DLQ%g") and not is_retry_or_dlq("Orders")
    modes = [consume_mode(t) for t in ("CONSUME_ACTIVELY", "CONSUME_PASSIVELY", "CONSUME_POP")]
    assert modes == ["pull", "push", "pop"]


def test_message_size_is_one_sample_per_request_of_its_bytes_per_message() -> None:
    c = RocketMQCounts()
    c.put("T", "normal", 1, 900)
    c.put("T", "normal", 4, 4 * 3000)
    c.put("T", "normal", 1, 5 * 1024 * 1024)
    h = c.message_size[("T", "normal")]
    assert h.bounds == MESSAGE_SIZE_BUCKETS
    assert h.cumulative() == [(1024.0, 1), (4096.0, 2), (524288.0, 2), (1048576.0, 2), (2097152.0, 2),
                              (4194304.0, 2), (float("inf"), 3)]  # fmt: skip
    assert (c.put_messages[("T", "normal")], c.put_bytes[("T", "normal")]) == (6, 900 + 12000 + 5 * 1024 * 1024)
    c.get("T", "g", 0, 0)
    assert not c.get_messages, "an empty pull counts nothing"


def test_bounded_families_keep_the_node_labels_and_add_up_the_rest() -> None:
    node = ("C", "broker", "b")
    lag = GaugeMetricFamily("rocketmq_x", "x", labels=[*NODE_LABELS, "topic"])
    _bounded(lag, node, ["topic"], [(("a",), 1), (("b",), 5), (("c",), 3), (("d",), 2)], 2, gauge=True)
    assert [(s.labels["topic"], s.labels["node_id"], s.value) for s in lag.samples] == [
        ("b", "b", 5), ("c", "b", 3), ("(other)", "b", 3)]  # fmt: skip
    latency = GaugeMetricFamily("rocketmq_y", "y", labels=[*NODE_LABELS, "topic"])
    _bounded(latency, node, ["topic"], [(("a",), 1), (("b",), 5), (("d",), 2)], 1, gauge=True, rest_max=True)
    assert [(s.labels["topic"], s.value) for s in latency.samples] == [("b", 5), ("(other)", 2)], "the largest"
    out = CounterMetricFamily("rocketmq_z", "z", labels=[*NODE_LABELS, "topic", "consumer_group"])
    _bounded(out, node, ["topic", "consumer_group"], [(("t", "pull"), 4), (("t", "pop"), 2)], 10,
             extra=lambda values: {"is_retry": "false"} if values[1] == "pop" else {})  # fmt: skip
    assert [(s.name, s.labels.get("is_retry"), s.labels["cluster"]) for s in out.samples] == [
        ("rocketmq_z_total", None, "C"), ("rocketmq_z_total", "false", "C")]  # fmt: skip
