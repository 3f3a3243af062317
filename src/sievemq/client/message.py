"""The client's message model: Message (to send), MessageQueue, Selector, ConsumeResult, SendResult, SendStatus.

Consumers receive ``sievemq.protocol.message.MessageExt`` (re-exported as ``sievemq.MessageExt``).
"""

from __future__ import annotations

import enum
import logging
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sievemq.protocol.message import MessageExt, PropertyKey
from sievemq.protocol.sysflag import COMPRESSED_FLAG, COMPRESSION_TYPE_MASK, COMPRESSION_ZLIB_TYPE

log = logging.getLogger(__name__)

RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"


def retry_topic(group: str) -> str:
    """``%RETRY%<group>``: where a group's failed messages come back."""
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    """``%DLQ%<group>``: where messages go after the last retry."""
    return DLQ_GROUP_TOPIC_PREFIX + group


@dataclass
class Message:
    """A message to send.

    ``keys`` are business keys (indexed by the broker, space-separated on the wire); ``properties`` are user
    properties (names must not be reserved RocketMQ names). ``delay_level`` 1..18 delays delivery
    (1 s, 5 s, 10 s, 30 s, 1 m, ...). ``wait_store`` asks the broker to answer after storing (``WAIT``).
    """

    topic: str
    body: bytes
    tags: str | None = None
    keys: list[str] | str | None = None
    properties: dict[str, str] = field(default_factory=dict)
    flag: int = 0
    delay_level: int = 0
    wait_store: bool = True

    def key_list(self) -> list[str]:
        """``keys`` as a list."""
        if self.keys is None:
            return []
        if isinstance(self.keys, str):
            return [k for k in self.keys.split(" ") if k]
        return list(self.keys)

    def wire_properties(self) -> dict[str, str]:
        """Every property as it travels: user properties plus TAGS, KEYS, DELAY, WAIT."""
        props = dict(self.properties)
        if self.tags:
            props[PropertyKey.TAGS] = self.tags
        keys = self.key_list()
        if keys:
            props[PropertyKey.KEYS] = " ".join(keys)
        if self.delay_level > 0:
            props[PropertyKey.DELAY] = str(self.delay_level)
        props[PropertyKey.WAIT] = "true" if self.wait_store else "false"
        return props


@dataclass(frozen=True, order=True)
class MessageQueue:
    """One queue of a topic on one broker (sorted by topic, broker name, queue id like Java)."""

    topic: str
    broker_name: str
    queue_id: int

    def to_json(self) -> dict[str, Any]:
        """RocketMQ's JSON form."""
        return {"brokerName": self.broker_name, "queueId": self.queue_id, "topic": self.topic}

    def key(self) -> str:
        """``topic@brokerName@queueId``: a stable string key."""
        return f"{self.topic}@{self.broker_name}@{self.queue_id}"

    @classmethod
    def from_key(cls, key: str) -> MessageQueue:
        """Parse ``key()``'s form."""
        topic, broker, qid = key.rsplit("@", 2)
        return cls(topic, broker, int(qid))

    def __str__(self) -> str:
        return f"{self.topic}/{self.broker_name}/{self.queue_id}"


class SendStatus(enum.Enum):
    """How a send succeeded (anything else raises)."""

    SEND_OK = 0
    FLUSH_DISK_TIMEOUT = 10
    SLAVE_NOT_AVAILABLE = 11
    FLUSH_SLAVE_TIMEOUT = 12


@dataclass(frozen=True)
class SendResult:
    """What a send returned: the client id (UNIQ_KEY) and the broker's offsetMsgId, queue and offset.

    For a batch, ``msg_id`` and ``offset_msg_id`` list every message's id joined by commas.
    """

    status: SendStatus
    msg_id: str
    offset_msg_id: str
    message_queue: MessageQueue
    queue_offset: int
    region_id: str = "DefaultRegion"
    trace_on: bool = True

    @property
    def msg_ids(self) -> list[str]:
        """Every client message id (several for a batch)."""
        return self.msg_id.split(",") if self.msg_id else []


class ConsumeResult(enum.Enum):
    """What a push listener answers: SUCCESS, or RECONSUME_LATER to have the messages redelivered later."""

    SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


class ConsumeFrom(enum.Enum):
    """Where a group without a committed offset starts (only when the broker has no offset for it)."""

    LAST = "CONSUME_FROM_LAST_OFFSET"
    FIRST = "CONSUME_FROM_FIRST_OFFSET"
    TIMESTAMP = "CONSUME_FROM_TIMESTAMP"

    @classmethod
    def parse(cls, value: ConsumeFrom | str) -> ConsumeFrom:
        """Accept the enum, ``"last"``/``"first"``/``"timestamp"`` or the Java names."""
        if isinstance(value, ConsumeFrom):
            return value
        v = value.strip().upper()
        for member in cls:
            if v in (member.name, member.value):
                return member
        raise ValueError(f"consume_from must be last, first or timestamp, not {value!r}")


@dataclass(frozen=True)
class Selector:
    """A subscription expression: tags (``"TagA || TagB"``, ``"*"``) or SQL92 over message properties."""

    expression: str = "*"
    expression_type: str = "TAG"

    @classmethod
    def tag(cls, expression: str | Iterable[str] | None = "*") -> Selector:
        """Tags joined by ``||``; ``"*"``/``None`` means every message."""
        if expression is None:
            return cls("*", "TAG")
        if not isinstance(expression, str):
            expression = " || ".join(expression)
        return cls(expression.strip() or "*", "TAG")

    @classmethod
    def sql(cls, expression: str) -> Selector:
        """A SQL92 condition on properties, e.g. ``"region = 'eu' AND amount > 10"``."""
        if not expression or not expression.strip():
            raise ValueError("a SQL92 selector needs an expression")
        return cls(expression.strip(), "SQL92")

    @classmethod
    def of(cls, value: Selector | str | None) -> Selector:
        """A Selector from a Selector or a tag expression string."""
        if isinstance(value, Selector):
            return value
        return cls.tag(value)

    @property
    def is_tag(self) -> bool:
        """True for a TAG expression."""
        return self.expression_type == "TAG"


def decompress_body(msg: MessageExt) -> None:
    """Inflate a compressed body in place (zlib; LZ4/zstd if their modules are installed)."""
    if not msg.sys_flag & COMPRESSED_FLAG or not msg.body:
        return
    kind = msg.sys_flag & COMPRESSION_TYPE_MASK
    try:
        if kind in (0, COMPRESSION_ZLIB_TYPE):
            msg.body = zlib.decompress(msg.body)
        else:
            msg.body = _decompress_other(kind, msg.body)
    except Exception as e:
        log.warning("cannot decompress message %s (sysFlag 0x%x): %s; body left as stored", msg.msg_id, msg.sys_flag, e)


def _decompress_other(kind: int, body: bytes) -> bytes:
    if kind == 0x100:
        import lz4.frame  # type: ignore[import-not-found,unused-ignore]

        return bytes(lz4.frame.decompress(body))
    import zstandard  # type: ignore[import-not-found,unused-ignore]

    return bytes(zstandard.ZstdDecompressor().decompress(body))


def restore_retry_topic(msg: MessageExt, group: str) -> None:
    """A message pulled from ``%RETRY%<group>`` gets its original topic back (property RETRY_TOPIC), like Java."""
    original = msg.properties.get(PropertyKey.RETRY_TOPIC)
    if original and msg.topic == retry_topic(group):
        msg.topic = original


def properties_of(values: Mapping[str, Any]) -> dict[str, str]:
    """User properties as strings."""
    return {str(k): str(v) for k, v in values.items()}
