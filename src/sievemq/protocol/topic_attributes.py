"""Topic attributes, as RocketMQ 5 keeps them (docs/admin.md §11): ``message.type`` and the others, the form a request
changes them in (``+key=value,+key2=value2,-key3``) and the rules a change follows.

Pure: ``parse_change`` reads the request's ``attributes`` field, ``alter`` applies it to a topic's current attributes
(``create``: only additions; afterwards only changeable keys may change; ``-key`` removes a key that is set) and
raises ``TopicAttributeError`` naming the problem, as RocketMQ's ``AttributeUtil`` refuses the same requests. Keys
RocketMQ knows but sievemq does not implement (batch consume queues, compaction, a per-topic retention) are refused
rather than stored and ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

__all__ = ["ATTRIBUTES", "MESSAGE_TYPES", "TopicAttributeError", "alter", "check_stored", "parse_change"]

MESSAGE_TYPES: Final = ("UNSPECIFIED", "NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED")
MAX_LENGTH = 256
"""The longest ``attributes`` field read, and the longest key or value stored."""


class TopicAttributeError(ValueError):
    """A topic attribute change that is malformed or not allowed; the message names the key."""


@dataclass(frozen=True)
class Attribute:
    """One attribute RocketMQ defines: may it change after creation, the values RocketMQ allows, and the values
    sievemq implements (a subset)."""

    changeable: bool
    allowed: tuple[str, ...]
    implemented: tuple[str, ...]


ATTRIBUTES: Final[Mapping[str, Attribute]] = {
    "message.type": Attribute(True, MESSAGE_TYPES, MESSAGE_TYPES),
    "queue.type": Attribute(False, ("BatchCQ", "SimpleCQ"), ("SimpleCQ",)),
    "cleanup.policy": Attribute(False, ("DELETE", "COMPACTION"), ("DELETE",)),
    "reserve.time": Attribute(True, (), ()),
}
"""RocketMQ 5's topic attributes (``TopicAttributes.ALL``); ``reserve.time`` is a number there, not implemented here."""


def parse_change(text: str) -> dict[str, str]:
    """``+k=v,-k2`` -> ``{"+k": "v", "-k2": ""}``; TopicAttributeError for a malformed or repeated entry."""
    if not text:
        return {}
    if len(text) > MAX_LENGTH:
        raise TopicAttributeError(f"attributes longer than {MAX_LENGTH} characters")
    change: dict[str, str] = {}
    for kv in text.split(","):
        if "=" in kv:
            key, _, value = kv.partition("=")
            if not key.startswith("+") or "=" in value:
                raise TopicAttributeError(f"add/alter attribute format is wrong: {kv!r} (expected +key=value)")
        else:
            key, value = kv, ""
            if not key.startswith("-"):
                raise TopicAttributeError(f"delete attribute format is wrong: {kv!r} (expected -key)")
        if key in change:
            raise TopicAttributeError(f"key duplication: {key}")
        change[key] = value
    return change


def _check_value(key: str, value: str) -> None:
    attr = ATTRIBUTES[key]
    if value not in attr.allowed and attr.allowed:
        raise TopicAttributeError(f"value {value!r} of {key} is not one of {', '.join(attr.allowed)}")
    if value not in attr.implemented:
        raise TopicAttributeError(f"{key}={value} is not supported by sievemq (docs/admin.md §11)")


def alter(create: bool, current: Mapping[str, str], change: Mapping[str, str]) -> dict[str, str]:
    """The attributes after ``change`` (from ``parse_change``) on a topic that has ``current`` (``create``: the topic
    is new); TopicAttributeError when RocketMQ would refuse it, or sievemq does not implement a value."""
    result = dict(current)
    seen: set[str] = set()
    for raw, value in change.items():
        key = raw[1:]
        if not key or "+" in key or "-" in key:
            raise TopicAttributeError("kv string format wrong.")
        if key in seen:
            raise TopicAttributeError(f"alter duplication key. key: {key}")
        seen.add(key)
        attr = ATTRIBUTES.get(key)
        if attr is None:
            raise TopicAttributeError(f"unsupported key: {key} (known: {', '.join(ATTRIBUTES)})")
        if create:
            if not raw.startswith("+"):
                raise TopicAttributeError(f"only add attribute is supported while creating topic. key: {key}")
        elif not attr.changeable:
            raise TopicAttributeError(f"attempt to update an unchangeable attribute. key: {key}")
        if raw.startswith("+"):
            _check_value(key, value)
            result[key] = value
        else:
            if key not in current:
                raise TopicAttributeError(f"attempt to delete a nonexistent key: {key}")
            del result[key]
    return result


def check_stored(value: object) -> dict[str, str]:
    """Attributes read from a stored or received TopicConfig: a JSON object of short strings (ValueError if not)."""
    if value is None:
        return {}
    if not isinstance(value, dict) or len(value) > len(ATTRIBUTES):
        raise ValueError("attributes must be a JSON object of at most a few entries")
    for k, v in value.items():
        if not isinstance(k, str) or not isinstance(v, str) or len(k) > MAX_LENGTH or len(v) > MAX_LENGTH:
            raise ValueError("attributes must map short strings to short strings")
    return dict(value)
