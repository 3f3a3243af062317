"""Tag filtering: Java-compatible tag hash and subscription-expression parsing.

Follows RocketMQ 4.x ``FilterAPI.buildSubscriptionData`` (client and broker parse the same way),
``MessageExtBrokerInner.tagsString2tagsCode`` (the consume-queue tag code) and the broker/client
match rules (``ExpressionMessageFilter`` tag branch, ``PullAPIWrapper.processPullResult``).
Pure functions, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SUB_ALL", "TagExpression", "java_string_hash", "java_trim", "tag_code", "to_int32"]

SUB_ALL = "*"
"""The subscribe-all expression (``SubscriptionData.SUB_ALL``)."""

_SEPARATOR = "||"
# Java String.trim() removes every char <= U+0020 at both ends, and nothing else.
_JAVA_TRIM_CHARS = "".join(chr(c) for c in range(0x21))


def to_int32(value: int) -> int:
    """Wrap an integer to a signed 32-bit value, like a Java ``(int)`` cast."""
    value &= 0xFFFFFFFF
    return value - 0x100000000 if value & 0x80000000 else value


def java_string_hash(s: str) -> int:
    """Java ``String.hashCode()``: ``h = 31*h + unit`` over UTF-16 code units, signed int32."""
    h = 0
    if s.isascii():
        for c in s.encode("ascii"):
            h = (31 * h + c) & 0xFFFFFFFF
    else:
        data = s.encode("utf-16-be", "surrogatepass")
        for i in range(0, len(data), 2):
            h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


def tag_code(tag: str | None) -> int:
    """The consume-queue tag code of a ``TAGS`` value: its Java hash, or 0 for no/empty tag."""
    if not tag:
        return 0
    return java_string_hash(tag)


def java_trim(s: str) -> str:
    """Java ``String.trim()``: strip chars ``<= U+0020`` (all C0 controls and space) at both ends."""
    return s.strip(_JAVA_TRIM_CHARS)


def _java_split_separator(s: str) -> list[str]:
    """Java ``s.split("\\\\|\\\\|")`` (limit 0): leftmost ``||`` splits, trailing empty pieces dropped."""
    pieces = s.split(_SEPARATOR)
    while pieces and pieces[-1] == "":
        pieces.pop()
    return pieces


_PARSED_MAX = 4096


@dataclass(frozen=True, slots=True)
class TagExpression:
    """A parsed TAG subscription expression (``SubscriptionData`` tag fields).

    ``sub_string`` is ``"*"`` for subscribe-all, otherwise the original expression unchanged.
    """

    sub_all: bool
    tags: frozenset[str]
    codes: frozenset[int]
    sub_string: str

    @classmethod
    def parse(cls, expr: str | None) -> TagExpression:
        """Parse like Java ``FilterAPI.buildSubscriptionData``.

        ``None``, ``""`` and exactly ``"*"`` subscribe to all. Otherwise the string is split on
        ``||`` (Java semantics), each piece Java-trimmed, empty pieces skipped. An expression made
        only of separators raises ``ValueError("subString split error")``.
        """
        if expr is None or expr == "" or expr == SUB_ALL:
            return cls(True, frozenset(), frozenset(), SUB_ALL)
        parsed = _PARSED.get(expr)
        if parsed is None:  # a broker parses a group's expression on each of its pulls: once is enough
            if len(_PARSED) >= _PARSED_MAX:
                _PARSED.clear()
            parsed = _PARSED[expr] = cls._parse(expr)
        return parsed

    @classmethod
    def _parse(cls, expr: str) -> TagExpression:
        pieces = _java_split_separator(expr)
        if not pieces:
            raise ValueError("subString split error")
        tags: set[str] = set()
        for piece in pieces:
            trimmed = java_trim(piece)
            if trimmed:
                tags.add(trimmed)
        return cls(False, frozenset(tags), frozenset(java_string_hash(t) for t in tags), expr)

    def match_code(self, code: int) -> bool:
        """Broker-side match on a consume-queue tag code: subscribe-all, or ``(int) code`` in codes."""
        if self.sub_all:
            return True
        return to_int32(code) in self.codes

    def match_tag(self, tag: str | None) -> bool:
        """Client-side exact re-check of a message's ``TAGS`` value (removes hash collisions).

        Like Java, the check only applies when the tag set is non-empty: subscribe-all and
        expressions whose tag set is empty (e.g. ``"  "``) let every message through here
        (the broker already matched nothing for the latter).
        """
        if self.sub_all or not self.tags:
            return True
        return tag is not None and tag in self.tags


_PARSED: dict[str, TagExpression] = {}
"""Expressions parsed so far (immutable results; at most ``_PARSED_MAX``, then forgotten at once)."""
