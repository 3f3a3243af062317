"""``LIKE`` patterns (a sievemq extension): ``%`` matches any run of characters, ``_`` exactly one.

An optional one-character ``ESCAPE`` makes the character after it literal (``'100!%' ESCAPE '!'``
matches the text ``100%``). Matching is case-sensitive and covers the whole value. A pattern that
ends with the escape character is an error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, TypeAlias

__all__ = ["ANY", "ONE", "LikePart", "LikePattern", "LikePatternError"]

ANY: Literal["%"] = "%"
ONE: Literal["_"] = "_"

LikePart: TypeAlias = tuple[Literal["lit"], str] | tuple[Literal["%", "_"], None]


class LikePatternError(ValueError):
    """A malformed pattern; ``offset`` is the 0-based index of the problem inside the pattern."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.message = message
        self.offset = offset


@dataclass(frozen=True, slots=True)
class LikePattern:
    """A parsed pattern: literal runs, ``%`` (any run, consecutive ones merged) and ``_`` (one char)."""

    parts: tuple[LikePart, ...]

    @classmethod
    def parse(cls, pattern: str, escape: str | None = None) -> LikePattern:
        """Split ``pattern`` into parts; raises :class:`LikePatternError` for a dangling escape."""
        if escape is not None and len(escape) != 1:
            raise LikePatternError("ESCAPE must be exactly one character", 0)
        parts: list[LikePart] = []
        literal: list[str] = []

        def flush() -> None:
            if literal:
                parts.append(("lit", "".join(literal)))
                literal.clear()

        i = 0
        while i < len(pattern):
            c = pattern[i]
            if escape is not None and c == escape:
                if i + 1 >= len(pattern):
                    raise LikePatternError(f"the pattern ends with the escape character {escape!r}", i)
                literal.append(pattern[i + 1])
                i += 2
                continue
            if c in "%_":
                flush()
                if c == "%":
                    if not parts or parts[-1][0] != ANY:
                        parts.append((ANY, None))
                else:
                    parts.append((ONE, None))
            else:
                literal.append(c)
            i += 1
        flush()
        return cls(tuple(parts))

    def regex(self) -> re.Pattern[str]:
        """A compiled regular expression; use ``fullmatch``."""
        out: list[str] = []
        for kind, text in self.parts:
            if kind == "lit":
                assert text is not None
                out.append(re.escape(text))
            elif kind == ANY:
                out.append(".*")
            else:
                out.append(".")
        return re.compile("".join(out), re.DOTALL)

    def matches(self, value: str) -> bool:
        """Match ``value`` with a plain wildcard algorithm (no regex; the reference implementation)."""
        items: list[str | None] = []  # a literal character, ANY or ONE markers below
        kinds: list[str] = []
        for kind, text in self.parts:
            if kind == "lit":
                assert text is not None
                for ch in text:
                    items.append(ch)
                    kinds.append("lit")
            else:
                items.append(None)
                kinds.append(kind)
        p = v = 0
        star_p = -1
        star_v = 0
        while v < len(value):
            if p < len(items) and (kinds[p] == ONE or (kinds[p] == "lit" and items[p] == value[v])):
                p += 1
                v += 1
            elif p < len(items) and kinds[p] == ANY:
                star_p = p
                star_v = v
                p += 1
            elif star_p >= 0:
                p = star_p + 1
                star_v += 1
                v = star_v
            else:
                return False
        while p < len(items) and kinds[p] == ANY:
            p += 1
        return p == len(items)
