"""FIFO consumer groups at the proxy, without a broker (docs/proxy.md §8): a broker's SubscriptionGroupConfig read
strictly, and the Telemetry settings a FIFO group's consumers are told (``fifo``, the group's attempts) while other
groups' settings stay as they were."""

from __future__ import annotations

import orjson
import pytest

from sievemq.client.producer import Producer
from sievemq.errors import RemotingError
from sievemq.proxy.config import ProxyConfig
from sievemq.proxy.groups import GroupView, parse_view
from sievemq.proxy.service import MessagingService
from sievemq.proxy.v2 import definition_pb2 as pb


def test_a_group_config_is_read_strictly() -> None:
    doc = {"groupName": "g", "consumeMessageOrderly": True, "retryMaxTimes": 3, "consumeEnable": True}
    assert parse_view(orjson.dumps(doc)) == GroupView(True, 3)
    assert parse_view(b'{"groupName": "g"}') == GroupView(False, 16), "RocketMQ's defaults for missing fields"
    assert GroupView(False, -1).max_attempts == 1 and GroupView(True, 3).max_attempts == 4
    for bad in (b"not json", b"[1]", b'{"consumeMessageOrderly": "true"}', b'{"retryMaxTimes": "3"}',
                b'{"retryMaxTimes": true}', b"null"):  # fmt: skip
        with pytest.raises(RemotingError):
            parse_view(bad)


def _consumer_settings() -> pb.Settings:
    s = pb.Settings(client_type=pb.PUSH_CONSUMER)
    s.subscription.group.name = "g"
    return s


def test_a_fifo_group_is_told_fifo_and_its_own_attempts_and_other_groups_are_not() -> None:
    service = MessagingService(ProxyConfig(max_delivery_attempts=17), Producer("127.0.0.1:9876"))
    fifo = service._settings(_consumer_settings(), GroupView(True, 3))
    assert fifo.subscription.fifo and fifo.backoff_policy.max_attempts == 4
    assert fifo.backoff_policy.WhichOneof("strategy") == "customized_backoff"
    for view in (GroupView(False, 3), None):  # not FIFO, or the broker could not say
        plain = service._settings(_consumer_settings(), view)
        assert not plain.subscription.fifo and plain.backoff_policy.max_attempts == 17
