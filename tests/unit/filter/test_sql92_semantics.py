"""Evaluation semantics (docs/protocol/sql92.md §8-§10) and the checklist of surprises (§14).

Each case is checked on the reference interpreter, the compiled three-valued function and the
compiled verdict (``Selector.evaluate``), see ``helpers.check``. ``ERROR`` means RocketMQ's
evaluator throws: the message is not delivered.
"""

from __future__ import annotations

import pytest

from sievemq.filter.sql92 import compile_selector
from tests.unit.filter.helpers import ERROR, Outcome, check, rejects

T, F, N = True, False, None
Props = dict[str, str]


def cases(*rows: tuple[str, Props, Outcome]) -> pytest.MarkDecorator:
    return pytest.mark.parametrize(("expr", "props", "expected"), rows, ids=[f"{r[0]} | {r[1]}" for r in rows])


# -- logic: three values, short-circuit, exceptions not contained --------------------------------


@cases(
    ("b = '1' OR a > 5", {"a": "x", "b": "1"}, T),  # short-circuit: a > 5 never runs
    ("a > 5 OR b = '1'", {"a": "x", "b": "1"}, ERROR),  # exceptions are not contained
    ("NOT (a > 5)", {"a": "x"}, ERROR),
    ("b = '2' AND a > 5", {"a": "x", "b": "1"}, F),
    ("a > 5 AND b = '2'", {"a": "x", "b": "1"}, ERROR),
    ("c = '1' AND a > 5", {"a": "x"}, ERROR),  # NULL on the left still evaluates the right
    ("c = '1' OR a > 5", {"a": "x"}, ERROR),
    ("c = '1' OR b = '2'", {"b": "1"}, N),
    ("c = '1' OR b = '2'", {"b": "2"}, T),
    ("c = '1' AND b = '1'", {"b": "1"}, N),
    ("c = '1' AND b = '1'", {"b": "2"}, F),
    ("b = '1' AND c = '1'", {"b": "2"}, F),
    ("NOT (c = '1')", {}, N),
    ("NOT (b = '1')", {"b": "2"}, T),
    ("TRUE", {}, T),
    ("FALSE", {}, F),
    ("NULL", {}, N),
    ("NOT NULL", {}, N),
    ("TRUE AND NULL", {}, N),
    ("FALSE AND NULL", {}, F),
    ("NULL AND FALSE", {}, F),
    ("TRUE OR NULL", {}, T),
    ("NULL OR TRUE", {}, T),
    ("NULL OR FALSE", {}, N),
    ("FALSE OR FALSE", {}, F),
    ("a = '1' AND b = '2' AND c = '3'", {"a": "1", "b": "2", "c": "3"}, T),
    ("a = '1' AND b = '2' AND c = '3'", {"a": "1", "c": "3"}, N),
    ("a = '1' AND b = '2' AND c > 3", {"a": "1", "c": "x"}, ERROR),
    ("a = '1' OR b = '2' OR c > 3", {"c": "x"}, ERROR),
    ("a = '1' OR b = '2' OR c > 3", {"b": "2", "c": "x"}, T),
    ("(a = '1' AND b > 1) OR c = '3'", {"a": "2", "b": "x", "c": "3"}, T),
    ("(a = '1' AND b > 1) OR c = '3'", {"a": "1", "b": "x", "c": "3"}, ERROR),
    ("(a = '1' AND b > 1) OR c = '3'", {"b": "x", "c": "3"}, ERROR),  # a missing: b > 1 still runs
)
def test_logic(expr: str, props: Props, expected: Outcome) -> None:
    check(expr, props, expected)


# -- comparisons: the literal decides how the property is parsed --------------------------------


@cases(
    ("a > 5", {"a": "6"}, T),
    ("a > 5", {"a": "5"}, F),
    ("a > 5", {"a": "+6"}, T),
    ("a > 5", {"a": "-6"}, F),
    ("a > 5", {"a": "\uff10\uff16"}, T),  # fullwidth digits are decimal digits to Integer.valueOf
    ("a > 5", {"a": "\u0661\u0660"}, T),
    ("a > 5", {"a": "5.0"}, ERROR),
    ("a > 5", {"a": " 6"}, ERROR),
    ("a > 5", {"a": "3000000000"}, ERROR),
    ("a > 5", {"a": "1_0"}, ERROR),
    ("a > 5", {"a": ""}, ERROR),
    ("a > 5", {}, N),
    ("a > 0", {"a": "0.5"}, ERROR),
    ("a >= 5", {"a": "5"}, T),
    ("a < 5", {"a": "4"}, T),
    ("a <= 5", {"a": "6"}, F),
    ("5 < a", {"a": "6"}, T),
    ("5 < a", {"a": "6.5"}, ERROR),
    ("a > 5.0", {"a": "5"}, F),
    ("a > 5.0", {"a": "6"}, T),
    ("a > 5.0", {"a": "5.5"}, T),
    ("a > 5.0", {"a": " 6 "}, T),  # Double.valueOf trims
    ("a > 5.0", {"a": "6d"}, T),
    ("a > 5.0", {"a": "0x1p3"}, T),
    ("a > 5.0", {"a": "NaN"}, T),  # NaN is above everything
    ("a >= 5.0", {"a": "NaN"}, T),
    ("a < 5.0", {"a": "NaN"}, F),
    ("a <= 5.0", {"a": "NaN"}, F),
    ("a = 5.0", {"a": "NaN"}, F),
    ("a <> 5.0", {"a": "NaN"}, T),
    ("5.0 < a", {"a": "NaN"}, T),
    ("5.0 <= a", {"a": "NaN"}, T),
    ("5.0 > a", {"a": "NaN"}, F),
    ("a > 5.0", {"a": "Infinity"}, T),
    ("a > 5.0", {"a": "-Infinity"}, F),
    ("a > 5.0", {"a": "nan"}, ERROR),
    ("a > 5.0", {"a": "inf"}, ERROR),
    ("a > 5.0", {"a": "1,5"}, ERROR),
    ("a > 5.0", {"a": "\uff16"}, ERROR),
    ("a > 3000000000", {"a": "3000000001"}, T),
    ("a > 3000000000", {"a": "5"}, F),
    ("a > 3000000000", {"a": "5.0"}, ERROR),
    ("a > 3000000000", {"a": "9223372036854775808"}, ERROR),
    ("a = 1", {"a": "1"}, T),
    ("a = 1", {"a": "01"}, T),
    ("a = 1", {"a": "+1"}, T),
    ("a = 1", {"a": "1.0"}, ERROR),
    ("a = 1", {"a": "x"}, ERROR),
    ("a <> 1", {"a": "x"}, ERROR),
    ("a = '1'", {"a": "1.0"}, F),  # string vs string: exact, no conversion
    ("a = '1'", {"a": "1"}, T),
    ("a = 1.0", {"a": "1"}, T),
    ("a = 5L", {"a": "5"}, T),
    ("a = 5L", {"a": "3000000000"}, ERROR),  # 5L is an int constant
    ("a = 3000000000L", {"a": "3000000000"}, T),
    ("a = -5", {"a": "-5"}, T),
    ("a = -2147483648", {"a": "-2147483648"}, T),
    ("a > -(-5)", {"a": "6"}, T),
    ("a = 9007199254740993", {"a": "9007199254740992"}, F),  # long vs long: exact
    ("a = 9007199254740992.0", {"a": "9007199254740993"}, T),  # parsed as a double
    ("9007199254740993 = 9007199254740992.0", {}, T),  # long vs double compares as double
    ("2147483648 = 2147483648.0", {}, T),
    ("1 = 1.0", {}, T),
    ("1 < 1.5", {}, T),
    ("2147483647 < 2147483648", {}, T),
    ("'5' = 5", {}, T),
    ("'x' = 5", {}, ERROR),
    ("'x' = 'x'", {}, T),
    ("'x' = 'X'", {}, F),
)
def test_number_and_string_comparisons(expr: str, props: Props, expected: Outcome) -> None:
    check(expr, props, expected)


@cases(
    ("a < b", {"a": "1", "b": "1.5"}, T),  # two properties: both parsed as doubles
    ("a > b", {"a": "1e3", "b": "999"}, T),
    ("a < b", {"a": "-0.0", "b": "0.0"}, T),  # Double.compare: -0.0 < 0.0
    ("a <= b", {"a": "0.0", "b": "-0.0"}, F),
    ("a >= b", {"a": "NaN", "b": "NaN"}, T),
    ("a < b", {"a": "NaN", "b": "NaN"}, F),
    ("a > b", {"a": "NaN", "b": "Infinity"}, T),
    ("a < b", {"a": "x", "b": "1"}, ERROR),
    ("a < b", {"a": "1", "b": "x"}, ERROR),
    ("a < b", {"b": "x"}, N),  # left NULL: the right side is not even converted
    ("a < b", {"a": "x"}, N),  # right NULL
    ("a = b", {}, T),  # both missing: TRUE
    ("a = b", {"a": "1"}, F),
    ("a = b", {"b": "1"}, N),
    ("a = b", {"a": "1", "b": "1"}, T),
    ("a = b", {"a": "1", "b": "1.0"}, F),
    ("a <> b", {"a": "1"}, T),
    ("a <> b", {"b": "1"}, N),
    ("a <> b", {}, F),
    ("a <> b", {"a": "1", "b": "2"}, T),
)
def test_property_against_property(expr: str, props: Props, expected: Outcome) -> None:
    check(expr, props, expected)


@cases(
    ("a = TRUE", {"a": "true"}, T),
    ("a = TRUE", {"a": "TrUe"}, T),
    ("a = TRUE", {"a": "yes"}, F),
    ("a = TRUE", {"a": " true"}, F),  # no trimming
    ("a = FALSE", {"a": "yes"}, T),  # every other string is FALSE
    ("a = FALSE", {"a": "false"}, T),
    ("a = FALSE", {"a": "true"}, F),
    ("a = FALSE", {}, N),
    ("a <> TRUE", {"a": "no"}, T),
    ("TRUE = a", {"a": "true"}, ERROR),  # ClassCastException
    ("TRUE = a", {"a": "x"}, ERROR),
    ("TRUE = a", {}, F),  # right NULL: FALSE before any cast
    ("FALSE <> a", {"a": "x"}, ERROR),
    ("1 = TRUE", {}, F),  # accepted, never equal
    ("1 <> TRUE", {}, T),
    ("TRUE = FALSE", {}, F),
    ("TRUE = TRUE", {}, T),
    ("TRUE = -1", {}, F),
    ("'true' = TRUE", {}, T),
    ("(a > 1) = TRUE", {"a": "2"}, T),
    ("(a > 1) = TRUE", {"a": "0"}, F),
    ("(a > 1) = TRUE", {}, N),
    ("(a > 1) = (b > 1)", {"a": "0", "b": "0"}, T),
    ("(a > 1) = (b > 1)", {"a": "2", "b": "0"}, F),
    ("(a > 1) = (b > 1)", {}, T),  # NULL = NULL is TRUE
    ("(a > 1) = (b > 1)", {"b": "2"}, N),
    ("(a > 1) = 1", {"a": "2"}, F),  # Boolean vs Integer: "less"
    ("(a > 1) <> 1", {"a": "2"}, T),
    ("(a > 1) = 'x'", {"a": "2"}, ERROR),  # Boolean vs String: ClassCastException
    ("'x' = (a > 1)", {"a": "2"}, F),  # String vs Boolean: Boolean.valueOf('x')
    ("'true' = (a > 1)", {"a": "2"}, T),
    ("a = (b > 1)", {"a": "TRUE", "b": "2"}, T),
    ("(a = 1) = 2", {"a": "1"}, F),
    ("a = 1 = 2", {}, N),
)
def test_booleans(expr: str, props: Props, expected: Outcome) -> None:
    check(expr, props, expected)


# -- unary minus, bare properties, IS NULL ------------------------------------------------------


@cases(
    ("-a = 5", {"a": "-5"}, N),  # -'-5' is NULL: the property is a string, not a number
    ("5 = -a", {"a": "5"}, F),
    ("a = -b", {}, T),  # -b is always NULL, so this is a IS NULL
    ("a = -b", {"a": "1", "b": "1"}, F),
    ("a <> -b", {"a": "1"}, T),
    ("-a IS NULL", {"a": "1"}, T),
    ("-'x' IS NULL", {}, T),
    ("-5 IS NULL", {}, F),
    ("-TRUE IS NULL", {}, T),
    ("a > -'x'", {"a": "1"}, N),
    ("a > -'x'", {}, N),
    ("-(a > 5) IS NULL", {"a": "x"}, ERROR),  # the negated condition is still evaluated
    ("-(a > 5) IS NULL", {"a": "6"}, T),
    ("5 = -(a > 1)", {"a": "2"}, F),  # right always NULL (after evaluating it): FALSE
    ("5 <> -(a > 1)", {"a": "2"}, T),
    ("5 = -(a > 1)", {"a": "x"}, ERROR),
    ("-(a > 1) = 5", {"a": "2"}, N),
    ("a > -(b > 5)", {"b": "x"}, N),  # left NULL: right not evaluated
    ("a > -(b > 5)", {"a": "1", "b": "x"}, ERROR),
    ("a", {}, N),
    ("a", {"a": "true"}, F),  # a bare property is never TRUE
    ("a", {"a": ""}, F),
    ("NOT a", {"a": "x"}, T),
    ("NOT a", {}, N),
    ("a AND b", {"a": "1", "b": "1"}, F),
    ("a OR TRUE", {}, T),
    ("a OR b", {"a": "1"}, N),
    ("a IS NULL", {}, T),
    ("a IS NULL", {"a": ""}, F),  # an empty string is not NULL
    ("a IS NOT NULL", {"a": ""}, T),
    ("a IS NOT NULL", {}, F),
    ("(a > 5) IS NULL", {}, T),
    ("(a > 5) IS NULL", {"a": "6"}, F),
    ("(a > 5) IS NULL", {"a": "x"}, ERROR),
    ("NOT a IS NULL", {}, T),  # (NOT a) IS NULL
    ("NOT a IS NULL", {"a": "x"}, F),
    ("NULL IS NULL", {}, T),
    ("5 IS NOT NULL", {}, T),
    ("a IS NULL IS NULL", {}, F),
    ("TAGS = 'TagA'", {"TAGS": "TagA"}, T),
    ("tags = 'TagA'", {"TAGS": "TagA"}, N),  # names are case-sensitive
)
def test_unary_minus_bare_properties_and_is_null(expr: str, props: Props, expected: Outcome) -> None:
    check(expr, props, expected)


# -- IN, BETWEEN ---------------------------------------------------------------------------------


@cases(
    ("a IN ('x', 'y')", {"a": "x"}, T),
    ("a IN ('x', 'y')", {"a": "z"}, F),
    ("a IN ('x', 'y')", {}, N),
    ("a NOT IN ('x', 'y')", {}, N),
    ("a NOT IN ('x', 'y')", {"a": "z"}, T),
    ("a NOT IN ('x', 'y')", {"a": "x"}, F),
    ("a IN ('1')", {"a": "1.0"}, F),  # exact strings, no numeric conversion
    ("a IN ('x')", {"a": "X"}, F),
    ("a IN ('x')", {"a": " x"}, F),
    ("a IN ('a', 'b', 'c', 'd', 'e', 'f')", {"a": "f"}, T),
    ("a IN ('it''s')", {"a": "it's"}, T),
    ("a IN ('')", {"a": ""}, T),
    ("(a) IN ('x')", {"a": "x"}, T),
    ("a BETWEEN 1 AND 5", {"a": "1"}, T),
    ("a BETWEEN 1 AND 5", {"a": "5"}, T),
    ("a BETWEEN 1 AND 5", {"a": "3"}, T),
    ("a BETWEEN 1 AND 5", {"a": "0"}, F),
    ("a BETWEEN 1 AND 5", {"a": "6"}, F),
    ("a BETWEEN 1 AND 5", {"a": "3.5"}, ERROR),
    ("a BETWEEN 1 AND 5", {}, N),
    ("a BETWEEN 5 AND 5", {"a": "5"}, T),
    ("a NOT BETWEEN 1 AND 5", {"a": "0"}, T),
    ("a NOT BETWEEN 1 AND 5", {"a": "6"}, T),
    ("a NOT BETWEEN 1 AND 5", {"a": "3"}, F),
    ("a NOT BETWEEN 1 AND 5", {}, N),
    ("a NOT BETWEEN 1 AND 5", {"a": "x"}, ERROR),
    ("a NOT BETWEEN 10 AND 0", {"a": "5"}, T),  # no order check for NOT BETWEEN
    ("a BETWEEN 1.5 AND 5", {"a": "2"}, T),
    ("a BETWEEN 1.5 AND 5", {"a": "1"}, F),
    ("a BETWEEN 1 AND 5.5", {"a": "5"}, T),  # each side converts on its own
    ("a BETWEEN 1 AND 5.5", {"a": "5.2"}, ERROR),  # ... so Integer.valueOf('5.2') throws
    ("a BETWEEN -1 AND -5", {"a": "-3"}, F),  # accepted, never TRUE
    ("a BETWEEN b AND c", {"a": "2", "b": "1", "c": "3"}, T),
    ("a BETWEEN b AND c", {"a": "2", "c": "3"}, N),
    ("a BETWEEN b AND c", {"a": "2", "b": "3"}, F),  # a >= b is FALSE: c not needed
    ("a BETWEEN 1 AND 5 AND b = '1'", {"a": "3", "b": "1"}, T),
    ("a BETWEEN 3000000000 AND 3000000002", {"a": "3000000001"}, T),
)
def test_in_and_between(expr: str, props: Props, expected: Outcome) -> None:
    check(expr, props, expected)


# -- CONTAINS / STARTSWITH / ENDSWITH ------------------------------------------------------------


@cases(
    ("a CONTAINS 'x'", {"a": "axb"}, T),
    ("a CONTAINS 'x'", {"a": "aXb"}, F),  # case-sensitive
    ("a CONTAINS 'x'", {}, F),  # missing: FALSE, not NULL
    ("a NOT CONTAINS 'x'", {}, F),  # ... in both forms
    ("NOT (a CONTAINS 'x')", {}, T),
    ("a NOT CONTAINS 'x'", {"a": "abc"}, T),
    ("a NOT CONTAINS 'x'", {"a": "axc"}, F),
    ("a CONTAINS ''", {"a": "abc"}, F),  # empty search: FALSE
    ("a NOT CONTAINS ''", {"a": "abc"}, F),
    ("a CONTAINS '%'", {"a": "100%"}, T),  # no wildcards
    ("a CONTAINS '_'", {"a": "ab"}, F),
    ("a STARTSWITH 'ab'", {"a": "abc"}, T),
    ("a STARTSWITH 'bc'", {"a": "abc"}, F),
    ("a NOT STARTSWITH 'bc'", {"a": "abc"}, T),
    ("a NOT STARTSWITH 'x'", {}, F),
    ("a STARTSWITH ''", {"a": "abc"}, F),
    ("a ENDSWITH 'bc'", {"a": "abc"}, T),
    ("a NOT ENDSWITH 'bc'", {"a": "abc"}, F),
    ("a NOT ENDSWITH ''", {"a": "abc"}, F),
    ("a ENDSWITH 'x'", {}, F),
    ("'abc' CONTAINS 'b'", {}, T),
    ("5 CONTAINS '5'", {}, F),  # not a string
    ("TRUE STARTSWITH 'T'", {}, F),
    ("(a > 5) CONTAINS 't'", {"a": "6"}, F),
    ("(a > 5) NOT CONTAINS 't'", {"a": "6"}, F),
    ("(a > 5) CONTAINS 't'", {"a": "x"}, ERROR),  # the left side is evaluated
    ("(a > 5) CONTAINS ''", {"a": "x"}, F),  # ... unless the search string is empty
    ("-a CONTAINS 'x'", {"a": "x"}, F),
    ("a CONTAINS 'x' CONTAINS 'y'", {"a": "x"}, F),
    ("a CONTAINS 'x' = TRUE", {"a": "x"}, T),
    ("a CONTAINS 'x' = TRUE", {}, F),
    ("a CONTAINS 'é😀'", {"a": "café😀!"}, T),
)
def test_string_tests(expr: str, props: Props, expected: Outcome) -> None:
    check(expr, props, expected)


# -- 3.7: the checklist of surprises -----------------------------------------------------------


def test_surprise_float_zero_is_a_compile_error() -> None:
    rejects("a > 0.0")


@cases(
    ("a > 0", {"a": "0.5"}, ERROR),
    ("a = 1", {"a": "1.0"}, ERROR),
    ("NOT a = 'x'", {"a": "x"}, ERROR),  # (NOT a) = 'x': Boolean vs String
    ("NOT a = 'x'", {"a": "y"}, ERROR),
    ("NOT a = 'x'", {}, N),
    ("a <> 'x'", {}, N),
    ("a NOT CONTAINS 'x'", {}, F),
    ("TRUE = a", {"a": "true"}, ERROR),
    ("TRUE = a", {}, F),
    ("a = b", {}, T),
)
def test_surprises(expr: str, props: Props, expected: Outcome) -> None:
    check(expr, props, expected)


def test_surprise_like_in_rocketmq_vs_sievemq() -> None:
    # RocketMQ: "a LIKE 'x%'" compiles (leftover rule) and never matches.
    # sievemq: LIKE is a documented extension, so it matches (see DIFFERENCES_FROM_ROCKETMQ).
    check("a LIKE 'x%'", {"a": "xyz"}, T)
    check("a LIKE 'x%'", {"a": "y"}, F)


def test_surprise_property_names_are_ascii_only() -> None:
    rejects("prénom = 'x'")


def test_an_evaluation_error_is_never_raised_by_evaluate() -> None:
    selector = compile_selector("a > 5 OR b = '1'")
    assert selector.evaluate({"a": "x", "b": "1"}) is False
    assert selector.matcher({"a": "x", "b": "1"}) is False
    # even with a property map that is not a mapping of strings
    assert selector.evaluate({"a": 5}) is False  # type: ignore[dict-item]
    assert selector.evaluate(None) is False  # type: ignore[arg-type]
