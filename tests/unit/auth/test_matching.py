"""Which entry decides: CUSTOM before DEFAULT, the most specific resource first, Deny on ties (RocketMQ's
AclAuthorizationHandler), nothing matched: denied."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from sievemq.auth.matching import deciding_entry, judge
from sievemq.auth.model import Acl, Action, Decision, PolicyEntry, PolicyType, parse_resource

PUB = frozenset([Action.PUB])
SUB = frozenset([Action.SUB])
IP = "127.0.0.1"


def entry(resource: str, decision: str = "Allow", actions: frozenset[Action] = PUB, ips: tuple[str, ...] = ()
          ) -> PolicyEntry:  # fmt: skip
    return PolicyEntry(parse_resource(resource), actions, Decision.parse(decision, "d"), ips)


def acl(custom: list[PolicyEntry], default: list[PolicyEntry] | None = None) -> Acl:
    return Acl("u", tuple(custom), tuple(default or ()))


def test_no_acl_or_no_matching_entry_is_a_denial() -> None:
    assert not judge(None, parse_resource("Topic:a"), PUB, IP).allowed
    assert not judge(acl([entry("Topic:b")]), parse_resource("Topic:a"), PUB, IP).allowed
    assert not judge(acl([entry("Topic:a")]), parse_resource("Topic:a"), SUB, IP).allowed


def test_the_most_specific_resource_wins_over_a_broader_deny() -> None:
    a = acl([entry("*", "Deny", frozenset([Action.ALL])), entry("Topic:*", "Deny"), entry("Topic:ord*", "Deny"),
             entry("Topic:orders")])  # fmt: skip
    assert judge(a, parse_resource("Topic:orders"), PUB, IP).allowed
    assert not judge(a, parse_resource("Topic:ordersX"), PUB, IP).allowed
    b = acl([entry("Topic:o*"), entry("Topic:ord*", "Deny")])
    assert not judge(b, parse_resource("Topic:orders"), PUB, IP).allowed  # the longer prefix
    assert judge(b, parse_resource("Topic:other"), PUB, IP).allowed
    c = acl([entry("*"), entry("Topic:*", "Deny")])
    assert not judge(c, parse_resource("Topic:x"), PUB, IP).allowed  # Topic:* before *
    assert judge(c, parse_resource("Group:x"), PUB, IP).allowed


def test_custom_entries_hide_default_ones() -> None:
    a = acl([entry("Topic:a", "Deny")], [entry("Topic:*")])
    assert not judge(a, parse_resource("Topic:a"), PUB, IP).allowed
    assert judge(a, parse_resource("Topic:b"), PUB, IP).allowed
    b = acl([entry("Topic:a", actions=SUB)], [entry("Topic:*", "Deny")])
    assert not judge(b, parse_resource("Topic:a"), PUB, IP).allowed  # the custom entry is about Sub only


def test_source_addresses_and_all_actions() -> None:
    a = acl([entry("Topic:a", actions=frozenset([Action.ALL]), ips=("10.0.0.0/8",))])
    assert judge(a, parse_resource("Topic:a"), SUB, "10.2.3.4").allowed
    assert not judge(a, parse_resource("Topic:a"), SUB, "192.168.0.1").allowed


def test_deny_wins_between_equally_specific_entries() -> None:
    a = acl([entry("Topic:a"), entry("Topic:a", "Deny")])
    assert not judge(a, parse_resource("Topic:a"), PUB, IP).allowed
    a = acl([entry("Topic:a", "Deny"), entry("Topic:a")])
    assert not judge(a, parse_resource("Topic:a"), PUB, IP).allowed


RESOURCES = st.sampled_from(["*", "Topic:*", "Topic:o*", "Topic:or*", "Topic:orders", "Group:*", "Group:g"])
ENTRIES = st.builds(
    entry, RESOURCES, st.sampled_from(["Allow", "Deny"]),
    st.frozensets(st.sampled_from([Action.PUB, Action.SUB, Action.ALL]), min_size=1),
)  # fmt: skip


@given(st.lists(ENTRIES, max_size=8), st.sampled_from(["Topic:orders", "Topic:other", "Group:g"]),
       st.sampled_from([PUB, SUB]))  # fmt: skip
def test_a_deny_next_to_the_deciding_entry_denies(entries: list[PolicyEntry], target: str,
                                                  actions: frozenset[Action]) -> None:  # fmt: skip
    resource = parse_resource(target)
    a = Acl("u").merged(PolicyType.CUSTOM, entries)
    decider = deciding_entry(a, resource, actions, IP)
    if decider is None:
        assert not judge(a, resource, actions, IP).allowed
        return
    assert judge(a, resource, actions, IP).allowed == (decider.decision is Decision.ALLOW)
    denied = Acl("u", (*a.custom, PolicyEntry(decider.resource, decider.actions, Decision.DENY)))
    assert not judge(denied, resource, actions, IP).allowed
    # and an Allow of a strictly broader resource never overrides it
    broader = Acl("u", (*denied.custom, entry("*", "Allow", frozenset([Action.ALL]))))
    assert not judge(broader, resource, actions, IP).allowed
