"""ACL 2.0 at the proxy (proxy/access2.py, docs/acl2.md §9), without sockets: the 5.x clients' signature checked
with the user's password, disabled and unknown users, Super users, and what each gRPC call needs (RocketMQ's
DefaultAuthorizationContextBuilder)."""

from __future__ import annotations

import hmac
from datetime import UTC, datetime

import orjson

from sievemq.auth.model import Acl, Action, Resource, ResourceType, User, UserStatus, UserType
from sievemq.auth.wire import parse_acl_info
from sievemq.protocol.reasons import Reason
from sievemq.proxy.access2 import Need, Switches, check, needs_of, settings_needs
from sievemq.proxy.v2 import definition_pb2 as pb
from sievemq.proxy.v2 import service_pb2 as svc

NOW = datetime(2026, 12, 2, 14, 15, 0, tzinfo=UTC)
STAMP = "20261202T141500Z"
USERS = {
    "alice": User("alice", "alice-pw"),
    "root": User("root", "root-pw", UserType.SUPER),
    "off": User("off", "off-pw", status=UserStatus.DISABLE),
}
BOTH = Switches(True, True)


def _acls() -> dict[str, Acl]:
    name, policies = parse_acl_info(orjson.dumps({"subject": "User:alice", "policies": [{"entries": [
        {"resource": "Topic:orders", "actions": ["Pub"], "decision": "Allow"},
        {"resource": "Topic:events", "actions": ["Sub"], "decision": "Allow"},
        {"resource": "Group:billing", "actions": ["Sub"], "sourceIps": ["10.0.0.0/8"], "decision": "Allow"}]}]}),
        None)  # fmt: skip
    acl = Acl(name)
    for ptype, entries in policies:
        acl = acl.merged(ptype, entries)
    return {name: acl}


ACLS = _acls()


def signed(user: str, password: str, upper: bool = False) -> dict[str, str]:
    sig = hmac.new(password.encode(), STAMP.encode(), "sha1").hexdigest()
    sig = sig.upper() if upper else sig
    return {"authorization": f"MQv2-HMAC-SHA1 Credential={user}, SignedHeaders=x-mq-date-time, Signature={sig}",
            "x-mq-date-time": STAMP}  # fmt: skip


def decide(meta: dict[str, str], needs: list[Need], switches: Switches = BOTH, peer: str = "10.1.2.3") -> str | None:
    refusal = check(USERS, ACLS, switches, peer, meta, "Call", needs, NOW, 900)
    return None if refusal is None else refusal.reason


def send(topic: str) -> list[Need]:
    return needs_of("SendMessage", svc.SendMessageRequest(messages=[pb.Message(topic=pb.Resource(name=topic))]))


def receive(topic: str, group: str) -> list[Need]:
    request = svc.ReceiveMessageRequest(group=pb.Resource(name=group),
                                        message_queue=pb.MessageQueue(topic=pb.Resource(name=topic)))  # fmt: skip
    return needs_of("ReceiveMessage", request)


def test_authentication() -> None:
    assert decide(signed("alice", "alice-pw"), send("orders")) is None
    assert decide(signed("alice", "alice-pw", upper=True), send("orders")) is None  # the Node.js client's hex
    assert decide(signed("alice", "wrong"), send("orders")) == Reason.ACL_SIGNATURE
    assert decide(signed("bob", "x"), send("orders")) == Reason.ACL_UNKNOWN_ACCOUNT
    assert decide(signed("off", "off-pw"), []) == Reason.ACL_USER_DISABLED
    assert decide({}, []) == Reason.ACL_NO_CREDENTIALS
    late = signed("alice", "alice-pw") | {"x-mq-date-time": "20261203T141500Z"}
    assert decide(late, []) == Reason.ACL_SIGNATURE  # beyond the skew (and no longer what was signed)


def test_authorization_by_policies() -> None:
    me = signed("alice", "alice-pw")
    assert decide(me, send("events")) == Reason.NO_PERMISSION  # Sub only
    assert decide(me, receive("events", "billing")) is None
    assert decide(me, receive("events", "billing"), peer="192.168.1.1") == Reason.NO_PERMISSION  # sourceIps
    assert decide(me, receive("orders", "billing")) == Reason.NO_PERMISSION
    assert decide(signed("root", "root-pw"), receive("anything", "any")) is None  # a Super user
    route = needs_of("QueryRoute", svc.QueryRouteRequest(topic=pb.Resource(name="orders")))
    assert decide(me, route) is None and decide(me, needs_of("QueryRoute", svc.QueryRouteRequest(
        topic=pb.Resource(name="other")))) == Reason.NO_PERMISSION  # fmt: skip


def test_the_two_switches() -> None:
    assert decide(signed("alice", "wrong"), send("events"), Switches(True, False)) == Reason.ACL_SIGNATURE
    assert decide(signed("alice", "alice-pw"), send("events"), Switches(True, False)) is None
    # authorization alone trusts the Credential's name, as a broker trusts the AccessKey
    assert decide(signed("alice", "wrong"), send("orders"), Switches(False, True)) is None
    assert decide(signed("alice", "wrong"), send("events"), Switches(False, True)) == Reason.NO_PERMISSION
    assert decide({}, send("events"), Switches(False, False)) is None


def test_what_each_call_needs() -> None:
    g, t = Resource(ResourceType.GROUP, "G"), Resource(ResourceType.TOPIC, "T")
    sub, pub = frozenset([Action.SUB]), frozenset([Action.PUB])
    group, topic = pb.Resource(name="G"), pb.Resource(name="T")
    assert send("%RETRY%G") == [(g, sub)]  # a consumer's retry: Sub on its group
    assert needs_of("AckMessage", svc.AckMessageRequest(group=group, topic=topic)) == [(g, sub), (t, sub)]
    assert needs_of("EndTransaction", svc.EndTransactionRequest(topic=topic)) == [(t, pub)]
    consumer = svc.HeartbeatRequest(group=group, client_type=pb.SIMPLE_CONSUMER)
    assert needs_of("Heartbeat", consumer) == [(g, sub)]
    assert needs_of("Heartbeat", svc.HeartbeatRequest(client_type=pb.PRODUCER)) == []
    assert needs_of("NotifyClientTermination", svc.NotifyClientTerminationRequest()) == []
    sub_settings = pb.Settings(subscription=pb.Subscription(group=group, subscriptions=[
        pb.SubscriptionEntry(topic=topic)]))  # fmt: skip
    assert settings_needs(sub_settings) == [(g, sub), (t, sub)]
    assert settings_needs(pb.Settings(publishing=pb.Publishing(topics=[topic]))) == [(t, pub)]
    assert needs_of("Telemetry", None) == []
