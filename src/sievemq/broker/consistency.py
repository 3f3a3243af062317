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

from sievemq.protocol.heartbeat import Subscription


@dataclass(frozen=True, slots=True)
class TopicVerdict:
    """The outcome for one topic of a group."""

    topic: str
    group_subscription: Subscription
    holders: tuple[str, ...]
    consistent: frozenset[str]
    inconsistent: Mapping[str, Subscription] = field(default_factory=dict)


def decide(
    subscriptions: Mapping[str, Mapping[str, Subscription]],
    registered_at: Mapping[str, Mapping[str, int]],
) -> dict[str, TopicVerdict]:
    """Verdicts per topic from each live client's subscriptions and the sequence number at which it registered
    its current expression of each topic."""
    topics: dict[str, list[str]] = {}
    for cid, subs in subscriptions.items():
        for topic in subs:
            topics.setdefault(topic, []).append(cid)
    out: dict[str, TopicVerdict] = {}
    for topic, cids in topics.items():
        by_key: dict[tuple[str, str], list[str]] = {}
        for cid in cids:
            by_key.setdefault(subscriptions[cid][topic].expression_key(), []).append(cid)

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
