"""Why a consumer group gets, or does not get, one stored message (docs/traces.md §4): the verdict of the group's
subscription on the message, with the stage that decided and the reason in words. Pure.

The stages are the broker's own (``broker/filters.py``): a tag subscription matches the tag's hash in the consume
queue and the client re-checks the exact tag; a SQL92 subscription first tests the group's Bloom bits in the
message's bitmap (when the bitmap is trusted: stored after the group's filter was registered, of the broker's
Bloom length), then evaluates the properties (only TRUE delivers: FALSE, NULL and evaluation errors do not); a
class-filter subscription (a filter function) is decided on the filter servers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from sievemq.filter.sql92 import SqlError, compile_selector, parse, reference_evaluate
from sievemq.filter.tags import TagExpression, tag_code, to_int32
from sievemq.protocol.heartbeat import Subscription

__all__ = ["BitmapView", "Stage", "Verdict", "Word", "judge"]


class Word(StrEnum):
    """A verdict in one word."""

    DELIVERED = "DELIVERED"
    """The broker hands the message to the group (and its client keeps it)."""
    FILTERED = "FILTERED"
    """The group's subscription excludes the message: the group never gets it."""
    UNKNOWN = "UNKNOWN"
    """The broker cannot tell (the group's subscription is unknown, or a filter function decides)."""


class Stage(StrEnum):
    """What decided."""

    SUBSCRIBE_ALL = "subscribe-all"
    TAG_HASH = "tag-hash"
    """The broker's consume-queue test of the tag's hash."""
    TAG_EXACT = "tag-exact"
    """The client's exact re-check of the tag (after a hash collision)."""
    BITMAP = "bitmap"
    """The group's Bloom bits in the message's bitmap (no need to read the message)."""
    EVALUATION = "evaluation"
    """The SQL92 expression evaluated on the message's properties."""
    FUNCTION = "function"
    """A filter function, on the filter servers."""
    NONE = "none"
    """Nothing to decide with."""


@dataclass(frozen=True, slots=True)
class BitmapView:
    """The group's side of the Bloom test: its bit positions, the message's bitmap and whether it is trusted."""

    positions: Sequence[int]
    bitmap: bytes
    trusted: bool
    why_untrusted: str = ""

    def hit(self) -> bool:
        """Every bit of the group is set in the bitmap."""
        bm = self.bitmap
        return all(p >> 3 < len(bm) and bm[p >> 3] & (1 << (p & 7)) for p in self.positions)


@dataclass(frozen=True, slots=True)
class Verdict:
    """A group's verdict on a message."""

    word: Word
    stage: Stage
    reason: str
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """``verdict``, ``stage``, ``reason`` and the stage's ``details``."""
        return {"verdict": self.word.value, "stage": self.stage.value, "reason": self.reason, "details": self.details}


def _tags(sub: Subscription, tags: str | None, code: int) -> Verdict:
    try:
        expr = TagExpression.parse(sub.sub_string)
    except ValueError as e:
        return Verdict(Word.FILTERED, Stage.TAG_HASH, f"the tag expression {sub.sub_string!r} does not parse: {e}")
    if expr.sub_all:
        return Verdict(Word.DELIVERED, Stage.SUBSCRIBE_ALL, "the group subscribes every tag (*)")
    wanted = sorted(expr.tags)
    details: dict[str, Any] = {"tag": tags, "tagsCode": to_int32(code), "subscribedTags": wanted,
                               "subscribedCodes": sorted(expr.codes)}  # fmt: skip
    shown = " || ".join(wanted)
    if not expr.match_code(code):
        what = f"the message's tag {tags!r}" if tags else "the message has no tag, so it"
        return Verdict(Word.FILTERED, Stage.TAG_HASH,
                       f"{what} is not in the group's tag set {{{shown}}} (its hash code {to_int32(code)} is not "
                       "among the set's: the broker skips it in the consume queue)", details)  # fmt: skip
    if not expr.match_tag(tags):
        return Verdict(Word.FILTERED, Stage.TAG_EXACT,
                       f"the message's tag {tags!r} has the hash code of a subscribed tag but is not one of "
                       f"{{{shown}}}: the broker delivers it, the client drops it", details)  # fmt: skip
    return Verdict(Word.DELIVERED, Stage.TAG_HASH, f"the message's tag {tags!r} is in {{{shown}}}", details)


def _sql(sub: Subscription, props: Mapping[str, str], bitmap: BitmapView | None, sql_enabled: bool) -> Verdict:
    expression = sub.sub_string
    if not sql_enabled:
        return Verdict(Word.FILTERED, Stage.NONE, "the broker has SQL92 filtering off (enablePropertyFilter = "
                       "false): the group's pulls are refused")  # fmt: skip
    try:
        selector = compile_selector(expression)
        tree = parse(expression)
    except SqlError as e:
        return Verdict(Word.FILTERED, Stage.EVALUATION, f"the SQL92 expression does not compile: {e}")
    used = sorted(selector.properties_used)
    missing = [p for p in used if p not in props]
    details: dict[str, Any] = {
        "expression": expression,
        "propertiesUsed": used,
        "missingProperties": missing,
        "properties": {p: props[p] for p in used if p in props},
    }
    try:
        value = reference_evaluate(tree, props, strict=True)
        result = "TRUE" if value is True else "FALSE" if value is False else "NULL"
        error = ""
    except Exception as e:  # an evaluation error (a number compared with text...): not delivered
        result, error = "ERROR", str(e)
    details["result"] = result
    if bitmap is not None:
        hit = bitmap.hit()
        details["bitmap"] = {"trusted": bitmap.trusted, "hit": hit, "bitPositions": list(bitmap.positions)}
        if bitmap.trusted and not hit:
            why = f"the group's Bloom bits are not all set in the message's bitmap (bits {list(bitmap.positions)}):"
            why += " the broker skipped it without reading it"
            return Verdict(Word.FILTERED, Stage.BITMAP, f"{why}; evaluated now: {result}" + _sql_why(result, missing,
                           error), details)  # fmt: skip
        if not bitmap.trusted:
            details["bitmap"]["whyNotUsed"] = bitmap.why_untrusted
    if result == "TRUE":
        return Verdict(Word.DELIVERED, Stage.EVALUATION, "the expression is TRUE for the message", details)
    return Verdict(Word.FILTERED, Stage.EVALUATION, f"the expression is {result}" + _sql_why(result, missing, error),
                   details)  # fmt: skip


def _sql_why(result: str, missing: list[str], error: str) -> str:
    if result == "NULL":
        if missing:
            return f" (the message has no property {', '.join(repr(m) for m in missing)})"
        return " (a comparison with NULL)"
    if result == "ERROR":
        return f" (evaluation error: {error})"
    if result == "FALSE" and missing:
        return f" (the message has no property {', '.join(repr(m) for m in missing)})"
    return ""


def judge(
    sub: Subscription | None,
    tags: str | None,
    properties: Mapping[str, str],
    *,
    code: int | None = None,
    bitmap: BitmapView | None = None,
    sql_enabled: bool = True,
    function_counts: Mapping[str, int] | None = None,
) -> Verdict:
    """The verdict of ``sub`` on a message with ``tags`` and ``properties``; ``code`` is the tag code of its
    consume-queue entry (the tag's hash when None), ``bitmap`` the group's Bloom test when the message has one;
    ``function_counts``: what the group's filter function decided so far (its filter servers' counts)."""
    if sub is None:
        return Verdict(Word.UNKNOWN, Stage.NONE, "the group has no live client and no stored filter on this broker: "
                       "its subscription is unknown")  # fmt: skip
    if sub.class_filter_mode:
        counts = dict(function_counts or {})
        more = (f"; so far it matched {counts.get('matched', 0)} and filtered out {counts.get('filteredOut', 0)} "
                "messages") if counts else ""  # fmt: skip
        return Verdict(Word.UNKNOWN, Stage.FUNCTION, f"the filter function {sub.sub_string!r} decides, on the "
                       f"filter servers{more}", {"function": sub.sub_string, "counts": counts})  # fmt: skip
    if sub.is_tag:
        return _tags(sub, tags, tag_code(tags) if code is None else code)
    if sub.expression_type.upper() == "SQL92":
        return _sql(sub, properties, bitmap, sql_enabled)
    return Verdict(Word.FILTERED, Stage.NONE, f"unknown expression type {sub.expression_type!r}")
