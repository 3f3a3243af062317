"""What the operator's commands refuse with: each a ``SieveError`` whose text says what to do."""

from __future__ import annotations

from sievemq.errors import SieveError

__all__ = ["GroupNotFound", "GroupOnline", "MessageNotFound", "TopicNotFound"]


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
