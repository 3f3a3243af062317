"""Names on the wire: system topics, topics derived from a group, reserved groups, name rules, client versions.

One home for every name that a client, a broker and a filter server must spell alike (see
``docs/protocol/message-format.md``, delay, retry and system topics). Pure: no I/O.
"""

from __future__ import annotations

import re

from sievemq.protocol.message import MAX_TOPIC_LENGTH

__all__ = [
    "AUTO_CREATE_TOPIC_KEY",
    "CLIENT_INNER_PRODUCER_GROUP",
    "DLQ_GROUP_TOPIC_PREFIX",
    "FILTERSRV_CONSUMER_GROUP",
    "GROUP_MAX_LENGTH",
    "MAX_TOPIC_LENGTH",
    "NAME_RE",
    "NOT_ALLOWED_SEND_TOPICS",
    "OFFSET_MOVED_EVENT",
    "POP_LOG_TOPIC",
    "REPLY_TOPIC_SUFFIX",
    "RETRY_GROUP_TOPIC_PREFIX",
    "SCHEDULE_TOPIC",
    "SELF_TEST_TOPIC",
    "SYSTEM_TOPIC_PREFIXES",
    "TIMER_TOPIC",
    "TOOLS_CONSUMER_GROUP",
    "TOOLS_DLQ_RESEND_GROUP",
    "TRANS_CHECK_MAX_TIME_TOPIC",
    "TRANS_HALF_TOPIC",
    "TRANS_OP_HALF_TOPIC",
    "VERSION_SEND_BACK_MAX_RECONSUME",
    "IllegalName",
    "dlq_topic",
    "group_of_retry_topic",
    "group_problem",
    "is_reserved_topic",
    "is_retry_topic",
    "is_system_topic",
    "reply_topic",
    "retry_topic",
    "topic_problem",
]

# ------------------------------------------------------------------------------------------- system topics
AUTO_CREATE_TOPIC_KEY = "TBW102"
"""The template topic: a broker with it (and PERM_INHERIT) creates unknown topics on first send."""
SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
"""Delayed messages wait here: queue ``level - 1``, the consume-queue tags slot holding the delivery time."""
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
REPLY_TOPIC_SUFFIX = "_REPLY_TOPIC"
"""``<cluster>_REPLY_TOPIC``: where the replies of request-reply go (every broker of the cluster has it)."""


def reply_topic(cluster: str) -> str:
    """The reply topic of ``cluster``."""
    return cluster + REPLY_TOPIC_SUFFIX


TIMER_TOPIC = "rmq_sys_wheel_timer"
"""Where timer messages wait for their time (docs/timer.md)."""
POP_LOG_TOPIC = "RMQ_SYS_POP_LOG"
"""The POP log: the records of POP consumption state (docs/pop.md)."""

NOT_ALLOWED_SEND_TOPICS = frozenset(
    {
        TIMER_TOPIC,
        POP_LOG_TOPIC,
        SCHEDULE_TOPIC,
        TRANS_HALF_TOPIC,
        TRANS_OP_HALF_TOPIC,
        TRANS_CHECK_MAX_TIME_TOPIC,
        SELF_TEST_TOPIC,
        OFFSET_MOVED_EVENT,
    }
)
"""Topics no client may send to directly."""

RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
SYSTEM_TOPIC_PREFIXES = (RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX, "rmq_sys_", "RMQ_SYS_")
"""Prefixes of topics a broker creates for itself (hidden from plain topic listings)."""

def is_reserved_topic(topic: str) -> bool:
    """A topic only the broker itself may create or change (RocketMQ's ``TopicValidator.isSystemTopic``): the
    template, the broker's own topics, ``rmq_sys_*`` / ``RMQ_SYS_*``. Retry and dead-letter topics are not."""
    return (
        topic == AUTO_CREATE_TOPIC_KEY or topic in NOT_ALLOWED_SEND_TOPICS or topic.startswith(("rmq_sys_", "RMQ_SYS_"))
    )


# ------------------------------------------------------------------------------------------- reserved groups
FILTERSRV_CONSUMER_GROUP = "FILTERSRV_CONSUMER"
"""The group a filter server pulls from its broker as."""
CLIENT_INNER_PRODUCER_GROUP = "CLIENT_INNER_PRODUCER"
"""The producer group a consumer uses to send failed messages back to its retry topic."""
TOOLS_CONSUMER_GROUP = "TOOLS_CONSUMER"
"""The group administration tools read as (RocketMQ's): a pull of it creates no subscription group and commits no
offset on the broker (``sievemq topic peek``, docs/admin.md §5)."""
TOOLS_DLQ_RESEND_GROUP = "TOOLS_DLQ_RESEND"
"""The group whose offsets on ``%DLQ%<group>`` record how far ``sievemq dlq resend`` has resent (docs/admin.md §6)."""

# ------------------------------------------------------------------------------------------- name rules
GROUP_MAX_LENGTH = 255
NAME_RE = re.compile(r"^[%|a-zA-Z0-9_-]+\Z")
"""Characters allowed in topic and group names (``\\Z``: a trailing newline is not allowed either)."""


class IllegalName(ValueError):
    """A name in a document (a JSON body, a saved file) breaks the name rules; the text says which and why."""


def topic_problem(topic: str) -> str | None:
    """Why ``topic`` is not a legal topic name (RocketMQ's charset, at most 127 bytes), None when it is.

    The texts are RocketMQ's (``TopicValidator``), with the name cut to 160 characters.
    """
    return _name_problem(topic, "topic", MAX_TOPIC_LENGTH)


def group_problem(group: str, what: str = "group") -> str | None:
    """Why ``group`` is not a legal group name (RocketMQ's charset, at most 255 characters), None when it is."""
    return _name_problem(group, what, GROUP_MAX_LENGTH)


def _name_problem(name: str, what: str, limit: int) -> str | None:
    if not name:
        return f"the specified {what} is blank"
    if not NAME_RE.match(name):
        return f"the specified {what} [{name[:160]}] contains illegal characters, allowing only {NAME_RE.pattern[:-2]}$"
    if len(name) > limit:  # the charset is ASCII: characters are bytes
        return f"the specified {what} is longer than {what} max length {limit} ({len(name)} bytes)"
    return None


# ------------------------------------------------------------------------------------------- client versions
VERSION_SEND_BACK_MAX_RECONSUME = 121
"""The first client version (``RemotingCommand.version``) whose sends and send-backs carry a trustworthy
``maxReconsumeTimes``; older clients get the group's ``retryMaxTimes``."""


def retry_topic(group: str) -> str:
    """``%RETRY%<group>``: where a group's failed messages come back."""
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    """``%DLQ%<group>``: where a group's messages go after the last retry."""
    return DLQ_GROUP_TOPIC_PREFIX + group


def is_retry_topic(topic: str) -> bool:
    """True for ``%RETRY%<group>``."""
    return topic.startswith(RETRY_GROUP_TOPIC_PREFIX)


def group_of_retry_topic(topic: str) -> str | None:
    """The group of ``%RETRY%<group>``, None for any other topic."""
    return topic[len(RETRY_GROUP_TOPIC_PREFIX) :] if topic.startswith(RETRY_GROUP_TOPIC_PREFIX) else None


def is_system_topic(topic: str) -> bool:
    """Topics a broker keeps for itself: templates, schedule, transactions, retry/DLQ, ``rmq_sys_*``."""
    return topic.startswith(SYSTEM_TOPIC_PREFIXES) or topic in NOT_ALLOWED_SEND_TOPICS or topic == AUTO_CREATE_TOPIC_KEY
