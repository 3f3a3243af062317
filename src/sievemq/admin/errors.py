"""What the operator's commands refuse with: each a ``SieveError`` whose text says what to do."""

from __future__ import annotations

from sievemq.errors import SieveError

__all__ = [
    "BrokerNotFound",
    "ClusterNotFound",
    "GroupNotFound",
    "GroupOnline",
    "MessageNotFound",
    "NotAMessageId",
    "QueueNotFound",
    "TopicNotFound",
]


class GroupNotFound(SieveError):
    """No broker knows the consumer group (no subscription config, no offsets, no client)."""

    def __init__(self, group: str) -> None:
        super().__init__(
            f"consumer group {group} does not exist: no broker has its subscription config, offsets or clients "
            "(`sievemq group list` shows the groups)"
        )
        self.group = group


class TopicNotFound(SieveError):
    """The name servers know no such topic."""

    def __init__(self, topic: str) -> None:
        super().__init__(f"topic {topic} does not exist (`sievemq topic list` shows the topics)")
        self.topic = topic


class GroupOnline(SieveError):
    """A group with live consumers is not deleted without ``force``."""

    def __init__(self, group: str, members: list[str]) -> None:
        super().__init__(
            f"consumer group {group} has {len(members)} consumer(s) online ({', '.join(members)}): stop them first, "
            "or delete anyway with --force (a running consumer re-creates the group on its next pull while "
            "autoCreateSubscriptionGroup is on)"
        )
        self.members = members


class MessageNotFound(SieveError):
    """No broker holds a message with that id."""


class NotAMessageId(MessageNotFound, ValueError):
    """A string that cannot be a message id (neither an offsetMsgId nor a UNIQ_KEY): refused before any search (no
    message has it, so it is a MessageNotFound too)."""

    def __init__(self, text: str, why: str) -> None:
        super().__init__(
            f"{text!r} is not a message id ({why}): a message id is the msgId a send returns (UNIQ_KEY: 32 hex "
            "digits, 34 from a 5.x client) or an offsetMsgId (32 hex digits, 56 for an IPv6 broker). To find messages "
            f"by a business key: sievemq message find --topic TOPIC --key {text}"
        )
        self.text = text


class QueueNotFound(SieveError):
    """A queue id past the queues a topic has (on every broker set asked)."""

    def __init__(self, topic: str, queue_id: int, queues: dict[str, int]) -> None:
        have = ", ".join(f"{q} queues (0..{q - 1}) on {b}" if q else f"no readable queue on {b}"
                         for b, q in sorted(queues.items()))  # fmt: skip
        super().__init__(f"topic {topic} has no queue {queue_id}: it has {have}")
        self.topic = topic
        self.queue_id = queue_id


class BrokerNotFound(SieveError):
    """A broker set name (``--broker``) the cluster does not have, or one that holds no queue of the topic."""

    def __init__(self, broker: str, topic: str, topic_sets: list[str], cluster_sets: list[str]) -> None:
        if broker in cluster_sets:
            text = f"broker set {broker} holds no queue of topic {topic} (its broker sets: {', '.join(topic_sets)})"
        else:
            sets = ", ".join(cluster_sets) or "none"
            text = f"broker set {broker} does not exist (the cluster's: {sets}; `sievemq cluster status` lists them)"
        super().__init__(text)
        self.broker = broker


class ClusterNotFound(SieveError):
    """A cluster name (``--cluster``) no registered broker belongs to."""

    def __init__(self, cluster: str, known: list[str]) -> None:
        super().__init__(f"cluster {cluster} does not exist: no registered broker belongs to it (clusters: "
                         f"{', '.join(known) or 'none'}; `sievemq cluster status` lists them)")  # fmt: skip
        self.cluster = cluster
