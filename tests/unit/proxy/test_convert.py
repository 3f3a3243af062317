"""5.x messages and routes as the proxy converts them (pure)."""

from __future__ import annotations

import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from sievemq.protocol.route import PERM_READ, PERM_WRITE, QueueData, TopicRouteData
from sievemq.proxy.convert import ProxyError, outgoing_of, route_queues
from sievemq.proxy.v2 import definition_pb2 as pb


def _msg(**sp: object) -> pb.Message:
    props = {"message_id": "01ABC", "message_type": pb.NORMAL, **sp}
    return pb.Message(
        topic=pb.Resource(name="Orders"),
        body=b"x",
        user_properties={"color": "red"},
        system_properties=pb.SystemProperties(**props),
    )  # type: ignore[arg-type]


def test_tag_keys_id_and_properties_become_the_4x_record() -> None:
    out, group = outgoing_of(_msg(tag="TagA", keys=["k1", "k2"]), 1024)
    assert (out.topic, out.body, group) == ("Orders", b"x", None)
    assert out.properties == {"color": "red", "TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "01ABC"}
    assert out.uniq_ids == ["01ABC"]
    out, group = outgoing_of(_msg(message_type=pb.FIFO, message_group="customer-7"), 1024)
    assert group == "customer-7" and out.properties["__SHARDINGKEY"] == "customer-7"
    out, _ = outgoing_of(
        _msg(message_type=pb.DELAY, delivery_timestamp=Timestamp(seconds=1_800_000_000, nanos=5 * 10**6)), 1024
    )
    assert out.properties["TIMER_DELIVER_MS"] == "1800000000005"


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"tag": "A||B"}, pb.ILLEGAL_MESSAGE_TAG),
        ({"keys": ["a b"]}, pb.ILLEGAL_MESSAGE_KEY),
        ({"message_id": ""}, pb.ILLEGAL_MESSAGE_ID),
        ({"message_type": pb.FIFO}, pb.ILLEGAL_MESSAGE_GROUP),
        ({"message_type": pb.DELAY}, pb.ILLEGAL_DELIVERY_TIME),
        (
            {"message_type": pb.NORMAL, "delivery_timestamp": Timestamp(seconds=5)},
            pb.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
        ),
        ({"message_type": pb.DELAY, "delivery_timestamp": Timestamp(seconds=-5)}, pb.ILLEGAL_DELIVERY_TIME),
        ({"message_type": pb.MESSAGE_TYPE_UNSPECIFIED}, pb.UNSUPPORTED),
    ],
)
def test_refusals_carry_the_v2_code(change: dict[str, object], code: int) -> None:
    with pytest.raises(ProxyError) as e:
        outgoing_of(_msg(**change), 1024)
    assert e.value.code == code


def test_reserved_property_names_bodies_and_topics_are_refused() -> None:
    m = _msg()
    m.user_properties["UNIQ_KEY"] = "forged"
    with pytest.raises(ProxyError) as e:
        outgoing_of(m, 1024)
    assert e.value.code == pb.ILLEGAL_MESSAGE_PROPERTY_KEY
    with pytest.raises(ProxyError) as e:
        outgoing_of(_msg(), 0)
    assert e.value.code == pb.MESSAGE_BODY_TOO_LARGE
    m = _msg()
    m.topic.name = "bad topic"
    with pytest.raises(ProxyError) as e:
        outgoing_of(m, 1024)
    assert e.value.code == pb.ILLEGAL_TOPIC


def test_route_queues_point_at_the_proxy_with_each_queues_permission() -> None:
    route = TopicRouteData(queue_datas=[QueueData("broker-a", 2, 3, PERM_READ | PERM_WRITE, 0)], broker_datas=[])
    qs = route_queues(pb.Resource(name="Orders"), route, ("10.0.0.9", 8081))
    assert [(q.id, q.permission) for q in qs] == [(0, pb.READ_WRITE), (1, pb.READ_WRITE), (2, pb.WRITE)]
    assert all(q.broker.name == "broker-a" and q.broker.endpoints.addresses[0].port == 8081 for q in qs)
    assert list(qs[0].accept_message_types) == [pb.NORMAL, pb.FIFO, pb.DELAY, pb.TRANSACTION]


def test_a_popped_message_reaches_a_5x_client_with_its_digest_handle_attempt_and_only_user_properties() -> None:
    import hashlib

    from sievemq.client.pop_api import PoppedMessage
    from sievemq.protocol.message import MessageExt
    from sievemq.proxy.convert import message_of

    rec = MessageExt(
        topic="Orders",
        body=b"hello",
        properties={"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "C0A8", "color": "red", "__SHARDINGKEY": "g7",
                    "TIMER_DELIVER_MS": "1800000000005", "WAIT": "true"},
        queue_id=3, queue_offset=9, born_timestamp=1_700_000_000_123, store_timestamp=1_700_000_000_456,
    )  # fmt: skip
    m = message_of(PoppedMessage(rec, "1 b T 3 9 77", 2), 30_500)
    sp = m.system_properties
    assert (m.topic.name, m.body, dict(m.user_properties)) == ("Orders", b"hello", {"color": "red"})
    assert (sp.tag, list(sp.keys), sp.message_id, sp.receipt_handle, sp.delivery_attempt) == (
        "TagA", ["k1", "k2"], "C0A8", "1 b T 3 9 77", 2)  # fmt: skip
    assert sp.body_digest.type == pb.MD5 and sp.body_digest.checksum == hashlib.md5(b"hello").hexdigest().upper()
    assert (sp.message_group, sp.message_type) == ("g7", pb.DELAY), "a delay message of a group: DELAY wins"
    assert sp.delivery_timestamp.seconds == 1_800_000_000 and sp.delivery_timestamp.nanos == 5_000_000
    assert (sp.queue_id, sp.queue_offset, sp.born_timestamp.nanos) == (3, 9, 123_000_000)
    assert (sp.invisible_duration.seconds, sp.invisible_duration.nanos) == (30, 500_000_000)


def test_a_brokers_reason_leads_the_5x_status_message() -> None:
    from sievemq.errors import RemotingError
    from sievemq.protocol.reasons import Reason
    from sievemq.proxy.convert import reasoned

    e = RemotingError(24, "the group subscribes TagA", Reason.SUBSCRIPTION_INCONSISTENT)
    assert reasoned(e) == f"[SUBSCRIPTION_INCONSISTENT] {e.remark}", "the reason, then the remark (no code name)"
    assert reasoned(RemotingError(1, "no reason")) == str(RemotingError(1, "no reason"))


def test_a_5x_clients_trace_context_is_kept_with_the_message_and_handed_back() -> None:
    from sievemq.client.pop_api import PoppedMessage
    from sievemq.protocol.message import MessageExt
    from sievemq.proxy.convert import message_of

    ctx = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    out, _ = outgoing_of(_msg(trace_context=ctx), 1024)
    assert out.properties["TRACE_CONTEXT"] == ctx, "stored as RocketMQ's proxy stores it"
    assert "TRACE_CONTEXT" not in outgoing_of(_msg(), 1024)[0].properties
    rec = MessageExt(topic="Orders", body=b"x", properties={**out.properties})
    assert message_of(PoppedMessage(rec, "1 b T 0 0 1", 1), 1000).system_properties.trace_context == ctx
