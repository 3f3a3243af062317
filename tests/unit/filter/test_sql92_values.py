"""Java value semantics (docs/protocol/sql92.md §7-§9): parse rules, Double.compare, the __compare table."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sievemq.filter.sql92 import SqlEvaluationError
from sievemq.filter.sql92.values import (
    JavaDouble,
    JavaInt,
    JavaLong,
    JavaValue,
    double_compare,
    java_boolean_value,
    java_compare,
    java_equals,
    parse_java_double,
    parse_java_int,
    parse_java_long,
)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0", 0),
        ("5", 5),
        ("+5", 5),
        ("-5", -5),
        ("-0", 0),
        ("007", 7),
        ("2147483647", 2147483647),
        ("-2147483648", -2147483648),
        ("0000000000000000000000000000042", 42),
        ("\uff15", 5),  # fullwidth digit: Character.digit accepts any Unicode decimal digit
        ("\u0661\u0660", 10),  # Arabic-Indic digits
        ("-\u0663", -3),
    ],
)
def test_integer_value_of_accepts(text: str, value: int) -> None:
    assert parse_java_int(text) == value
    assert parse_java_long(text) == value


@pytest.mark.parametrize(
    "text",
    [
        "",
        "+",
        "-",
        " 5",
        "5 ",
        "5.0",
        "5.",
        "1e3",
        "1_000",
        "0x10",
        "2147483648",
        "-2147483649",
        "5L",
        "++5",
        "\U0001d7d3",  # MATHEMATICAL BOLD DIGIT FIVE: a supplementary-plane Nd, two UTF-16 units in Java
        "²",  # superscript two is a digit but not a decimal digit
        "true",
    ],
)
def test_integer_value_of_rejects(text: str) -> None:
    with pytest.raises(SqlEvaluationError):
        parse_java_int(text)


def test_long_value_of_range() -> None:
    assert parse_java_long("3000000000") == 3000000000
    assert parse_java_long("9223372036854775807") == 2**63 - 1
    assert parse_java_long("-9223372036854775808") == -(2**63)
    for bad in ("9223372036854775808", "-9223372036854775809", "1" * 5000, "5.0"):
        with pytest.raises(SqlEvaluationError):
            parse_java_long(bad)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("5", 5.0),
        ("5.5", 5.5),
        ("1.", 1.0),
        (".5", 0.5),
        ("-.5", -0.5),
        ("+1.5e3", 1500.0),
        ("1E-3", 0.001),
        ("1.5f", 1.5),
        ("1.5F", 1.5),
        ("2d", 2.0),
        ("2D", 2.0),
        (" 5 ", 5.0),  # trims chars <= U+0020
        ("\t5\n", 5.0),
        ("\x005\x01", 5.0),
        ("0x1p1", 2.0),
        ("0X1.8P1", 3.0),
        ("-0x.8p0", -0.5),
        ("0x1p1f", 2.0),
        ("Infinity", math.inf),
        ("-Infinity", -math.inf),
        ("+Infinity", math.inf),
        ("1e400", math.inf),
        ("1e-400", 0.0),
        ("0x1p99999", math.inf),
        ("00.5", 0.5),
    ],
)
def test_double_value_of_accepts(text: str, value: float) -> None:
    assert parse_java_double(text) == value


def test_double_value_of_nan_and_negative_zero() -> None:
    assert math.isnan(parse_java_double("NaN"))
    assert math.isnan(parse_java_double("-NaN"))
    assert math.copysign(1.0, parse_java_double("-0.0")) == -1.0


@pytest.mark.parametrize(
    "text",
    [
        "",
        " ",
        "nan",
        "NAN",
        "inf",
        "infinity",
        "1_0",
        "1,5",
        "\u0663",
        "\uff15",
        "e5",
        ".",
        "1e",
        "1.5ff",
        "0x1",
        "0x",
        "NaNd",
        "\u00a05",
        "1 5",
    ],
)
def test_double_value_of_rejects(text: str) -> None:
    with pytest.raises(SqlEvaluationError):
        parse_java_double(text)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("true", True),
        ("TRUE", True),
        ("tRuE", True),
        ("false", False),
        ("yes", False),
        ("1", False),
        (" true", False),
        ("", False),
    ],
)
def test_boolean_value_of(text: str, value: bool) -> None:
    assert java_boolean_value(text) is value


@pytest.mark.parametrize(
    ("a", "b", "sign"),
    [
        (1.0, 2.0, -1),
        (2.0, 1.0, 1),
        (1.0, 1.0, 0),
        (math.nan, math.inf, 1),
        (math.inf, math.nan, -1),
        (math.nan, math.nan, 0),
        (-0.0, 0.0, -1),
        (0.0, -0.0, 1),
        (-0.0, -0.0, 0),
        (-math.inf, -1e308, -1),
    ],
)
def test_double_compare(a: float, b: float, sign: int) -> None:
    assert double_compare(a, b) == sign


JI = JavaInt
JL = JavaLong
JD = JavaDouble


@pytest.mark.parametrize(
    ("lv", "rv", "sign"),
    [
        # same class
        (JI(1), JI(2), -1),
        (JL(5), JL(5), 0),
        ("a", "b", -1),
        (True, False, 1),
        # widening
        (JI(1), JL(2), -1),
        (JL(3000000000), JI(1), 1),
        (JI(1), JD(1.0), 0),
        (JL(9007199254740993), JD(9007199254740992.0), 0),  # long -> double loses precision
        (JD(0.5), JI(1), -1),
        # the constant decides how the string is parsed
        (JI(5), "5", 0),
        ("5", JI(5), 0),
        ("5", JL(5), 0),
        ("5", JD(5.0), 0),
        ("5.0", JD(5.0), 0),
        ("NaN", JD(1.0), 1),
        ("yes", False, 0),  # Boolean.valueOf("yes") is false
        ("TRUE", True, 0),
        # mixed pairs with no conversion compare as "less"
        (JI(1), True, -1),
        (JD(1.0), False, -1),
        (True, JI(1), -1),
        (JL(1), True, -1),
    ],
)
def test_java_compare_table(lv: JavaValue, rv: JavaValue, sign: int) -> None:
    assert java_compare(lv, rv) == sign


@pytest.mark.parametrize(
    ("lv", "rv"),
    [
        (True, "true"),  # ClassCastException in RocketMQ
        (False, "x"),
        (JI(5), "5.0"),
        ("5.0", JI(5)),
        ("3000000000", JI(1)),
        (JL(1), "x"),
        ("x", JD(1.0)),
    ],
)
def test_java_compare_throws(lv: JavaValue, rv: JavaValue) -> None:
    with pytest.raises(SqlEvaluationError):
        java_compare(lv, rv)


def test_java_equals() -> None:
    assert java_equals(JD(math.nan), JD(math.nan))
    assert not java_equals(JD(0.0), JD(-0.0))
    assert not java_equals(JI(1), JL(1))
    assert java_equals("x", "x")
    assert not java_equals(JI(1), JD(1.0))


@given(st.integers(min_value=-(2**31), max_value=2**31 - 1))
def test_int_round_trip(value: int) -> None:
    assert parse_java_int(str(value)) == value


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_long_round_trip(value: int) -> None:
    assert parse_java_long(str(value)) == value


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_double_round_trip(value: float) -> None:
    assert parse_java_double(repr(value)) == value
