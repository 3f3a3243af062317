"""HeartbeatData and SubscriptionData (docs/protocol/requests.md §16), parsed leniently.

Clients differ: the C++ core sends enums as ordinals, ``subVersion`` as a string and omits empty sets; Java and
ali-ons send names. Tag codes are always recomputed from the tags, never taken from the client's ``codeSet``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sievemq.filter.sql92.limits import MAX_LENGTH as SQL_MAX_LENGTH
from sievemq.filter.tags import TagExpression
from sievemq.protocol.names import group_problem, topic_problem

CONSUME_TYPES = ("CONSUME_ACTIVELY", "CONSUME_PASSIVELY", "CONSUME_POP")
MESSAGE_MODELS = ("BROADCASTING", "CLUSTERING")
CONSUME_FROM = (
    "CONSUME_FROM_LAST_OFFSET",
    "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST",
    "CONSUME_FROM_MIN_OFFSET",
    "CONSUME_FROM_MAX_OFFSET",
    "CONSUME_FROM_FIRST_OFFSET",
    "CONSUME_FROM_TIMESTAMP",
)
_ALIASES = {"PULL": "CONSUME_ACTIVELY", "PUSH": "CONSUME_PASSIVELY"}
MAX_GROUPS = 1024
"""Producer or consumer groups one heartbeat may carry (RocketMQ sets no limit; a client has a handful)."""
MAX_SUBSCRIPTIONS = 4096
"""Subscriptions of one consumer group in a heartbeat."""
MAX_EXPRESSION = SQL_MAX_LENGTH
"""Characters of one subscription expression (the longest SQL92 selector the broker accepts)."""
_INT64 = (-(1 << 63), (1 << 63) - 1)


def _enum(value: Any, names: tuple[str, ...], default: str) -> str:
    if value is None:
        return default
    if isinstance(value, bool):
        return default
    if isinstance(value, int) or (isinstance(value, str) and value.isdigit()):
        i = int(value)
        return names[i] if 0 <= i < len(names) else default
    s = _ALIASES.get(str(value).upper(), str(value).upper())
    return s if s in names else default


def _int(value: Any, default: int = 0) -> int:
    """An integer from a number or a decimal string; ``default`` when it is neither or does not fit a ``long``."""
    try:
        n = int(value) if not isinstance(value, str) or len(value) <= 20 else default
    except (TypeError, ValueError, OverflowError):
        return default
    return n if _INT64[0] <= n <= _INT64[1] else default


@dataclass(slots=True)
class Subscription:
    """One topic subscription of a consumer."""

    topic: str
    sub_string: str = "*"
    expression_type: str = "TAG"
    sub_version: int = 0
    class_filter_mode: bool = False
    tags: frozenset[str] = frozenset()

    @property
    def is_tag(self) -> bool:
        """True for TAG (also null/empty type)."""
        return self.expression_type in ("", "TAG")

    def tag_expression(self) -> TagExpression:
        """The parsed tag expression (raises ValueError for a malformed one)."""
        return TagExpression.parse(self.sub_string)

    def expression_key(self) -> tuple[str, str]:
        """What the subscription selects, normalised: two subscriptions with equal keys select the same messages
        (``TagA || TagB`` equals ``TagB||TagA``; SQL compares the trimmed text)."""
        if self.class_filter_mode:
            return ("CLASS", self.sub_string)
        if self.is_tag:
            try:
                te = self.tag_expression()
            except ValueError:
                return ("TAG", self.sub_string)
            return ("TAG", "*" if te.sub_all else " || ".join(sorted(te.tags)))
        return (self.expression_type, self.sub_string.strip())

    def same_expression(self, other: Subscription) -> bool:
        """True when both subscribe with the same expression."""
        return self.expression_key() == other.expression_key()

    def describe(self) -> str:
        """The expression as a person reads it, with its type when not TAG."""
        if self.class_filter_mode:
            return f"function {self.sub_string}"
        return self.sub_string if self.is_tag else f"{self.expression_type} {self.sub_string}"

    def to_json(self) -> dict[str, Any]:
        """Java's SubscriptionData JSON."""
        tags: list[str] = []
        codes: list[int] = []
        if self.is_tag and not self.class_filter_mode:
            try:
                te = self.tag_expression()
                tags = sorted(te.tags)
                codes = sorted(te.codes)
            except ValueError:
                pass
        return {
            "classFilterMode": self.class_filter_mode,
            "codeSet": codes,
            "expressionType": self.expression_type or "TAG",
            "subString": self.sub_string,
            "subVersion": self.sub_version,
            "tagsSet": tags,
            "topic": self.topic,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Subscription:
        """Parse a SubscriptionData object from any client."""
        sub = d.get("subString")
        sub_string = "*" if sub is None else str(sub)
        tags = frozenset(str(t) for t in d.get("tagsSet") or [])
        return cls(
            topic=str(d.get("topic", "")),
            sub_string=sub_string,
            expression_type=str(d.get("expressionType") or "TAG"),
            sub_version=_int(d.get("subVersion"), 0),
            class_filter_mode=bool(d.get("classFilterMode", False)),
            tags=tags,
        )


@dataclass(slots=True)
class ConsumerData:
    """A consumer group's entry in a heartbeat."""

    group: str
    consume_type: str = "CONSUME_PASSIVELY"
    message_model: str = "CLUSTERING"
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET"
    subscriptions: list[Subscription] = field(default_factory=list)
    unit_mode: bool = False

    def to_json(self) -> dict[str, Any]:
        """Java's ConsumerData JSON."""
        return {
            "consumeFromWhere": self.consume_from_where,
            "consumeType": self.consume_type,
            "groupName": self.group,
            "messageModel": self.message_model,
            "subscriptionDataSet": [s.to_json() for s in self.subscriptions],
            "unitMode": self.unit_mode,
        }


@dataclass(slots=True)
class HeartbeatData:
    """A client's heartbeat: its id, producer groups and consumer groups with subscriptions."""

    client_id: str
    producer_groups: list[str] = field(default_factory=list)
    consumers: list[ConsumerData] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """Java's HeartbeatData JSON."""
        return {
            "clientID": self.client_id,
            "consumerDataSet": [c.to_json() for c in self.consumers],
            "producerDataSet": [{"groupName": g} for g in self.producer_groups],
        }

    def problem(self) -> str | None:
        """Why a broker must refuse this heartbeat (illegal names, too many groups or subscriptions), or None."""
        if len(self.producer_groups) > MAX_GROUPS or len(self.consumers) > MAX_GROUPS:
            return f"a heartbeat carries at most {MAX_GROUPS} producer and {MAX_GROUPS} consumer groups"
        for g in self.producer_groups:
            if g and (p := group_problem(g, "producer group")):
                return p
        for c in self.consumers:
            if c.group and (p := group_problem(c.group, "consumer group")):
                return p
            if len(c.subscriptions) > MAX_SUBSCRIPTIONS:
                return f"consumer group {c.group} has more than {MAX_SUBSCRIPTIONS} subscriptions"
            for sub in c.subscriptions:
                if p := topic_problem(sub.topic):
                    return f"{p} (a subscription of consumer group {c.group})"
                if len(sub.sub_string) > MAX_EXPRESSION:
                    return f"the expression for topic {sub.topic} is longer than {MAX_EXPRESSION} characters"
        return None

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> HeartbeatData:
        """Parse a heartbeat body from Java, the C++ core or ali-ons."""
        consumers = []
        for c in d.get("consumerDataSet") or []:
            consumers.append(
                ConsumerData(
                    group=str(c.get("groupName", "")),
                    consume_type=_enum(c.get("consumeType"), CONSUME_TYPES, "CONSUME_PASSIVELY"),
                    message_model=_enum(c.get("messageModel"), MESSAGE_MODELS, "CLUSTERING"),
                    consume_from_where=_enum(c.get("consumeFromWhere"), CONSUME_FROM, "CONSUME_FROM_LAST_OFFSET"),
                    subscriptions=[Subscription.from_json(s) for s in c.get("subscriptionDataSet") or []],
                    unit_mode=bool(c.get("unitMode", False)),
                )
            )
        return cls(
            client_id=str(d.get("clientID", "")),
            producer_groups=[str(p.get("groupName", "")) for p in d.get("producerDataSet") or []],
            consumers=consumers,
        )
