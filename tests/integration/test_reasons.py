"""Refusals a client acts on carry a stable reason field, not only words: inconsistent subscriptions."""

from __future__ import annotations

from sievemq.protocol.heartbeat import ConsumerData, HeartbeatData, Subscription
from sievemq.protocol.reasons import REASON_FIELD, Reason, RefusedSubscription, decode_refused_subscriptions
from sievemq.remoting.codes import RequestCode, ResponseCode
from tests.integration.conftest import OpenConn
from tests.integration.helpers import call
from tests.support import wire
from tests.support.procs import Proc

GROUP = "reason-group"
TOPIC = "ReasonTopic"


def _hb(client_id: str, expression: str) -> HeartbeatData:
    return HeartbeatData(client_id, consumers=[ConsumerData(GROUP, subscriptions=[Subscription(TOPIC, expression)])])


async def test_inconsistent_subscription_is_refused_with_a_reason(broker: Proc, open_conn: OpenConn) -> None:
    first, second = await open_conn(broker), await open_conn(broker)
    await wire.send_message(first, TOPIC, b"x", tags="TagA")

    resp = await wire.heartbeat(first, _hb("one@1", "TagA"))
    assert resp.code == ResponseCode.SUCCESS and REASON_FIELD not in resp.ext_fields

    # The second client subscribes the topic differently: the heartbeat still succeeds (or clients would drop the
    # broker), and says which subscription is refused, in fields a program reads.
    resp = await wire.heartbeat(second, _hb("two@2", "TagB"))
    assert resp.code == ResponseCode.SUCCESS
    assert resp.ext_fields.get(REASON_FIELD) == Reason.SUBSCRIPTION_INCONSISTENT
    refused = decode_refused_subscriptions(resp.ext_fields)
    assert [(r.group, r.topic) for r in refused] == [(GROUP, TOPIC)]
    assert refused == [RefusedSubscription(GROUP, TOPIC, resp.remark or "")]

    # Its pulls of the topic (with the group's heartbeat subscription) are refused with the same reason.
    fields = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": 0, "queueOffset": 0, "maxMsgNums": 1, "sysFlag": 0}
    pull = await call(second, RequestCode.PULL_MESSAGE, fields)
    assert pull.code == ResponseCode.SUBSCRIPTION_NOT_EXIST
    assert pull.ext_fields.get(REASON_FIELD) == Reason.SUBSCRIPTION_INCONSISTENT
    assert (await call(first, RequestCode.PULL_MESSAGE, fields)).code != ResponseCode.SUBSCRIPTION_NOT_EXIST
