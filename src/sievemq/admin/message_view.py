"""A stored message as the operator's commands show it, and whether a group consumed it (docs/admin.md §5). Pure.

``MessageView.of`` turns a decoded record into the fields ``message show``, ``message find`` and ``topic peek``
print; ``track`` decides, from a group's committed offset of the message's queue and its subscription, whether
the group consumed the message (as RocketMQ's ``queryMsgById`` does, with offline groups judged by their offsets
too, and SQL92 subscriptions evaluated).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from sievemq.admin.timespec import format_ms
from sievemq.filter.sql92 import SqlError, compile_selector
from sievemq.filter.tags import TagExpression
from sievemq.protocol.compression import CompressionError, decompress, is_compressed
from sievemq.protocol.message import MessageExt, PropertyKey

__all__ = ["BODY_PREVIEW_BYTES", "GroupTrack", "MessageView", "TrackState", "body_text", "track"]

BODY_PREVIEW_BYTES = 4096
"""Body bytes shown (text or hex) unless the whole body is saved with ``--body-file``."""
_MAX_INFLATED = 64 * 1024 * 1024


def body_text(body: bytes, limit: int = BODY_PREVIEW_BYTES) -> tuple[str, str]:
    """(encoding, text) of the first ``limit`` bytes: ``utf-8`` when they decode as text, else ``hex``."""
    head = body[:limit]
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as e:
        if len(body) > limit and e.start >= limit - 3:  # a character cut by the limit
            text = head[: e.start].decode("utf-8", errors="strict")
        else:
            return "hex", head.hex()
    if any(ord(c) < 32 and c not in "\t\n\r" for c in text):
        return "hex", head.hex()
    return "utf-8", text


@dataclass(frozen=True, slots=True)
class MessageView:
    """One stored message with where it is."""

    broker: str
    msg: MessageExt
    body: bytes
    """The body as the producer sent it (inflated when the record is compressed)."""

    @classmethod
    def of(cls, broker: str, msg: MessageExt) -> MessageView:
        """The view of a decoded record of ``broker``."""
        body = msg.body
        if is_compressed(msg.sys_flag):
            try:
                body = decompress(body, msg.sys_flag, _MAX_INFLATED)
            except CompressionError:
                pass  # shown as stored
        return cls(broker, msg, body)

    @property
    def user_properties(self) -> dict[str, str]:
        """Properties a producer set (not RocketMQ's own: TAGS, KEYS, UNIQ_KEY, ...)."""
        system = {v for k, v in vars(PropertyKey).items() if k.isupper() and isinstance(v, str)}
        return {k: v for k, v in sorted(self.msg.properties.items()) if k not in system}

    def to_json(self, preview: int = BODY_PREVIEW_BYTES) -> dict[str, Any]:
        """See docs/admin.md §5 for the fields."""
        m = self.msg
        encoding, text = body_text(self.body, preview)
        return {
            "topic": m.topic,
            "brokerName": self.broker,
            "queueId": m.queue_id,
            "queueOffset": m.queue_offset,
            "commitLogOffset": m.commit_log_offset,
            "msgId": m.uniq_key,
            "offsetMsgId": m.offset_msg_id,
            "tags": m.tags,
            "keys": m.keys,
            "properties": dict(sorted(m.properties.items())),
            "userProperties": self.user_properties,
            "bornHost": f"{m.born_host[0]}:{m.born_host[1]}",
            "bornTimestamp": m.born_timestamp,
            "storeHost": f"{m.store_host[0]}:{m.store_host[1]}",
            "storeTimestamp": m.store_timestamp,
            "reconsumeTimes": m.reconsume_times,
            "sysFlag": m.sys_flag,
            "bodySize": len(self.body),
            "bodyEncoding": encoding,
            "body": text,
            "bodyTruncated": len(self.body) > preview,
        }

    def lines(self, preview: int = 512) -> list[str]:
        """The message as ``message show`` prints it."""
        m = self.msg
        encoding, text = body_text(self.body, preview)
        more = f" ... ({len(self.body)} bytes in all)" if len(self.body) > preview else ""
        return [
            f"topic            {m.topic}",
            f"queue            {self.broker} #{m.queue_id} offset {m.queue_offset}",
            f"msgId            {m.uniq_key or '-'}",
            f"offsetMsgId      {m.offset_msg_id}",
            f"tags             {m.tags or '-'}",
            f"keys             {' '.join(m.keys) or '-'}",
            f"properties       {self.user_properties or '-'}",
            f"born             {format_ms(m.born_timestamp)} from {m.born_host[0]}:{m.born_host[1]}",
            f"stored           {format_ms(m.store_timestamp)} on {m.store_host[0]}:{m.store_host[1]}",
            f"reconsumeTimes   {m.reconsume_times}",
            f"body ({encoding}, {len(self.body)} bytes): {text}{more}",
        ]


class TrackState(StrEnum):
    """Whether a group consumed a message (RocketMQ's TrackType names where they exist)."""

    CONSUMED = "CONSUMED"
    CONSUMED_BUT_FILTERED = "CONSUMED_BUT_FILTERED"
    """The group's offset passed the message, which its subscription does not match: it never saw it."""
    NOT_CONSUME_YET = "NOT_CONSUME_YET"
    CONSUME_BROADCASTING = "CONSUME_BROADCASTING"
    """A broadcasting group keeps its offsets in its clients: the brokers cannot tell."""
    UNKNOWN = "UNKNOWN"


@dataclass(frozen=True, slots=True)
class GroupTrack:
    """One group's verdict on one message."""

    group: str
    state: TrackState
    online: bool
    consumer_offset: int | None
    subscription: str | None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        """``group``, ``state``, ``online``, ``consumerOffset``, ``subscription``, ``error``."""
        return {"group": self.group, "state": self.state.value, "online": self.online,
                "consumerOffset": self.consumer_offset, "subscription": self.subscription,
                "error": self.error}  # fmt: skip


def _matches(msg: MessageExt, expression_type: str, expression: str) -> bool | None:
    """Whether a subscription selects the message (None: cannot tell)."""
    if expression_type.upper() in ("", "TAG"):
        try:
            return TagExpression.parse(expression).match_tag(msg.tags)
        except ValueError:
            return None
    if expression_type.upper() == "SQL92":
        try:
            return compile_selector(expression).evaluate(msg.properties) is True
        except SqlError:
            return None
    return None


def track(
    msg: MessageExt,
    consumer_offset: int | None,
    *,
    online: bool,
    message_model: str | None = None,
    subscription: tuple[str, str] | None = None,
) -> TrackState:
    """A group's verdict on ``msg`` from its committed offset of the message's queue (None: it has none) and,
    when online, its message model and ``(expressionType, expression)`` of the message's topic."""
    if message_model == "BROADCASTING":
        return TrackState.CONSUME_BROADCASTING
    if consumer_offset is None or consumer_offset <= msg.queue_offset:
        return TrackState.NOT_CONSUME_YET
    if subscription is not None and _matches(msg, *subscription) is False:
        return TrackState.CONSUMED_BUT_FILTERED
    return TrackState.CONSUMED
