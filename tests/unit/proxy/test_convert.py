"""5.x messages and routes as the proxy converts them (pure)."""

from __future__ import annotations

import pytest

from sievemq.protocol.route import PERM_READ, PERM_WRITE, QueueData, TopicRouteData
from sievemq.proxy.convert import ProxyError, outgoing_of, route_queues
from sievemq.proxy.v2 import definition_pb2 as pb


def _msg(**sp: object) -> pb.Message:
    props = {"message_id": "01ABC", "message_type": pb.NORMAL, **sp}
    return pb.Message(topic=pb.Resource(name="Orders"), body=b"x", user_properties={"color": "red"},
                      system_properties=pb.SystemProperties(**props))  # type: ignore[arg-type]


def test_tag_keys_id_and_properties_become_the_4x_record() -> None:
    out, group = outgoing_of(_msg(tag="TagA", keys=["k1", "k2"]), 1024)
    assert (out.topic, out.body, group) == ("Orders", b"x", None)
    assert out.properties == {"color": "red", "TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "01ABC"}
    assert out.uniq_ids == ["01ABC"]
    _, group = outgoing_of(_msg(message_type=pb.FIFO, message_group="customer-7"), 1024)
    assert group == "customer-7"


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"tag": "A||B"}, pb.ILLEGAL_MESSAGE_TAG),
        ({"keys": ["a b"]}, pb.ILLEGAL_MESSAGE_KEY),
        ({"message_id": ""}, pb.ILLEGAL_MESSAGE_ID),
        ({"message_type": pb.FIFO}, pb.ILLEGAL_MESSAGE_GROUP),
        ({"message_type": pb.TRANSACTION}, pb.UNSUPPORTED),
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
    assert list(qs[0].accept_message_types) == [pb.NORMAL, pb.FIFO]
