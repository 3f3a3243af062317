"""Message filters the store applies during a pull, built from a subscription."""

from __future__ import annotations

from sievemq.errors import RemotingError
from sievemq.filter.tags import TagExpression
from sievemq.protocol.heartbeat import Subscription
from sievemq.remoting.codes import ResponseCode


def _int32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v & 0x80000000 else v


class TagFilter:
    """Tag subscription: matched by hash in the consume queue; the client re-checks the exact string."""

    __slots__ = ("codes", "sub_all")

    def __init__(self, expr: TagExpression) -> None:
        self.sub_all = expr.sub_all
        self.codes = expr.codes

    def match_cq(self, tags_code: int, ext: object | None = None) -> bool:
        """True when the entry's tag code is subscribed."""
        return self.sub_all or _int32(tags_code) in self.codes

    def match_code(self, tags_code: int) -> bool:
        """Same as match_cq, for long polling."""
        return self.sub_all or _int32(tags_code) in self.codes

    def match_record(self, record: memoryview) -> bool:
        """Tag filters never need the record."""
        return True


def build_filter(sub: Subscription | None) -> TagFilter | None:
    """The store filter for a subscription; None passes everything (no subscription, class-filter mode)."""
    if sub is None or sub.class_filter_mode:
        return None
    if sub.is_tag:
        try:
            expr = TagExpression.parse(sub.sub_string)
        except ValueError as e:
            raise RemotingError(
                ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                f"cannot parse tag expression {sub.sub_string!r} of topic {sub.topic}: {e}",
            ) from None
        return None if expr.sub_all else TagFilter(expr)
    if sub.expression_type == "SQL92":
        raise RemotingError(
            ResponseCode.SYSTEM_ERROR,
            "The broker does not support consumer to filter message by SQL92 yet (sievemq: SQL92 is being built)",
        )
    raise RemotingError(
        ResponseCode.SUBSCRIPTION_PARSE_FAILED,
        f"unknown expression type {sub.expression_type!r} for topic {sub.topic}: use TAG or SQL92",
    )
