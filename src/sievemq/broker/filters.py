"""Message filters the store applies during a pull, built from a subscription.

``TagFilter`` matches the tag hash in the consume queue (the client re-checks the exact string). ``SqlFilter``
tests the group's Bloom bits in the consume-queue extension first (a "no" costs no commit-log read), then
evaluates the selector on the stored properties. Both count what they let through and what they drop.
"""

from __future__ import annotations

from typing import Any

from sievemq.broker.filter_manager import ConsumerFilterManager, FilterCounts
from sievemq.errors import RemotingError
from sievemq.filter.sql92 import Selector, SqlError
from sievemq.filter.tags import TagExpression
from sievemq.protocol.heartbeat import Subscription
from sievemq.protocol.message import read_properties
from sievemq.protocol.reasons import Reason
from sievemq.remoting.codes import ResponseCode
from sievemq.store import BitmapProbe, CqExtUnit


def _int32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v & 0x80000000 else v


class TagFilter:
    """Tag subscription: matched by hash in the consume queue; the client re-checks the exact string."""

    __slots__ = ("codes", "counts", "sub_all")
    ignores_cq = False

    def __init__(self, expr: TagExpression, counts: FilterCounts | None = None) -> None:
        self.sub_all = expr.sub_all
        self.codes = expr.codes
        self.counts = counts or FilterCounts()

    def bitmap_probe(self) -> BitmapProbe | None:
        """Tags have no bitmap test."""
        return None

    def on_probe_rejected(self, n: int) -> None:
        """Never called (no probe)."""

    def match_cq(self, tags_code: int, ext: CqExtUnit | None = None) -> bool:
        """True when the entry's tag code is subscribed."""
        if self.sub_all or _int32(tags_code) in self.codes:
            return True
        self.counts.filtered_by_tag += 1
        return False

    def match_code(self, tags_code: int, props: Any = None) -> bool:
        """Long polling: would a new entry with this tag code match?"""
        return self.sub_all or _int32(tags_code) in self.codes

    def match_record(self, record: memoryview) -> bool:
        """Tag filters never need the record."""
        self.counts.tag_matched += 1
        return True


class SqlFilter:
    """SQL92 subscription: Bloom bits first (when the group's bits exist), then evaluation of the properties."""

    __slots__ = ("bitmap_passed", "counts", "ignores_cq", "mask", "positions", "selector", "trust_after", "verdict")

    def __init__(
        self,
        selector: Selector,
        counts: FilterCounts,
        positions: list[int] | None,
        trust_after: int,
        mask: bytes = b"",
    ) -> None:
        self.selector = selector
        self.verdict = selector.verdict
        self.counts = counts
        self.positions = positions
        self.mask = mask
        self.trust_after = trust_after  # bitmaps are trusted only for messages stored after registration
        self.ignores_cq = not positions  # without the group's Bloom bits there is nothing to test up front
        self.bitmap_passed = False
        """The entry ``match_cq`` saw last passed the group's bits of a trusted bitmap (its record is evaluated
        next: if the evaluation says no, the bitmap was a false positive)."""

    def bitmap_probe(self) -> BitmapProbe | None:
        """The group's Bloom bits, for the store to test a whole scan window at once."""
        if not self.positions or not self.mask:
            return None
        return BitmapProbe(self.mask, self.trust_after)

    def on_probe_rejected(self, n: int) -> None:
        """The store skipped ``n`` entries by the probe."""
        self.counts.filtered_by_bitmap += n

    def match_cq(self, tags_code: int, ext: CqExtUnit | None = None) -> bool:
        """False only when the message's bitmap proves the group's filter did not match it.

        A bitmap is trusted only when stored after the filter was registered and exactly as long as the broker's
        Bloom filter makes them (one written under other Bloom settings would be read at the wrong bits).
        """
        self.bitmap_passed = False
        positions = self.positions
        if positions is None or ext is None:
            return True
        bitmap = ext.bitmap
        if not bitmap or ext.store_time <= self.trust_after or len(bitmap) != len(self.mask):
            return True
        for p in positions:
            if not bitmap[p >> 3] & (1 << (p & 7)):
                self.counts.filtered_by_bitmap += 1
                return False
        self.bitmap_passed = True
        return True

    def match_code(self, tags_code: int, props: Any = None) -> bool:
        """Long polling: does a newly dispatched message match?"""
        return props is None or self.selector.evaluate(props)

    def match_record(self, record: memoryview) -> bool:
        """Evaluate the selector on the stored message's properties."""
        bitmap_passed, self.bitmap_passed = self.bitmap_passed, False
        try:
            props = read_properties(record)
        except ValueError:
            self.counts.evaluation_errors += 1
            return False
        verdict = self.verdict(props)
        if verdict:
            self.counts.sql_matched += 1
            return True
        if verdict is None:  # the evaluation raised (RocketMQ: "Message Filter error"): not delivered, counted apart
            self.counts.evaluation_errors += 1
        else:
            self.counts.filtered_by_evaluation += 1
            if bitmap_passed:  # the group's Bloom bits said "maybe", the evaluation "no"
                self.counts.bitmap_false_positives += 1
        return False


MessageFilter = TagFilter | SqlFilter


def build_filter(
    sub: Subscription | None,
    group: str,
    filters: ConsumerFilterManager,
    property_filter_enabled: bool = True,
) -> MessageFilter | None:
    """The store filter for a group's subscription; None passes everything (``*``, class-filter mode)."""
    if sub is None or sub.class_filter_mode:
        return None
    counts = filters.counts_for(group, sub.topic)
    if sub.is_tag:
        try:
            expr = TagExpression.parse(sub.sub_string)
        except ValueError as e:
            raise RemotingError(
                ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                f"cannot parse tag expression {sub.sub_string!r} of topic {sub.topic}: {e}",
            ) from None
        return None if expr.sub_all else TagFilter(expr, counts)
    if sub.expression_type == "SQL92":
        if not property_filter_enabled:
            raise RemotingError(
                ResponseCode.SYSTEM_ERROR,
                "The broker does not support consumer to filter message by SQL92",
                Reason.SQL92_DISABLED,
            )
        entry = filters.get(group, sub.topic)
        if entry is not None and entry.expression.strip() == sub.sub_string.strip():
            return SqlFilter(entry.selector, counts, entry.bit_positions, entry.born_time, entry.mask)
        if not sub.sub_string.strip():
            raise RemotingError(ResponseCode.SUBSCRIPTION_PARSE_FAILED, f"empty SQL92 expression for topic {sub.topic}")
        try:
            selector = filters.compile(sub.sub_string)
        except SqlError as e:
            raise RemotingError(
                ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                f"SQL92 expression of group {group}, topic {sub.topic} does not compile {e.with_caret()}",
            ) from None
        return SqlFilter(selector, counts, None, 1 << 62)
    raise RemotingError(
        ResponseCode.SUBSCRIPTION_PARSE_FAILED,
        f"unknown expression type {sub.expression_type!r} for topic {sub.topic}: use TAG or SQL92",
    )
