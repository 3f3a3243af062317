"""ACL 2.0's model: resources, actions, users and their validation (sievemq.auth.model, sievemq.auth.wire)."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sievemq.auth.model import (
    MAX_ENTRIES,
    Acl,
    Action,
    AuthError,
    Decision,
    Pattern,
    PolicyEntry,
    PolicyType,
    Resource,
    ResourceType,
    ip_in,
    parse_actions,
    parse_resource,
    parse_source_ip,
    parse_subject,
    parse_username,
)
from sievemq.auth.wire import acl_info, parse_acl_info, parse_user_info

NAMES = st.text("abcXYZ019_-%|", min_size=1, max_size=20)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("*", Resource(ResourceType.ANY, "", Pattern.ANY)),
        ("Topic:*", Resource(ResourceType.TOPIC, "", Pattern.ANY)),
        ("topic:orders", Resource(ResourceType.TOPIC, "orders")),
        ("Group:g1", Resource(ResourceType.GROUP, "g1")),
        ("Topic:ord*", Resource(ResourceType.TOPIC, "ord", Pattern.PREFIXED)),
        ("Cluster:DefaultCluster", Resource(ResourceType.CLUSTER, "DefaultCluster")),
    ],
)
def test_resources_are_read_as_rocketmq_writes_them(text: str, expected: Resource) -> None:
    assert parse_resource(text) == expected


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "non-empty"),
        ("orders", "Type:name"),
        ("Queue:x", "not one of"),
        ("Topic:", "empty"),
        ("Topic:a*b", "may only end"),
        ("Topic:bad name", "illegal"),
        ("Any:x", "alone"),
        ("Namespace:x", "not one of"),
        ("Topic:" + "x" * 400, "longer than"),
    ],
)
def test_a_bad_resource_is_refused_with_the_reason(text: str, problem: str) -> None:
    with pytest.raises(AuthError, match=problem):
        parse_resource(text)


@given(st.sampled_from(["Topic", "Group", "Cluster"]), NAMES, st.booleans())
def test_a_resource_key_reads_back_as_the_same_resource(kind: str, name: str, prefix: bool) -> None:
    key = f"{kind}:{name}{'*' if prefix else ''}"
    try:
        resource = parse_resource(key)
    except AuthError:
        return  # a name of illegal characters for its kind
    assert parse_resource(resource.key) == resource


@given(NAMES, NAMES)
def test_prefix_literal_and_any_match_as_rocketmq(prefix: str, name: str) -> None:
    target = Resource(ResourceType.TOPIC, name)
    assert Resource(ResourceType.TOPIC, prefix, Pattern.PREFIXED).matches(target) == name.startswith(prefix)
    assert Resource(ResourceType.TOPIC, prefix).matches(target) == (name == prefix)
    assert Resource(ResourceType.TOPIC, "", Pattern.ANY).matches(target)
    assert parse_resource("*").matches(target)
    assert not Resource(ResourceType.GROUP, "", Pattern.ANY).matches(target)


def test_a_retry_topic_is_its_group() -> None:
    assert Resource.topic("%RETRY%g1") == Resource(ResourceType.GROUP, "g1")
    assert Resource.group("%RETRY%g1") == Resource.group("g1")


def test_actions_usernames_subjects_and_addresses() -> None:
    assert parse_actions(["pub", "Sub", "PUB"]) == frozenset([Action.PUB, Action.SUB])
    assert parse_actions("Get,List") == frozenset([Action.GET, Action.LIST])
    for bad in ([], ["Any"], ["Publish"], None):
        with pytest.raises(AuthError):
            parse_actions(bad)
    assert parse_username("alice.ops@example") == "alice.ops@example"
    for bad in ("", "a:b", "a,b", "a b", "x" * 129, None):
        with pytest.raises(AuthError):
            parse_username(bad)
    assert parse_subject("User:alice") == "alice"
    with pytest.raises(AuthError, match="User"):
        parse_subject("Role:alice")
    assert parse_source_ip(" 10.0.0.0/8 ") == "10.0.0.0/8"
    with pytest.raises(AuthError):
        parse_source_ip("10.0.0.*")
    assert ip_in("10.1.2.3", ["10.0.0.0/8"]) and not ip_in("11.1.2.3", ["10.0.0.0/8"])
    assert ip_in("::ffff:10.1.2.3", ["10.0.0.0/8"]) and ip_in("2001:db8::1", ["2001:db8::/32"])
    assert ip_in("anything", []) and not ip_in("not-an-ip", ["10.0.0.0/8"])


def test_an_acl_keeps_one_entry_per_resource_and_a_bounded_size() -> None:
    topic = parse_resource("Topic:a")
    acl = Acl("u").merged(PolicyType.CUSTOM, [PolicyEntry(topic, frozenset([Action.PUB]), Decision.ALLOW)])
    acl = acl.merged(PolicyType.CUSTOM, [PolicyEntry(topic, frozenset([Action.SUB]), Decision.DENY)])
    assert acl.custom == (PolicyEntry(topic, frozenset([Action.SUB]), Decision.DENY),)
    assert acl.without(PolicyType.CUSTOM, topic).empty
    many = [PolicyEntry(parse_resource(f"Topic:t{i}"), frozenset([Action.PUB]), Decision.ALLOW)
            for i in range(MAX_ENTRIES + 1)]  # fmt: skip
    with pytest.raises(AuthError, match="more than"):
        Acl("u").merged(PolicyType.CUSTOM, many)


def test_acl_info_round_trip_and_errors() -> None:
    body = {"subject": "User:alice", "policies": [
        {"entries": [{"resource": "Topic:a*", "actions": ["Pub", "Sub"], "sourceIps": ["10.0.0.0/8"],
                      "decision": "allow"}]},
        {"policyType": "Default", "entries": [{"resource": "Group:*", "actions": ["All"], "decision": "Deny"}]},
    ]}  # fmt: skip
    name, policies = parse_acl_info(orjson.dumps(body), None)
    acl = Acl(name)
    for ptype, entries in policies:
        acl = acl.merged(ptype, entries)
    info = acl_info(acl)
    assert info["policies"][0] == {"policyType": "Custom", "entries": [
        {"resource": "Topic:a*", "actions": ["Pub", "Sub"], "sourceIps": ["10.0.0.0/8"], "decision": "Allow"}]}
    assert parse_acl_info(orjson.dumps(info), None) == (name, policies)
    for bad, problem in (
        ({"subject": "User:a", "policies": []}, "at least one policy"),
        ({"subject": "User:a", "policies": [{"entries": []}]}, "at least one entry"),
        ({"subject": "User:a", "policies": [{"entries": [{"resource": "Topic:a", "actions": ["Pub"]}]}]},
         "decision"),
        ({"policies": [{"entries": [{"resource": "Topic:a", "actions": ["Pub"], "decision": "Allow"}]}]},
         "subject"),
    ):  # fmt: skip
        with pytest.raises(AuthError, match=problem):
            parse_acl_info(orjson.dumps(bad), None)
    with pytest.raises(AuthError, match="JSON"):
        parse_acl_info(b"{nope", "User:a")


def test_user_info() -> None:
    info = parse_user_info(b'{"username": "x", "password": "pw", "userType": "super", "userStatus": "Disable"}')
    assert (info.password, info.user_type.value if info.user_type else None) == ("pw", "Super")
    assert info.status is not None and info.status.value == "disable"
    with pytest.raises(AuthError, match="userType"):
        parse_user_info(b'{"userType": "Root"}')
