"""The PULL_MESSAGE (11) request header and its ``sysFlag`` bits (``docs/protocol/requests.md``, pull).

One definition for the three parties that speak it: the client and the filter server build it
(``to_fields``), the broker and the filter server read it (``parse``). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sievemq.remoting.headers import get_str, int_or, require_int, require_str

__all__ = [
    "DEFAULT_SUSPEND_MS",
    "FLAG_CLASS_FILTER",
    "FLAG_COMMIT_OFFSET",
    "FLAG_SUBSCRIPTION",
    "FLAG_SUSPEND",
    "PullMessageHeader",
    "pull_sys_flag",
]

FLAG_COMMIT_OFFSET = 0x1
"""``commitOffset`` carries the consumer's offset to store (a piggybacked UPDATE_CONSUMER_OFFSET)."""
FLAG_SUSPEND = 0x2
"""The broker may hold the pull (long polling) for ``suspendTimeoutMillis``."""
FLAG_SUBSCRIPTION = 0x4
"""``subscription`` / ``expressionType`` / ``subVersion`` in the header replace the group's heartbeat subscription."""
FLAG_CLASS_FILTER = 0x8
"""Class-filter mode: the pull goes to a filter server, which runs the group's filter function."""

DEFAULT_SUSPEND_MS = 15000


def pull_sys_flag(*, commit_offset: bool, suspend: bool, subscription: bool, class_filter: bool) -> int:
    """The ``sysFlag`` of a pull from its four switches."""
    return (
        (FLAG_COMMIT_OFFSET if commit_offset else 0)
        | (FLAG_SUSPEND if suspend else 0)
        | (FLAG_SUBSCRIPTION if subscription else 0)
        | (FLAG_CLASS_FILTER if class_filter else 0)
    )


@dataclass(slots=True)
class PullMessageHeader:
    """PullMessageRequestHeader."""

    consumer_group: str
    topic: str
    queue_id: int
    queue_offset: int
    max_msg_nums: int = 32
    sys_flag: int = 0
    commit_offset: int = 0
    suspend_timeout_millis: int = DEFAULT_SUSPEND_MS
    subscription: str | None = None
    expression_type: str | None = None
    sub_version: int = 0

    @classmethod
    def parse(cls, fields: Mapping[str, str]) -> PullMessageHeader:
        """Read a header leniently (``HeaderError`` when a required field is missing or not a number)."""
        return cls(
            consumer_group=require_str(fields, "consumerGroup"),
            topic=require_str(fields, "topic"),
            queue_id=require_int(fields, "queueId"),
            queue_offset=require_int(fields, "queueOffset"),
            max_msg_nums=max(1, int_or(fields, "maxMsgNums", 32)),
            sys_flag=int_or(fields, "sysFlag", 0),
            commit_offset=int_or(fields, "commitOffset", -1),
            suspend_timeout_millis=int_or(fields, "suspendTimeoutMillis", DEFAULT_SUSPEND_MS),
            subscription=get_str(fields, "subscription"),
            expression_type=get_str(fields, "expressionType"),
            sub_version=int_or(fields, "subVersion", 0),
        )

    # ------------------------------------------------------------------------------------------ flags
    @property
    def commits_offset(self) -> bool:
        """FLAG_COMMIT_OFFSET is set (the offset to store is ``commit_offset`` when it is >= 0)."""
        return bool(self.sys_flag & FLAG_COMMIT_OFFSET)

    @property
    def suspend(self) -> bool:
        """FLAG_SUSPEND is set."""
        return bool(self.sys_flag & FLAG_SUSPEND)

    @property
    def has_subscription(self) -> bool:
        """FLAG_SUBSCRIPTION is set: the header's expression is the one to filter with."""
        return bool(self.sys_flag & FLAG_SUBSCRIPTION)

    @property
    def class_filter(self) -> bool:
        """FLAG_CLASS_FILTER is set."""
        return bool(self.sys_flag & FLAG_CLASS_FILTER)

    def to_fields(self) -> dict[str, Any]:
        """The header as extFields (the subscription fields only when it carries one)."""
        fields: dict[str, Any] = {
            "consumerGroup": self.consumer_group,
            "topic": self.topic,
            "queueId": self.queue_id,
            "queueOffset": self.queue_offset,
            "maxMsgNums": self.max_msg_nums,
            "sysFlag": self.sys_flag,
            "commitOffset": self.commit_offset,
            "suspendTimeoutMillis": self.suspend_timeout_millis,
            "subVersion": self.sub_version,
        }
        if self.subscription is not None:
            fields["subscription"] = self.subscription
            fields["expressionType"] = self.expression_type or "TAG"
        return fields
