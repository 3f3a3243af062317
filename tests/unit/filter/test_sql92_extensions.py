"""sievemq extensions: [NOT] LIKE with % _ and ESCAPE, and EXISTS(name)."""

from __future__ import annotations

import pytest

from sievemq.filter.sql92 import parse, to_sql
from sievemq.filter.sql92.ast import BoolCast, Compare, Exists, Like, Property, StringLiteral
from sievemq.filter.sql92.like import LikePattern
from tests.unit.filter.helpers import ERROR, Outcome, check, rejects

T, F, N = True, False, None
Props = dict[str, str]


def cases(*rows: tuple[str, Props, Outcome]) -> pytest.MarkDecorator:
    return pytest.mark.parametrize(("expr", "props", "expected"), rows, ids=[f"{r[0]} | {r[1]}" for r in rows])


@cases(
    ("a LIKE 'abc'", {"a": "abc"}, T),
    ("a LIKE 'abc'", {"a": "abcd"}, F),  # whole value
    ("a LIKE 'ABC'", {"a": "abc"}, F),  # case-sensitive
    ("a LIKE 'a%'", {"a": "abc"}, T),
    ("a LIKE 'a%'", {"a": "a"}, T),
    ("a LIKE 'a%'", {"a": "ba"}, F),
    ("a LIKE '%c'", {"a": "abc"}, T),
    ("a LIKE '%b%'", {"a": "abc"}, T),
    ("a LIKE '%b%'", {"a": "ac"}, F),
    ("a LIKE '%'", {"a": ""}, T),
    ("a LIKE ''", {"a": ""}, T),
    ("a LIKE ''", {"a": "x"}, F),
    ("a LIKE '_'", {"a": "x"}, T),
    ("a LIKE '_'", {"a": "😀"}, T),  # one character
    ("a LIKE '_'", {"a": ""}, F),
    ("a LIKE '_'", {"a": "xy"}, F),
    ("a LIKE 'a_c'", {"a": "abc"}, T),
    ("a LIKE 'a_c'", {"a": "ac"}, F),
    ("a LIKE 'a%c%e'", {"a": "abcde"}, T),
    ("a LIKE 'a%c%e'", {"a": "abcd"}, F),
    ("a LIKE '%%a%%'", {"a": "bab"}, T),
    ("a LIKE '%a_'", {"a": "xxab"}, T),
    ("a LIKE 'x%'", {"a": "x\ny"}, T),  # % crosses line breaks
    ("a LIKE 'a.c'", {"a": "abc"}, F),  # regex characters are literal
    ("a LIKE 'a*'", {"a": "aaa"}, F),
    ("a LIKE '(x)[y]'", {"a": "(x)[y]"}, T),
    ("a LIKE '100!%' ESCAPE '!'", {"a": "100%"}, T),
    ("a LIKE '100!%' ESCAPE '!'", {"a": "1000"}, F),
    ("a LIKE 'a!_b' ESCAPE '!'", {"a": "a_b"}, T),
    ("a LIKE 'a!_b' ESCAPE '!'", {"a": "axb"}, F),
    ("a LIKE 'a!!b' ESCAPE '!'", {"a": "a!b"}, T),
    ("a LIKE 'a!bc' ESCAPE '!'", {"a": "abc"}, T),  # escaping an ordinary character
    ("a LIKE '%\\%%' ESCAPE '\\'", {"a": "50% off"}, T),
    ("a LIKE 'a''%'", {"a": "a'b"}, T),
    ("a LIKE '%x' ESCAPE '%'", {"a": "x"}, T),  # the escape character escapes, even when it is %
    ("a LIKE '%x' ESCAPE '%'", {"a": "%x"}, F),
    ("a LIKE '%%x' ESCAPE '%'", {"a": "%x"}, T),
    ("a LIKE 'x%'", {}, N),  # JMS: NULL for a missing property
    ("a NOT LIKE 'x%'", {}, N),
    ("NOT (a LIKE 'x%')", {}, N),
    ("a NOT LIKE 'x%'", {"a": "xa"}, F),
    ("a NOT LIKE 'x%'", {"a": "ya"}, T),
    ("a not like 'x%' escape '!'", {"a": "ya"}, T),  # case-insensitive words
    ("5 LIKE '5'", {}, F),  # not a string
    ("5 NOT LIKE '5'", {}, T),  # NOT (LIKE)
    ("'abc' LIKE 'a%'", {}, T),
    ("(a > 1) LIKE 't%'", {"a": "2"}, F),
    ("(a > 1) LIKE 't%'", {}, N),
    ("(a > 1) NOT LIKE 't%'", {"a": "2"}, T),
    ("(a > 1) LIKE 't%'", {"a": "x"}, ERROR),
    ("-a LIKE '%'", {"a": "x"}, N),
    ("a LIKE 'x%' AND b = '1'", {"a": "xx", "b": "1"}, T),
    ("a LIKE 'x%' OR b LIKE '%y'", {"b": "zy"}, T),
    ("a LIKE 'x%' = TRUE", {"a": "xx"}, T),  # LIKE binds like a comparison
    ("LIKE LIKE 'L%'", {"LIKE": "Lx"}, T),  # still usable as a property name
    ("ESCAPE LIKE 'e!%' ESCAPE '!'", {"ESCAPE": "e%"}, T),
)
def test_like(expr: str, props: Props, expected: Outcome) -> None:
    check(expr, props, expected)


@pytest.mark.parametrize(
    ("text", "column", "words"),
    [
        ("a LIKE 5", 8, "expected a string literal pattern after LIKE"),
        ("a LIKE b", 8, "pattern after LIKE"),
        ("a NOT LIKE", 11, "pattern after NOT LIKE"),
        ("a LIKE 'x' ESCAPE", 18, "one-character string literal after ESCAPE"),
        ("a LIKE 'x' ESCAPE ''", 19, "exactly one character"),
        ("a LIKE 'x' ESCAPE '!!'", 19, "exactly one character"),
        ("a LIKE 'x!' ESCAPE '!'", 8, "ends with the escape character"),
        ("a LIKE 'x' ESCAPE '!' ESCAPE '!'", 23, "after a complete expression"),
        ("a LIKE 'x%' > 1", 1, "a condition cannot be used with >"),
    ],
)
def test_like_errors(text: str, column: int, words: str) -> None:
    err = rejects(text)
    assert words in err.message
    assert err.position == column


def test_like_tree_and_round_trip() -> None:
    tree = parse("a NOT LIKE 'x!%' ESCAPE '!'")
    assert tree == Like(Property("a"), "x!%", "!", True)
    assert parse(to_sql(tree)) == tree


@pytest.mark.parametrize(
    ("pattern", "escape", "value"),
    [("a%b_c", None, "aXXbYc"), ("%", None, ""), ("!%%", "!", "%abc"), ("a__", None, "abc"), ("%_%_%", None, "ab")],
)
def test_like_reference_matcher_agrees_with_regex(pattern: str, escape: str | None, value: str) -> None:
    parsed = LikePattern.parse(pattern, escape)
    assert parsed.matches(value) == (parsed.regex().fullmatch(value) is not None)
    assert parsed.matches(value)


@cases(
    ("EXISTS(a)", {"a": "x"}, T),
    ("EXISTS(a)", {"a": ""}, T),
    ("EXISTS(a)", {}, F),  # never NULL
    ("NOT EXISTS(a)", {}, T),
    ("NOT EXISTS(a)", {"a": "1"}, F),
    ("exists ( a )", {"a": "1"}, T),
    ("EXISTS(a) AND a > 5", {"a": "6"}, T),
    ("EXISTS(a) OR b > 5", {"b": "x"}, ERROR),
    ("EXISTS(a) = TRUE", {"a": "1"}, T),
    ("EXISTS = 'x'", {"EXISTS": "x"}, T),  # EXISTS is still a property name
    ("EXISTS", {"EXISTS": "x"}, F),
    ("EXISTS(TAGS)", {"TAGS": "TagA"}, T),
)
def test_exists(expr: str, props: Props, expected: Outcome) -> None:
    check(expr, props, expected)


def test_exists_tree() -> None:
    assert parse("EXISTS(a)") == Exists("a")
    assert parse("EXISTS") == BoolCast(Property("EXISTS"))
    assert parse("EXISTS = 'x'") == Compare("=", Property("EXISTS"), StringLiteral("x"))


@pytest.mark.parametrize(
    ("text", "column", "words"),
    [
        ("EXISTS()", 8, "a property name inside EXISTS"),
        ("EXISTS(5)", 8, "a property name inside EXISTS"),
        ("EXISTS(NULL)", 8, "a property name"),
        ("EXISTS(a", 9, ") after EXISTS(a"),
        ("EXISTS(a, b)", 9, ") after EXISTS(a"),
        ("EXISTS(a) > 1", 1, "a condition cannot be used with >"),
    ],
)
def test_exists_errors(text: str, column: int, words: str) -> None:
    err = rejects(text)
    assert words in err.message
    assert err.position == column


@pytest.mark.parametrize(
    "text",
    [
        "LIKE = 'x'",
        "ESCAPE = 'x'",
        "LIKE IS NULL AND ESCAPE IS NULL",
        "a = 'x' AND LIKE",
        "NOT LIKE",
        "LIKE IN ('x')",
        "EXISTS IS NULL",
        "a BETWEEN LIKE AND ESCAPE",
    ],
)
def test_extension_words_remain_identifiers_everywhere_rocketmq_allows_one(text: str) -> None:
    # These are complete RocketMQ expressions; the extensions must not change them.
    tree = parse(text)
    assert not any(isinstance(n, (Like, Exists)) for n in _nodes(tree))


def _nodes(tree: object) -> list[object]:
    from sievemq.filter.sql92.ast import walk

    return list(walk(tree))  # type: ignore[arg-type]
