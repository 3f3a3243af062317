"""Java value semantics RocketMQ's selector evaluator relies on (docs/protocol/sql92.md §7-§9).

Everything that decides how a property string meets a constant lives here, so that the reference
interpreter, the compiler and the parser's constant checks agree by construction:

* the Java parse functions ``Integer.valueOf``, ``Long.valueOf``, ``Double.valueOf`` and
  ``Boolean.valueOf`` (:func:`parse_java_int`, :func:`parse_java_long`, :func:`parse_java_double`,
  :func:`java_boolean_value`), raising :class:`SqlEvaluationError` where Java throws
  ``NumberFormatException``;
* ``Double.compare`` (:func:`double_compare`: NaN above everything and equal to itself,
  ``-0.0 < 0.0``);
* a tagged value model (``str``, ``bool``, :class:`JavaInt`, :class:`JavaLong`,
  :class:`JavaDouble`, ``None``) with ``Object.equals`` (:func:`java_equals`) and a port of
  RocketMQ's ``ComparisonExpression.__compare`` with string conversion on
  (:func:`java_compare`).
"""

from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass
from typing import TypeAlias

from sievemq.filter.sql92.errors import SqlEvaluationError

__all__ = [
    "INT32_MAX",
    "INT32_MIN",
    "INT64_MAX",
    "INT64_MIN",
    "JavaDouble",
    "JavaInt",
    "JavaLong",
    "JavaValue",
    "double_compare",
    "java_boolean_value",
    "java_compare",
    "java_equals",
    "java_string_compare",
    "parse_java_double",
    "parse_java_int",
    "parse_java_long",
    "wrap_int32",
    "wrap_int64",
]

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

# Java String.trim() removes every char <= U+0020 at both ends (Double.valueOf trims first).
_JAVA_TRIM_CHARS = "".join(chr(c) for c in range(0x21))

# Double.valueOf grammar (FloatingDecimal.readJavaFormatString), ASCII digits only.
_DECIMAL_DOUBLE = re.compile(r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?)")
_HEX_DOUBLE = re.compile(r"([+-]?)0[xX]([0-9a-fA-F]+\.?|[0-9a-fA-F]*\.[0-9a-fA-F]+)[pP]([+-]?[0-9]+)[fFdD]?")


@dataclass(frozen=True, slots=True)
class JavaInt:
    """A Java ``Integer`` (32-bit)."""

    value: int


@dataclass(frozen=True, slots=True)
class JavaLong:
    """A Java ``Long`` (64-bit)."""

    value: int


@dataclass(frozen=True, slots=True, eq=False)
class JavaDouble:
    """A Java ``Double``; equality is :func:`java_equals` (NaN equals NaN, ``0.0 != -0.0``)."""

    value: float


JavaValue: TypeAlias = str | bool | JavaInt | JavaLong | JavaDouble | None
"""A runtime value: ``str`` (String), ``bool`` (Boolean), a tagged number, or ``None`` (null)."""


def wrap_int32(value: int) -> int:
    """Wrap to a signed 32-bit value (Java ``int`` arithmetic)."""
    value &= 0xFFFFFFFF
    return value - 0x100000000 if value & 0x80000000 else value


def wrap_int64(value: int) -> int:
    """Wrap to a signed 64-bit value (Java ``long`` arithmetic)."""
    value &= 0xFFFFFFFFFFFFFFFF
    return value - 0x10000000000000000 if value & 0x8000000000000000 else value


def _number_format(s: str, kind: str) -> SqlEvaluationError:
    shown = s if len(s) <= 40 else s[:37] + "..."
    return SqlEvaluationError(f"cannot convert {shown!r} to {kind} (Java NumberFormatException)")


def _parse_integer(s: str, low: int, high: int, kind: str) -> int:
    """``Integer.parseInt``/``Long.parseLong``: optional sign, then 1+ decimal digits, in range.

    Java accepts any Unicode decimal digit (``Character.digit``) but works on UTF-16 units, so a
    supplementary-plane digit (two surrogates) is rejected; no whitespace, ``_``, ``.`` or exponent.
    """
    body = s[1:] if s[:1] in ("+", "-") else s
    if not body.isdecimal():  # also False for ""
        raise _number_format(s, kind)
    if not body.isascii():
        if any(ord(c) > 0xFFFF for c in body):
            raise _number_format(s, kind)
        body = "".join(str(unicodedata.decimal(c)) for c in body)
    body = body.lstrip("0") or "0"
    if len(body) > 19:
        raise _number_format(s, kind)
    value = int(body)
    if s[0] == "-":
        value = -value
    if not low <= value <= high:
        raise _number_format(s, kind)
    return value


def parse_java_int(s: str) -> int:
    """Java ``Integer.valueOf(s)``; raises :class:`SqlEvaluationError` where Java throws."""
    if len(s) < 10 and s.isascii() and s.isdigit():
        return int(s)
    return _parse_integer(s, INT32_MIN, INT32_MAX, "int")


def parse_java_long(s: str) -> int:
    """Java ``Long.valueOf(s)``; raises :class:`SqlEvaluationError` where Java throws."""
    if len(s) < 19 and s.isascii() and s.isdigit():
        return int(s)
    return _parse_integer(s, INT64_MIN, INT64_MAX, "long")


def parse_java_double(s: str) -> float:
    """Java ``Double.valueOf(s)``; raises :class:`SqlEvaluationError` where Java throws.

    Trims chars ``<= U+0020``; accepts a sign, ``1.``, ``.5``, exponents, one trailing
    ``d``/``D``/``f``/``F``, hex floats with a binary exponent (``0x1p1``), ``NaN`` and
    ``Infinity`` (exact case). Rejects ``nan``, ``inf``, ``1_0``, ``1,5``, non-ASCII digits, "".
    """
    if s.isascii() and s.isdigit():
        return float(s)
    t = s.strip(_JAVA_TRIM_CHARS)
    if _DECIMAL_DOUBLE.fullmatch(t):
        if t[-1] in "fFdD":
            t = t[:-1]
        return float(t)
    match = _HEX_DOUBLE.fullmatch(t)
    if match is None:
        raise _number_format(s, "double")
    sign, mantissa, exponent = match.groups()
    try:
        value = float.fromhex(f"0x{mantissa}p{exponent}")
    except OverflowError:
        value = math.inf
    return -value if sign == "-" else value


def java_boolean_value(s: str) -> bool:
    """Java ``Boolean.valueOf(s)``: ``"true"`` in any letter case is TRUE, every other string FALSE."""
    return s.lower() == "true"


def double_compare(a: float, b: float) -> int:
    """Java ``Double.compare``: NaN is greater than everything and equal to itself; ``-0.0 < 0.0``."""
    if a < b:
        return -1
    if a > b:
        return 1
    a_nan = a != a
    b_nan = b != b
    if a_nan or b_nan:
        return (1 if a_nan else 0) - (1 if b_nan else 0)
    if a == 0.0:  # both zero: order by sign
        sa = math.copysign(1.0, a)
        sb = math.copysign(1.0, b)
        return 0 if sa == sb else (-1 if sa < sb else 1)
    return 0


def java_string_compare(a: str, b: str) -> int:
    """Java ``String.compareTo`` sign: lexicographic over UTF-16 code units."""
    if a == b:
        return 0
    ua = a.encode("utf-16-be", "surrogatepass")
    ub = b.encode("utf-16-be", "surrogatepass")
    return -1 if ua < ub else 1


def java_equals(a: JavaValue, b: JavaValue) -> bool:
    """Java ``a.equals(b)`` for non-null values (same class and same value; Double by bits)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, JavaDouble) and isinstance(b, JavaDouble):
        return double_compare(a.value, b.value) == 0
    return a == b


def _sign(x: int) -> int:
    return (x > 0) - (x < 0)


def java_compare(lv: JavaValue, rv: JavaValue) -> int:
    """Port of RocketMQ ``ComparisonExpression.__compare(lv, rv, convertStringExpressions=true)``.

    Both values must be non-null. Values of different classes are first brought to one class:
    numbers widen (int -> long -> double), a string meeting a number or a boolean is parsed as
    that type (which can raise :class:`SqlEvaluationError`), a boolean meeting a string throws
    (RocketMQ casts the Boolean to String: ``ClassCastException``), and every other mixed pair
    compares as -1 ("less"). Then Java ``compareTo``; the sign is returned.
    """
    if lv is None or rv is None:
        raise TypeError("java_compare needs two non-null values")
    if type(lv) is not type(rv):
        if isinstance(lv, bool):
            if isinstance(rv, str):
                raise SqlEvaluationError("cannot compare a boolean with a string (Java ClassCastException)")
            return -1
        if isinstance(lv, JavaInt):
            if isinstance(rv, JavaLong):
                lv = JavaLong(lv.value)
            elif isinstance(rv, JavaDouble):
                lv = JavaDouble(float(lv.value))
            elif isinstance(rv, str):
                rv = JavaInt(parse_java_int(rv))
            else:
                return -1
        elif isinstance(lv, JavaLong):
            if isinstance(rv, JavaInt):
                rv = JavaLong(rv.value)
            elif isinstance(rv, JavaDouble):
                lv = JavaDouble(float(lv.value))
            elif isinstance(rv, str):
                rv = JavaLong(parse_java_long(rv))
            else:
                return -1
        elif isinstance(lv, JavaDouble):
            if isinstance(rv, (JavaInt, JavaLong)):
                rv = JavaDouble(float(rv.value))
            elif isinstance(rv, str):
                rv = JavaDouble(parse_java_double(rv))
            else:
                return -1
        elif isinstance(lv, str):
            if isinstance(rv, bool):
                lv = java_boolean_value(lv)
            elif isinstance(rv, JavaInt):
                lv = JavaInt(parse_java_int(lv))
            elif isinstance(rv, JavaLong):
                lv = JavaLong(parse_java_long(lv))
            elif isinstance(rv, JavaDouble):
                lv = JavaDouble(parse_java_double(lv))
            else:
                return -1
        else:
            return -1
    # Same class from here on.
    if isinstance(lv, str) and isinstance(rv, str):
        return java_string_compare(lv, rv)
    if isinstance(lv, bool) and isinstance(rv, bool):
        return _sign(int(lv) - int(rv))
    if isinstance(lv, JavaDouble) and isinstance(rv, JavaDouble):
        return double_compare(lv.value, rv.value)
    if isinstance(lv, (JavaInt, JavaLong)) and isinstance(rv, (JavaInt, JavaLong)):
        return _sign(lv.value - rv.value)
    raise TypeError(f"cannot compare {lv!r} with {rv!r}")  # pragma: no cover
