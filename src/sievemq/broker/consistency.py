"""Which subscription is a consumer group's, and which clients subscribe differently (pure, no I/O).

RocketMQ keeps one subscription per (group, topic) — the newest heartbeat wins — and shares a topic's queues out
among all of the group's clients whatever they subscribe; a client then drops what it did not ask for while the
group's offset moves on, and messages are lost silently. sievemq decides per (group, topic):

* the group's subscription is the expression held by the clients that registered it first (each client's
  registration of an expression gets an increasing sequence number; the smallest wins, ties broken by client
  id). It stays the group's while any live client holds it; when its last holder leaves, the next takes over.
* a client of the topic whose expression differs is *inconsistent*: it is left out of the group's consumer list,
  so the consistent clients' rebalance covers every queue, and its pulls of that topic are refused with a remark
  that says how to fix it.

Consistency is judged per topic, among the clients that subscribe that topic: clients of one group subscribing
different topics stay legal.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from sievemq.protocol.heartbeat import Subscription


@dataclass(frozen=True, slots=True)
class TopicVerdict:
    """The outcome for one topic of a group."""

    topic: str
    group_subscription: Subscription
    holders: tuple[str, ...]
    consistent: frozenset[str]
    inconsistent: Mapping[str, Subscription] = field(default_factory=dict)


_NONE: Mapping[str, Subscription] = MappingProxyType({})
"""The inconsistent clients of a topic only one client subscribes (read-only: shared)."""


def decide(
    subscriptions: Mapping[str, Mapping[str, Subscription]],
    registered_at: Mapping[str, Mapping[str, int]],
) -> dict[str, TopicVerdict]:
    """Verdicts per topic from each live client's subscriptions and the sequence number at which it registered
    its current expression of each topic.

    A group may subscribe 100,000 topics (docs/metrics.md §12), and this runs whenever a client joins, leaves or
    changes its subscriptions: a topic one client subscribes is decided without normalising its expression, and an
    expression is normalised once per call however many topics use it."""
    topics: dict[str, list[str]] = {}
    for cid, subs in subscriptions.items():
        for topic in subs:
            topics.setdefault(topic, []).append(cid)
    keys: dict[tuple[bool, str, str], tuple[str, str]] = {}

    def key_of(sub: Subscription) -> tuple[str, str]:
        k = (sub.class_filter_mode, sub.expression_type, sub.sub_string)
        v = keys.get(k)
        if v is None:
            v = keys[k] = sub.expression_key()
        return v

    alone: dict[str, tuple[tuple[str, ...], frozenset[str]]] = {}
    """A client's holders and consistent set for the topics only it subscribes: shared, not made per topic."""
    out: dict[str, TopicVerdict] = {}
    for topic, cids in topics.items():
        if len(cids) == 1:
            cid = cids[0]
            one = alone.get(cid)
            if one is None:
                one = alone[cid] = ((cid,), frozenset(cids))
            out[topic] = TopicVerdict(topic, subscriptions[cid][topic], one[0], one[1], _NONE)
            continue
        by_key: dict[tuple[str, str], list[str]] = {}
        for cid in cids:
            by_key.setdefault(key_of(subscriptions[cid][topic]), []).append(cid)

        def seq(cid: str, topic: str = topic) -> tuple[int, str]:
            return (registered_at.get(cid, {}).get(topic, 0), cid)

        holders = min((sorted(cs, key=seq) for cs in by_key.values()), key=lambda cs: seq(cs[0]))
        group_sub = subscriptions[holders[0]][topic]
        inconsistent = {c: subscriptions[c][topic] for c in cids if c not in holders}
        out[topic] = TopicVerdict(topic, group_sub, tuple(holders), frozenset(holders), inconsistent)
    return out


def inconsistency_remark(group: str, topic: str, group_sub: Subscription, client_sub: Subscription) -> str:
    """What an inconsistent client is told."""
    return (
        f"inconsistent subscription: consumer group '{group}' subscribes topic '{topic}' with "
        f"'{group_sub.describe()}', but this client subscribes it with '{client_sub.describe()}'. "
        "Clients of one group must subscribe a topic alike, or messages are lost. This client gets no queues of "
        f"'{topic}' until it does: use another consumer group for the other expression, or subscribe with "
        f"'{group_sub.describe()}'."
    )
