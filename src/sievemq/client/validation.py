"""Client-side checks before anything is sent (Java ``Validators`` plus property rules). Pure, no I/O."""

from __future__ import annotations

from collections.abc import Sequence

from sievemq.client.errors import MessageValidationError
from sievemq.client.message import Message
from sievemq.protocol.delay_levels import DEFAULT_LEVEL_COUNT
from sievemq.protocol.message import PropertyKey
from sievemq.protocol.names import (
    AUTO_CREATE_TOPIC_KEY,
    GROUP_MAX_LENGTH,
    MAX_TOPIC_LENGTH,
    NAME_RE,
    NOT_ALLOWED_SEND_TOPICS,
    is_retry_topic,
)
from sievemq.protocol.sizes import DEFAULT_MAX_MESSAGE_SIZE

MAX_MESSAGE_SIZE = DEFAULT_MAX_MESSAGE_SIZE
MAX_DELAY_LEVEL = DEFAULT_LEVEL_COUNT
RESERVED_PROPERTIES = frozenset(
    v for k, v in vars(PropertyKey).items() if k.isupper() and isinstance(v, str) and k != "KEY_SEPARATOR"
)


def validate_topic(topic: str, *, for_send: bool = True) -> None:
    """A legal topic name: ``^[%|a-zA-Z0-9_-]+$``, at most 127 bytes; system topics are not sendable."""
    if not isinstance(topic, str) or not topic.strip():
        raise MessageValidationError("the topic name is blank")
    if len(topic.encode()) > MAX_TOPIC_LENGTH:
        raise MessageValidationError(
            f"the topic name is {len(topic.encode())} bytes long, longer than the limit {MAX_TOPIC_LENGTH}"
        )
    if not NAME_RE.match(topic):
        raise MessageValidationError(
            f"the topic name {topic!r} contains illegal characters; allowed: letters, digits, '%', '|', '_', '-'"
        )
    if for_send:
        if topic == AUTO_CREATE_TOPIC_KEY:
            raise MessageValidationError(f"the topic {topic!r} is the auto-create template and cannot be sent to")
        if topic in NOT_ALLOWED_SEND_TOPICS:
            raise MessageValidationError(f"sending to the system topic {topic!r} is not allowed")


def validate_group(group: str) -> None:
    """A legal group name: same characters as topics, at most 255 characters."""
    if not isinstance(group, str) or not group.strip():
        raise MessageValidationError("the group name is blank")
    if len(group) > GROUP_MAX_LENGTH:
        raise MessageValidationError(f"the group name is longer than {GROUP_MAX_LENGTH} characters")
    if not NAME_RE.match(group):
        raise MessageValidationError(
            f"the group name {group!r} contains illegal characters; allowed: letters, digits, '%', '|', '_', '-'"
        )


def _check_text(what: str, value: str) -> None:
    if "\x01" in value or "\x02" in value:
        raise MessageValidationError(f"{what} {value!r} contains a reserved separator character (0x01 or 0x02)")


def validate_message(msg: Message, max_body: int = MAX_MESSAGE_SIZE, *, topic: bool = True) -> None:
    """Check topic (unless ``topic=False``: known good), body size, tags, keys, delay level and user properties."""
    if not isinstance(msg, Message):
        raise MessageValidationError(f"expected a sievemq.Message, got {type(msg).__name__}")
    if topic:
        validate_topic(msg.topic)
    if not isinstance(msg.body, bytes | bytearray | memoryview):
        raise MessageValidationError(f"the message body must be bytes, not {type(msg.body).__name__}")
    if len(msg.body) == 0:
        raise MessageValidationError("the message body is empty")
    if len(msg.body) > max_body:
        raise MessageValidationError(f"the message body is {len(msg.body)} bytes, larger than the limit {max_body}")
    if msg.tags is not None:
        _check_text("the tag", msg.tags)
        if "||" in msg.tags:
            raise MessageValidationError(f"the tag {msg.tags!r} contains '||', which separates tags in subscriptions")
    for key in msg.key_list():
        _check_text("the key", key)
    if not isinstance(msg.delay_level, int) or msg.delay_level < 0:
        raise MessageValidationError(f"the delay level must be 0 (none) or 1..{MAX_DELAY_LEVEL}, not {msg.delay_level}")
    for name, value in msg.properties.items():
        if not isinstance(name, str) or not isinstance(value, str):
            raise MessageValidationError(f"property {name!r}: names and values must be strings")
        if not name.strip() or not value.strip():
            raise MessageValidationError(f"property {name!r}: the name or value is blank")
        if name in RESERVED_PROPERTIES:
            raise MessageValidationError(f"the property name {name!r} is used by the system; choose another")
        _check_text("the property name", name)
        _check_text(f"the value of property {name!r}", value)


def validate_batch(msgs: Sequence[Message], max_size: int = MAX_MESSAGE_SIZE) -> None:
    """Every message valid, one topic, no delay, no retry topic, same ``wait_store``, total size within the limit."""
    if not msgs:
        raise MessageValidationError("a batch needs at least one message")
    first = msgs[0]
    total = 0
    for m in msgs:
        # a topic equal to the first's (already checked) is as good as it
        validate_message(m, max_size, topic=m is first or not isinstance(m, Message) or m.topic != first.topic)
        if m.topic != first.topic:
            raise MessageValidationError("every message of a batch must have the same topic")
        if m.delay_level > 0:
            raise MessageValidationError("batch messages cannot be delayed")
        if m.wait_store != first.wait_store:
            raise MessageValidationError("every message of a batch must have the same wait_store")
        total += len(m.body) + 20 + sum(len(k) + len(v) + 2 for k, v in m.properties.items())
    if is_retry_topic(first.topic):
        raise MessageValidationError("batch messages cannot be sent to a retry topic")
    if total > max_size:
        raise MessageValidationError(f"the batch is about {total} bytes, larger than the limit {max_size}")
