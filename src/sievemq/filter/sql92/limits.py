"""The limits on a selector, in one place, with their reasons (docs/protocol/sql92.md §6).

RocketMQ's parser has no limits of its own beyond the JVM's stack: machine-generated selectors (rule engines,
UIs that build ``(... OR (... OR (...)))``) nest deeply and run long, and a user moving from RocketMQ must not
find a selector that used to work refused. So the limits sit far above anything RocketMQ users write, and they
exist only because a selector comes from any client and is compiled on the broker:

* :data:`MAX_LENGTH`: parsing and compiling are linear in the length, so a hostile selector costs at most about
  a second of broker time once per distinct text (compiled selectors are cached by text, and refusals too); a
  10,000-term ``OR`` chain fits.
* :data:`MAX_NESTING`: parentheses and unary operators while parsing. The parser needs no recursion (an explicit
  stack), only memory: a few KB per open level while parsing.
* :data:`MAX_DEPTH`: the height of the syntax tree. The compiler and the reference interpreter recurse once per
  level, and Python's recursion is bounded by ``sys.getrecursionlimit()``: :func:`recursion_headroom` raises that
  limit (never lowers it) to what ``MAX_DEPTH`` needs. On CPython 3.11 a call from Python code to Python code uses
  no C stack, so the deeper limit costs heap memory only (a few MB at the limit). The compiler never emits deeply
  nested Python source (it spills subtrees into functions).
* :data:`MAX_IN_LIST`: every value of an IN list is a string kept in a set.

The length is checked before anything, the nesting while parsing (before the parser goes one level deeper), the
tree's height after parsing and before compiling. Each refusal is a :class:`SqlError` with the position.
"""

from __future__ import annotations

import sys

__all__ = ["FRAMES_PER_LEVEL", "MAX_DEPTH", "MAX_IN_LIST", "MAX_LENGTH", "MAX_NESTING", "recursion_headroom"]

MAX_LENGTH = 256 * 1024
"""Longest accepted expression, in characters (RocketMQ: no limit). A 10,000-term chain of equalities fits; the
largest selector compiles in about two seconds at worst (``bench/bench_sql92.py`` prints compile times)."""
MAX_NESTING = 10_000
"""Deepest accepted nesting of parentheses and unary operators while parsing (RocketMQ: as deep as the JVM's stack
lets its parser go). The parser keeps its rules on an explicit stack: a level costs about 3 KB while parsing, never
recursion. A 10,000-term ``a OR (b OR (c OR ...))`` fits; parentheses leave no node in the tree."""
MAX_DEPTH = 2_000
"""Greatest accepted height of the syntax tree, which the compiler and the reference interpreter walk recursively.
A chain of ``AND`` or ``OR`` is one node however long, and so is ``a OR (b OR (c OR ...))``: nested operands of
the same kind are merged; ``NOT``/``-`` and chains of ``=`` add a level each."""
MAX_IN_LIST = 1000
"""Most values in one IN list (RocketMQ: no limit)."""

FRAMES_PER_LEVEL = 8
"""Python frames one level of the tree takes at most in the compiler and the reference interpreter."""
_BASE_FRAMES = 1000


def recursion_headroom() -> None:
    """Make sure Python's recursion limit lets the parser, compiler and reference interpreter reach MAX_DEPTH."""
    need = MAX_DEPTH * FRAMES_PER_LEVEL + _BASE_FRAMES
    if sys.getrecursionlimit() < need:
        sys.setrecursionlimit(need)
