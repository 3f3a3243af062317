"""The proxy's ACL decision for 5.x calls (proxy/access.py): the clients' MQv2-HMAC-SHA1 authorization, the order of
a broker's checks, and what each call needs, without sockets."""

from __future__ import annotations

import hmac
from datetime import UTC, datetime, timedelta

import pytest

from sievemq.acl.loader import parse_text
from sievemq.protocol.reasons import Reason
from sievemq.proxy.access import check, needs_of, parse_authorization, peer_ip, settings_needs
from sievemq.proxy.v2 import definition_pb2 as pb
from sievemq.proxy.v2 import service_pb2 as svc
from sievemq.remoting.codes import RequestCode as C

RULES = parse_text(
    """
globalWhiteRemoteAddresses: [10.9.9.*]
accounts:
  - accessKey: producerA
    secretKey: secret-A-123
    defaultTopicPerm: DENY
    topicPerms: [orders=PUB]
  - accessKey: consumerB
    secretKey: secret-B-123
    topicPerms: [orders=SUB]
    groupPerms: [audit=SUB]
  - accessKey: trusted
    secretKey: secret-T-123
    whiteRemoteAddress: 192.168.7.7
""",
    "test",
)
NOW = datetime(2026, 12, 2, 14, 15, 0, tzinfo=UTC)
STAMP = "20261202T141500Z"


def signed(ak: str, sk: str, stamp: str = STAMP, upper: bool = False) -> dict[str, str]:
    sig = hmac.new(sk.encode(), stamp.encode(), "sha1").hexdigest()
    sig = sig.upper() if upper else sig  # the Node.js client writes it in upper case, the Python one in lower
    auth = f"MQv2-HMAC-SHA1 Credential={ak}, SignedHeaders=x-mq-date-time, Signature={sig}"
    return {"authorization": auth, "x-mq-date-time": stamp}


def send_to(topic: str) -> list[tuple[int, dict[str, str]]]:
    request = svc.SendMessageRequest(messages=[pb.Message(topic=pb.Resource(name=topic), body=b"x")])
    return needs_of("SendMessage", request)


def decide(meta: dict[str, str], needs: list[tuple[int, dict[str, str]]], peer: str = "127.0.0.1",
           skew: int = 900) -> Reason | None:  # fmt: skip
    refusal = check(RULES, peer, meta, needs, NOW, skew)
    return None if refusal is None else refusal.reason


def test_the_authorization_value_of_the_5x_clients_parses() -> None:
    creds = parse_authorization("MQv2-HMAC-SHA1 Credential=ak1, SignedHeaders=x-mq-date-time, Signature=abc")
    assert creds is not None and (creds.access_key, creds.signature) == ("ak1", "abc")
    for bad in ("", "Basic abc", "MQv2-HMAC-SHA1 Credential=ak1, Signature=abc",
                "MQv2-HMAC-SHA1 Credential=, SignedHeaders=x-mq-date-time, Signature=abc",
                "MQv2-HMAC-SHA1 Credential=ak1, SignedHeaders=host, Signature=abc"):  # fmt: skip
        assert parse_authorization(bad) is None, bad


@pytest.mark.parametrize("upper", [False, True])
def test_a_signed_call_with_the_permission_it_needs_passes(upper: bool) -> None:
    assert decide(signed("producerA", "secret-A-123", upper=upper), send_to("orders")) is None


def test_refusals_in_a_brokers_order_with_stable_reasons() -> None:
    assert decide({}, send_to("orders")) == Reason.ACL_NO_CREDENTIALS
    assert decide(signed("nobody12", "whatever"), send_to("orders")) == Reason.ACL_UNKNOWN_ACCOUNT
    assert decide(signed("producerA", "wrong-secret"), send_to("orders")) == Reason.ACL_SIGNATURE
    assert decide(signed("producerA", "secret-A-123"), send_to("payments")) == Reason.NO_PERMISSION
    assert decide(signed("consumerB", "secret-B-123"), send_to("orders")) == Reason.NO_PERMISSION  # SUB, not PUB


def test_the_date_time_must_parse_and_be_near_the_clock_unless_skew_is_zero() -> None:
    old = (NOW - timedelta(hours=2)).strftime("%Y%m%dT%H%M%SZ")
    assert decide(signed("producerA", "secret-A-123", old), send_to("orders")) == Reason.ACL_SIGNATURE
    assert decide(signed("producerA", "secret-A-123", old), send_to("orders"), skew=0) is None
    assert decide(signed("producerA", "secret-A-123", "yesterday"), send_to("orders"), skew=0) == Reason.ACL_SIGNATURE


def test_white_listed_addresses_need_no_signature_as_at_a_broker() -> None:
    assert decide({}, send_to("payments"), peer="10.9.9.4") is None
    assert decide(signed("trusted", "not-the-secret"), send_to("payments"), peer="192.168.7.7") is None
    assert decide(signed("trusted", "not-the-secret"), send_to("payments"), peer="192.168.7.8") == Reason.ACL_SIGNATURE


def test_consumer_calls_need_sub_on_the_topic_and_the_group() -> None:
    queue = pb.MessageQueue(topic=pb.Resource(name="orders"))
    receive = needs_of(
        "ReceiveMessage", svc.ReceiveMessageRequest(group=pb.Resource(name="audit"), message_queue=queue)
    )
    assert decide(signed("consumerB", "secret-B-123"), receive) is None
    other = needs_of("ReceiveMessage", svc.ReceiveMessageRequest(group=pb.Resource(name="billing"),
                                                                 message_queue=queue))  # fmt: skip
    assert decide(signed("consumerB", "secret-B-123"), other) == Reason.NO_PERMISSION
    handle = "1 broker-a orders 0 5 123456"
    request = svc.AckMessageRequest(group=pb.Resource(name="audit"), topic=pb.Resource(name="orders"),
                                    entries=[svc.AckMessageEntry(receipt_handle=handle)])  # fmt: skip
    ack = needs_of("AckMessage", request)
    assert ack == [(C.ACK_MESSAGE, {"extraInfo": handle, "consumerGroup": "audit"})]
    assert decide(signed("consumerB", "secret-B-123"), ack) is None
    assert decide(signed("producerA", "secret-A-123"), ack) == Reason.NO_PERMISSION


def test_a_consumers_settings_need_sub_on_every_subscribed_topic() -> None:
    sub = pb.Subscription(
        group=pb.Resource(name="audit"),
        subscriptions=[
            pb.SubscriptionEntry(topic=pb.Resource(name="orders")),
            pb.SubscriptionEntry(topic=pb.Resource(name="x")),
        ],
    )
    needs = settings_needs(pb.Settings(subscription=sub))
    assert [f["topic"] for _, f in needs] == ["orders", "x"]
    assert decide(signed("consumerB", "secret-B-123"), needs) == Reason.NO_PERMISSION
    assert decide(signed("consumerB", "secret-B-123"), needs[:1]) is None


def test_calls_that_touch_no_resource_need_only_an_account() -> None:
    route = needs_of("QueryRoute", svc.QueryRouteRequest(topic=pb.Resource(name="payments")))
    assert route == []
    assert decide(signed("consumerB", "secret-B-123"), route) is None
    assert decide({}, route) == Reason.ACL_NO_CREDENTIALS


def test_grpc_peer_texts() -> None:
    assert peer_ip("ipv4:10.0.0.1:5000") == "10.0.0.1"
    assert peer_ip("ipv6:[::1]:5000") == "::1"
    assert peer_ip("unix:/tmp/x") == ""
