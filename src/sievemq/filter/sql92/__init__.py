"""RocketMQ SQL92 property selectors: parser, compiler and reference interpreter (pure, no I/O).

A selector is a boolean expression over a message's properties (every value a string; ``TAGS``,
``KEYS`` and the other system properties are visible like user ones)::

    sel = compile_selector("region = 'eu' AND amount > 100 AND kind IN ('a', 'b')")
    sel.evaluate({"region": "eu", "amount": "250", "kind": "a"})   # True
    sel.properties_used                                            # {'region', 'amount', 'kind'}

Semantics are RocketMQ's, verified against its Java implementation (docs/protocol/sql92.md):

* keywords are case-insensitive, property names case-sensitive ASCII identifiers;
* literals: ``'strings'`` (``''`` for a quote), integers (32-bit when they fit, else 64-bit; an
  ``L`` suffix changes nothing), doubles (never zero: write ``0``, not ``0.0``), TRUE, FALSE, NULL;
* operators ``= <> > >= < <=``, ``[NOT] BETWEEN``, ``[NOT] IN`` (string lists), ``IS [NOT] NULL``,
  ``[NOT] CONTAINS/STARTSWITH/ENDSWITH``, ``AND OR NOT``; **NOT binds tighter than comparisons**
  (``NOT a = 'x'`` is ``(NOT a) = 'x'``; write ``NOT (a = 'x')``);
* three-valued logic with short-circuit; a property is converted by the constant it meets
  (``a > 5`` parses ``a`` with Java ``Integer.valueOf``, ``a > 5.0`` with ``Double.valueOf``); a
  conversion failure is an evaluation error, and an evaluation error means "not delivered".

Only TRUE delivers. :meth:`Selector.evaluate` never raises.

Extensions (they never change the meaning of an expression RocketMQ parses completely):

* ``x [NOT] LIKE 'pattern' [ESCAPE 'c']`` — ``%`` any run, ``_`` one character, whole-value and
  case-sensitive; JMS semantics: NULL when ``x`` is missing, FALSE when ``x`` is not a string,
  ``NOT LIKE`` is ``NOT (LIKE)``.
* ``EXISTS(name)`` — TRUE when the property is present, FALSE otherwise (never NULL).

``LIKE``, ``ESCAPE`` and ``EXISTS`` are still usable as property names.

Limits, checked before anything runs: :data:`MAX_LENGTH` characters, :data:`MAX_DEPTH` levels of
nesting, :data:`MAX_IN_LIST` values per IN list.

Differences from RocketMQ
-------------------------

Every deliberate difference is listed in :data:`DIFFERENCES_FROM_ROCKETMQ` (also appended below),
for docs/protocol/sql92.md to include.
"""

from __future__ import annotations

from sievemq.filter.sql92.ast import Expr, to_sql
from sievemq.filter.sql92.compiler import (
    CACHE_SIZE,
    Matcher,
    Selector,
    Verdict,
    clear_selector_cache,
    compile_selector,
)
from sievemq.filter.sql92.errors import SqlError, SqlEvaluationError
from sievemq.filter.sql92.limits import MAX_DEPTH, MAX_IN_LIST, MAX_LENGTH, MAX_NESTING
from sievemq.filter.sql92.parser import parse
from sievemq.filter.sql92.reference import reference_evaluate

__all__ = [
    "CACHE_SIZE",
    "DIFFERENCES_FROM_ROCKETMQ",
    "MAX_DEPTH",
    "MAX_IN_LIST",
    "MAX_LENGTH",
    "MAX_NESTING",
    "Expr",
    "Matcher",
    "Selector",
    "SqlError",
    "SqlEvaluationError",
    "Verdict",
    "clear_selector_cache",
    "compile_selector",
    "parse",
    "reference_evaluate",
    "to_sql",
]

DIFFERENCES_FROM_ROCKETMQ: list[str] = [
    "Text left over after a complete expression is an error. RocketMQ stops parsing at the first "
    "token that cannot continue the expression and silently ignores the rest, so it accepts "
    "`a = 007`, `a = 0x10`, `a = 1.5f`, `a = 1e`, `a = 0L`, `a = '1' )`, `a = '1' b #`, "
    "`a='1'ANDb='2'` (`ANDb` is one identifier) and `a = '1' -- comment` without a final line "
    "break, each running only its first part. sievemq rejects them (SUBSCRIPTION_PARSE_FAILED, 23) "
    "and names the first unused token.",
    "`x [NOT] LIKE 'pattern' [ESCAPE 'c']` is supported. RocketMQ has no LIKE: `a LIKE 'x%'` is "
    "accepted there only through the leftover rule, runs as the bare property `a` and never "
    "matches; in sievemq it is a real LIKE. (`a NOT LIKE 'x%'` is an error in RocketMQ.)",
    "`EXISTS(name)` is supported (TRUE when the property is present). In RocketMQ `EXISTS(a)` runs "
    "as the bare property `EXISTS` (leftover rule) and never matches.",
    f"Limits: at most {MAX_LENGTH:,} characters ({MAX_LENGTH // 1024} KiB: a 10,000-term chain fits), "
    f"{MAX_NESTING:,} levels of parentheses and unary operators, a syntax tree {MAX_DEPTH:,} levels high "
    "(`a OR (b OR (c ...))` is one level: nested operands of the same AND/OR are merged; NOT, unary minus and "
    "chains of `=` add a level each) and "
    f"{MAX_IN_LIST:,} values per IN list. RocketMQ has no limits beyond the JVM stack.",
    "Strings are sequences of Unicode code points, RocketMQ's are UTF-16 code units. The only "
    "visible effect is that CONTAINS/STARTSWITH/ENDSWITH with a search string holding an unpaired "
    "surrogate never matches in sievemq (such a string cannot travel in valid UTF-8 anyway).",
]
"""Every deliberate difference from RocketMQ's SQL92 dialect, one Markdown paragraph each."""

__doc__ = (__doc__ or "") + "\n" + "\n".join(f"* {entry}" for entry in DIFFERENCES_FROM_ROCKETMQ) + "\n"
