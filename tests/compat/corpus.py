"""A seeded corpus for the filtering comparison: messages with tags and properties, SQL92 selectors, tag expressions.

The selectors are written in the dialect RocketMQ and sievemq share (docs/protocol/sql92.md): every text is a whole
expression, so RocketMQ's habit of ignoring leftover text (§4) never comes into play, and neither LIKE nor EXISTS
(sievemq's extensions, §11) appears. Some selectors break a compile-time rule on purpose (a string where a number
must stand, ``NULL`` in an equality, a zero float, reversed BETWEEN bounds...): both brokers must refuse those alike.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

NAMES = ("a", "b", "c", "TAGS", "KEYS", "z")
"""Property names selectors use: user properties ``a b c``, the tags and keys the broker stores as properties, and
``z``, which no message has."""

VALUES = (
    "0", "1", "-1", "5", "+5", "007", "5.0", "5.5", " 5", "1e3", "2147483647", "2147483648", "-2147483649",
    "9223372036854775807", "9223372036854775808", "NaN", "Infinity", "-Infinity", "-0.0", "true", "TRUE", "false",
    "yes", "x", "abc", "xa", "ab", "a%b", "a_b", "it's", "\uff11", "\u00e9t\u00e9", "x y",
)  # fmt: skip
"""Property values: numbers in every spelling Java parses (or not), booleans, text, non-ASCII."""

TAGS = ("TagA", "TagB", "tagA", "Tag C", "x")
"""Tags of the messages (one message has at most one tag, as in RocketMQ); ``None`` also occurs."""

INTS = ("0", "1", "5", "7", "2147483647", "2147483648", "9007199254740993", "9223372036854775807", "5L")
FLOATS = ("0.5", "1.5", "5.0", "5.", ".5", "1e3", "1E-3", "2147483648.0", "1e300")
STRINGS = (
    "'0'", "'1'", "'5'", "'5.0'", "'x'", "'abc'", "'true'", "'TagA'", "'it''s'", "'a%b'", "''", "'\u00e9t\u00e9'",
)  # fmt: skip
SEARCH = ("'a'", "'x'", "'b'", "'1'", "'%'", "'ab'", "'5'", "'Tag'", "''")
INVALID = (
    "a > 'x'", "a = NULL", "NULL = a", "TRUE = 1", "a > 0.0", "a > TRUE", "1 < a < 10", "a BETWEEN 5 AND 1",
    "'x' IN ('x')", "a IN ()", "a IN (1)", "a IN ('x',)", "5", "'x'", "a CONTAINS b", "a >", "AND a", "a = 1e400",
    "a = 9223372036854775808", "(a > 5) > 1", "NOT a > 5 > 1", "a = \"x\"", "", "   ",
)  # fmt: skip
"""Selectors both brokers must refuse at CHECK_CLIENT_CONFIG."""


@dataclass(frozen=True)
class CorpusMessage:
    """One message of the corpus: its body is its index (``m17``), which both brokers return unchanged."""

    body: str
    tags: str | None
    keys: str | None
    properties: dict[str, str] = field(default_factory=dict)


def messages(count: int, seed: int) -> list[CorpusMessage]:
    """``count`` messages with random tags, keys and up to three of ``a b c`` set to values from ``VALUES``."""
    rnd = random.Random(seed)
    out = []
    for i in range(count):
        names = rnd.sample(("a", "b", "c"), rnd.randint(0, 3))
        props = {n: rnd.choice(VALUES) for n in names}
        tags = rnd.choice((None, *TAGS))
        keys = rnd.choice((None, "k1", "k2 k3", "1"))
        out.append(CorpusMessage(f"m{i}", tags, keys, props))
    return out


class _Gen:
    """A recursive random writer of selector text (valid in the shared dialect, by construction)."""

    def __init__(self, rnd: random.Random) -> None:
        self.r = rnd

    def name(self) -> str:
        return self.r.choice(NAMES)

    def number(self) -> str:
        kind = self.r.random()
        if kind < 0.55:
            return self.r.choice(INTS)
        if kind < 0.85:
            return self.r.choice(FLOATS)
        return "-" + self.r.choice(INTS + FLOATS)

    def ordered(self) -> str:
        """An operand of ``< <= > >=`` and BETWEEN: a number or a property."""
        return self.name() if self.r.random() < 0.4 else self.number()

    def any_operand(self) -> str:
        """An operand of ``=`` / ``<>`` (no NULL; a boolean literal only on the right)."""
        return self.r.choice((self.name(), self.number(), self.r.choice(STRINGS), self.r.choice(("TRUE", "FALSE"))))

    def leaf(self) -> str:
        r = self.r
        p = self.name()
        choice = r.randrange(12)
        if choice == 0:
            return f"{p} {r.choice(('=', '<>'))} {self.any_operand()}"
        if choice == 1:
            return f"{self.any_operand() if r.random() < 0.3 else p} = {r.choice(STRINGS)}"
        if choice == 2:
            return f"{self.ordered()} {r.choice(('<', '<=', '>', '>='))} {self.ordered()}"
        if choice == 3:
            lo, hi = sorted((self.number_value(), self.number_value()), key=float)
            neg = r.choice(("", "NOT "))
            return f"{p} {neg}BETWEEN {lo} AND {hi}"
        if choice == 4:
            items = ", ".join(r.choice(STRINGS) for _ in range(r.randint(1, 3)))
            return f"{p} {r.choice(('', 'NOT '))}IN ({items})"
        if choice == 5:
            return f"{self.any_operand() if r.random() < 0.2 else p} IS {r.choice(('', 'NOT '))}NULL"
        if choice == 6:
            op = r.choice(("CONTAINS", "STARTSWITH", "ENDSWITH"))
            return f"{p} {r.choice(('', 'NOT '))}{op} {r.choice(SEARCH)}"
        if choice == 7:
            return p
        if choice == 8:
            return r.choice(("TRUE", "FALSE", "NULL"))
        if choice == 9:
            return f"{p} = {self.name()}"
        if choice == 10:
            truth = r.choice(("TRUE", "FALSE"))
            return f"{truth} = {p}" if r.random() < 0.5 else f"{p} = {truth}"
        return f"-{p} {r.choice(('<', '>', '=', '<>'))} {self.number()}"

    def number_value(self) -> str:
        """A non-negative literal for BETWEEN bounds (sorted numerically by the caller)."""
        return self.r.choice(("0", "1", "5", "7", "0.5", "5.5", "100", "2147483648"))

    def condition(self, depth: int) -> str:
        r = self.r
        if depth <= 0 or r.random() < 0.35:
            return self.leaf()
        kind = r.randrange(5)
        if kind == 0:
            inner = self.condition(depth - 1)
            return f"NOT ({inner})" if r.random() < 0.7 else f"NOT {inner}"  # bare: precedence (§3)
        if kind == 1:
            return f"({self.condition(depth - 1)})"
        op = r.choice(("AND", "OR"))
        parts = [self.condition(depth - 1) for _ in range(r.randint(2, 3))]
        if r.random() < 0.5:
            parts = [f"({p})" for p in parts]
        return f" {op} ".join(parts)


def sql_selectors(count: int, seed: int) -> list[str]:
    """``count`` distinct selector texts: mostly valid ones of growing depth, plus ``INVALID``."""
    gen = _Gen(random.Random(seed))
    seen: dict[str, None] = dict.fromkeys(INVALID)
    while len(seen) < count:
        text = gen.condition(gen.r.randint(0, 4))
        if gen.r.random() < 0.05:
            text = text.lower()
        seen.setdefault(text, None)
    return list(seen)


TAG_EXPRESSIONS = (
    "*", "", " ", "TagA", "TagB", "tagA", "TagA || TagB", "TagA||TagB", " TagA || ", "||", " || ", "TagA || *",
    "* || TagA", "Tag C", "Tag C || x", "x", "TagA || TagA", "TagZ", "TagA|TagB", "TagA ||| TagB", "TagA||||TagB",
    "TagA&&TagB", "tagA || TAGA", "TagA,TagB", " * ",
)  # fmt: skip
"""Tag expressions, odd ones included (RocketMQ splits on ``||`` and trims each part)."""
