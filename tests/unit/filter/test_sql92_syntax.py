"""Lexical rules (3.2), grammar and precedence (3.3), leftovers (3.4) and compile-time checks (3.5)."""

from __future__ import annotations

import pytest

from sievemq.filter.sql92 import SqlError, parse, to_sql
from sievemq.filter.sql92.ast import (
    BoolCast,
    Compare,
    FloatLiteral,
    IntLiteral,
    Negate,
    Property,
    StringLiteral,
)
from sievemq.filter.sql92.lexer import Lexer
from tests.unit.filter.helpers import rejects


def canon(expr: str) -> str:
    return to_sql(parse(expr))


def tokens(text: str) -> list[tuple[str, str]]:
    lexer = Lexer(text)
    out: list[tuple[str, str]] = []
    while (token := lexer.next()).kind != "EOF":
        out.append((token.kind, token.text))
    return out


# -- 3.2 lexical rules --------------------------------------------------------------------------


@pytest.mark.parametrize("ws", [" ", "\t", "\n", "\r", "\f", " \r\n\t\f "])
def test_whitespace_characters(ws: str) -> None:
    assert canon(f"{ws}a{ws}={ws}'x'{ws}") == "a = 'x'"


@pytest.mark.parametrize("ws", ["\u00a0", "\u3000", "\u2003", "\v", "\x85"])
def test_other_spaces_are_errors(ws: str) -> None:
    err = rejects(f"a{ws}= 'x'")
    assert err.position == 2
    assert "unexpected character" in err.message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a /* c */ = 'x'", "a = 'x'"),
        ("/* lead */ a = 'x'", "a = 'x'"),
        ("a = 'x' /* trailing */", "a = 'x'"),
        ("a /**/ = 'x'", "a = 'x'"),
        ("a /* ** / * */ = 'x'", "a = 'x'"),
        ("a = 'x' -- note\n", "a = 'x'"),
        ("a = 'x' -- note\r", "a = 'x'"),
        ("a -- note\r\n = 'x'", "a = 'x'"),
        ("a -- note\n AND b", "a AND b"),
        ("a = 'x' -- one\n -- two\n", "a = 'x'"),
    ],
)
def test_comments(text: str, expected: str) -> None:
    assert canon(text) == expected


def test_unterminated_block_comment_is_an_error() -> None:
    err = rejects("a = 'x' /* no end")
    assert err.position == 9
    assert "unterminated" in err.message


def test_dash_dash_without_line_end_is_two_minus_tokens() -> None:
    assert tokens("a -- x") == [("IDENT", "a"), ("OP", "-"), ("OP", "-"), ("IDENT", "x")]
    # RocketMQ ignores the leftover "- - x"; sievemq reports it and explains the comment rule.
    err = rejects("a = '1' -- x")
    assert err.position == 9
    assert "line break" in err.message


@pytest.mark.parametrize(
    "word", ["NOT", "AND", "OR", "BETWEEN", "IN", "TRUE", "FALSE", "NULL", "IS", "CONTAINS", "STARTSWITH", "ENDSWITH"]
)
def test_keywords_are_case_insensitive(word: str) -> None:
    for spelling in (word, word.lower(), word.capitalize()):
        assert tokens(spelling) == [("KEYWORD", spelling)]


def test_keyword_spellings_parse_alike() -> None:
    assert canon("a between 1 and 5 or not b is not null") == canon("a BETWEEN 1 AND 5 OR NOT b IS NOT NULL")
    assert canon("a Contains 'x' and b startsWith 'y' AND c endswith 'z'") == (
        "(a CONTAINS 'x') AND (b STARTSWITH 'y') AND (c ENDSWITH 'z')"
    )
    assert canon("true") == "TRUE"
    assert canon("Null") == "NULL"


@pytest.mark.parametrize("word", ["LIKE", "ESCAPE", "REGEXP", "NOW", "ALL", "EXISTS", "SELECT", "WHERE"])
def test_other_words_are_plain_identifiers(word: str) -> None:
    assert parse(f"{word} = 'x'") == Compare("=", Property(word), StringLiteral("x"))


@pytest.mark.parametrize("name", ["a", "_", "$", "$a_1", "A1$", "TAGS", "x" * 300, "_$9"])
def test_identifiers(name: str) -> None:
    assert parse(f"{name} = 'v'") == Compare("=", Property(name), StringLiteral("v"))


def test_identifiers_keep_their_spelling() -> None:
    assert parse("tags = 'x'") != parse("TAGS = 'x'")
    assert parse("Tags = 'x'") == Compare("=", Property("Tags"), StringLiteral("x"))


@pytest.mark.parametrize("text", ["a.b = 'x'", "a/b = 'x'", "a:b = 'x'", "é = 'x'", "名前 = 'x'"])
def test_property_names_with_other_characters_cannot_be_referenced(text: str) -> None:
    rejects(text)


def test_a_keyword_is_not_an_identifier() -> None:
    rejects("and = 'x'")
    rejects("a = null = b")


@pytest.mark.parametrize(
    ("literal", "value", "is_long"),
    [
        ("0", 0, False),
        ("7", 7, False),
        ("2147483647", 2147483647, False),
        ("2147483648", 2147483648, True),
        ("5L", 5, False),  # an L suffix does not make a long: the value does
        ("5l", 5, False),
        ("3000000000L", 3000000000, True),
        ("9223372036854775807", 2**63 - 1, True),
    ],
)
def test_integer_literals(literal: str, value: int, is_long: bool) -> None:
    node = parse(f"a = {literal}")
    assert isinstance(node, Compare)
    assert isinstance(node.right, IntLiteral)
    assert node.right.value == value
    assert node.right.is_long is is_long


def test_integer_literal_above_long_max_is_an_error() -> None:
    err = rejects("a = 9223372036854775808")
    assert err.position == 5
    assert "out of range" in err.message


def test_long_min_cannot_be_written() -> None:
    rejects("a = -9223372036854775808")
    node = parse("a = -9223372036854775807")
    assert isinstance(node, Compare)
    assert node.right == Negate(IntLiteral(2**63 - 1))


def test_no_hex_no_octal() -> None:
    assert tokens("0x10") == [("INT", "0"), ("IDENT", "x10")]
    assert tokens("010") == [("INT", "0"), ("INT", "10")]
    assert tokens("007") == [("INT", "0"), ("INT", "0"), ("INT", "7")]
    assert tokens("0L") == [("INT", "0"), ("IDENT", "L")]


@pytest.mark.parametrize(
    ("literal", "value"),
    [
        ("1.5", 1.5),
        ("5.", 5.0),
        (".5", 0.5),
        ("5e2", 500.0),
        ("5E+2", 500.0),
        ("1.5e-3", 0.0015),
        ("5.E1", 50.0),
        (".5e1", 5.0),
        ("00.5", 0.5),
        ("4.9e-324", 5e-324),
        ("1.7976931348623157e308", 1.7976931348623157e308),
    ],
)
def test_float_literals(literal: str, value: float) -> None:
    node = parse(f"a > {literal}")
    assert isinstance(node, Compare)
    assert node.right == FloatLiteral(value)


@pytest.mark.parametrize("literal", ["0.0", "0.", ".0", "0e0", "0.0e5", "1e-400", "2e-324"])
def test_zero_and_underflowing_floats_are_errors(literal: str) -> None:
    err = rejects(f"a > {literal}")
    assert err.position == 5
    assert "write 0" in err.message


def test_infinite_float_is_an_error() -> None:
    assert "too large" in rejects("a > 1e400").message
    assert "too large" in rejects("a > 1.8e308").message


def test_float_lexing_is_longest_match() -> None:
    assert tokens("1.5f") == [("FLOAT", "1.5"), ("IDENT", "f")]
    assert tokens("1e") == [("INT", "1"), ("IDENT", "e")]
    assert tokens("1.5.3") == [("FLOAT", "1.5"), ("FLOAT", ".3")]
    assert tokens("1_000") == [("INT", "1"), ("IDENT", "_000")]
    assert tokens("1e5L") == [("FLOAT", "1e5"), ("IDENT", "L")]


@pytest.mark.parametrize(
    ("literal", "value"),
    [
        ("''", ""),
        ("'it''s'", "it's"),
        ("''''", "'"),
        ("'a\nb'", "a\nb"),
        ("'back\\slash'", "back\\slash"),
        ("'\\u0041'", "\\u0041"),  # no escape decoding
        ("'-- not a comment'", "-- not a comment"),
        ("'/* nor this */'", "/* nor this */"),
        ("'é😀'", "é😀"),
        ("'''x'' -- y'", "'x' -- y"),
    ],
)
def test_string_literals(literal: str, value: str) -> None:
    assert parse(f"a = {literal}") == Compare("=", Property("a"), StringLiteral(value))


def test_string_literal_lexing_is_longest_match() -> None:
    # "'' ' '" could be the empty string then "' '"; the longest match is the one string "' ".
    assert tokens("''' '") == [("STRING", "''' '")]


@pytest.mark.parametrize("text", ["a = 'x", "a = '''", "a = 'x''", "a = 'it''s"])
def test_unterminated_string_is_an_error(text: str) -> None:
    err = rejects(text)
    assert "unterminated string" in err.message
    assert err.position == 5


def test_double_quotes_are_an_error() -> None:
    err = rejects('a = "x"')
    assert err.position == 5
    assert "single quotes" in err.message


@pytest.mark.parametrize(
    ("text", "kinds"),
    [
        ("a<>b", ["IDENT", "<>", "IDENT"]),
        ("a<=b", ["IDENT", "<=", "IDENT"]),
        ("a>=b", ["IDENT", ">=", "IDENT"]),
        ("a<b", ["IDENT", "<", "IDENT"]),
        ("a>b", ["IDENT", ">", "IDENT"]),
        ("a=b", ["IDENT", "=", "IDENT"]),
        ("(a,b)", ["(", "IDENT", ",", "IDENT", ")"]),
        ("+-", ["+", "-"]),
        ("> =", [">", "="]),
        ("==", ["=", "="]),
    ],
)
def test_punctuation(text: str, kinds: list[str]) -> None:
    assert [text if kind == "OP" else kind for kind, text in tokens(text)] == kinds


@pytest.mark.parametrize(
    ("text", "column"),
    [
        ("a != 'x'", 3),
        ("a & b", 3),
        ("a | b", 3),
        ("a = 'x' #", 9),
        ("a * 2 > 1", 3),
        ("a / 2 > 1", 3),
        ("a.b = 1", 2),
        ("a = 'x';", 8),
        ("a IN ['x']", 6),
        ("a = 1 % 2", 7),
    ],
)
def test_illegal_characters(text: str, column: int) -> None:
    err = rejects(text)
    assert err.position == column
    assert "unexpected character" in err.message


def test_greater_equal_with_a_space_is_a_syntax_error() -> None:
    err = rejects("a > = 5")
    assert err.position == 5
    assert "expected an operand" in err.message


def test_double_equals_hint() -> None:
    err = rejects("a == 1")
    assert err.position == 4
    assert "single =" in err.message


# -- 3.3 grammar and precedence -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("NOT a = 'x'", "(NOT a) = 'x'"),
        ("NOT a IS NULL", "(NOT a) IS NULL"),
        ("NOT (a = 'x')", "NOT (a = 'x')"),
        ("NOT NOT a", "NOT (NOT a)"),
        ("a BETWEEN 1 AND 5 AND b = '1'", "(a BETWEEN 1 AND 5) AND (b = '1')"),
        ("a NOT BETWEEN 1 AND 5 OR b", "(a NOT BETWEEN 1 AND 5) OR b"),
        ("a = 1 OR b = 2 AND c = 3", "(a = 1) OR ((b = 2) AND (c = 3))"),
        ("a = 1 AND b = 2 OR c = 3", "((a = 1) AND (b = 2)) OR (c = 3)"),
        ("a = 1 AND b = 2 AND c = 3", "(a = 1) AND (b = 2) AND (c = 3)"),
        ("(a = 1 AND b = 2) AND c = 3", "(a = 1) AND (b = 2) AND (c = 3)"),  # nested AND merged: one node
        ("a > 1 = b < 2", "(a > 1) = (b < 2)"),
        ("a = b IS NULL", "(a = b) IS NULL"),
        ("a IS NULL = TRUE", "(a IS NULL) = TRUE"),
        ("a IS NOT NULL <> FALSE", "(a IS NOT NULL) <> FALSE"),
        ("a = 1 = 2", "(a = 1) = 2"),
        ("a CONTAINS 'x' CONTAINS 'y'", "(a CONTAINS 'x') CONTAINS 'y'"),
        ("a IN ('x') = TRUE", "(a IN ('x')) = TRUE"),
        ("-a > 5", "(-a) > 5"),
        ("- - 5 < a", "(-(-5)) < a"),
        ("+a = 1", "a = 1"),
        ("+ + 5 < a", "5 < a"),
        ("a > -'x'", "a > (-('x'))"),
        ("-a IS NULL", "(-a) IS NULL"),
        ("(a) IN ('x', 'y')", "a IN ('x', 'y')"),
        ("((((a = 1))))", "a = 1"),
        ("a NOT IN ('x')", "a NOT IN ('x')"),
        ("a NOT CONTAINS 'x'", "a NOT CONTAINS 'x'"),
        ("a NOT STARTSWITH 'x'", "a NOT STARTSWITH 'x'"),
        ("a NOT ENDSWITH 'x'", "a NOT ENDSWITH 'x'"),
        ("5 CONTAINS 'x'", "5 CONTAINS 'x'"),
        ("(a > 5) STARTSWITH 'x'", "(a > 5) STARTSWITH 'x'"),
        ("TRUE", "TRUE"),
        ("FALSE", "FALSE"),
        ("NULL", "NULL"),
        ("a", "a"),
        ("(a)", "a"),
        ("NOT a", "NOT a"),
        ("a AND b OR c", "(a AND b) OR c"),
        ("1 = TRUE", "1 = TRUE"),
        ("TRUE = FALSE", "TRUE = FALSE"),
        ("TRUE = a", "TRUE = a"),
        ("a BETWEEN 5 AND 5", "a BETWEEN 5 AND 5"),
        ("a BETWEEN -1 AND -5", "a BETWEEN (-1) AND (-5)"),
        ("a NOT BETWEEN 10 AND 0", "a NOT BETWEEN 10 AND 0"),
        ("a BETWEEN 1 AND 1.5", "a BETWEEN 1 AND 1.5"),
        ("a BETWEEN b AND c", "a BETWEEN b AND c"),
        ("a BETWEEN -(b) AND 2", "a BETWEEN (-b) AND 2"),
        ("a IS NULL IS NULL", "(a IS NULL) IS NULL"),
        ("a <> b", "a <> b"),
    ],
)
def test_grammar_and_precedence(text: str, expected: str) -> None:
    assert canon(text) == expected


def test_bare_property_is_cast_where_rocketmq_casts_it() -> None:
    assert parse("a") == BoolCast(Property("a"))
    assert parse("(a) = 'x'") == Compare("=", Property("a"), StringLiteral("x"))
    assert parse("a AND b") == parse("(a) AND (b)")


def test_positions_are_one_based_columns() -> None:
    node = parse("  a = 'x'")
    assert isinstance(node, Compare)
    assert node.pos == 3
    assert node.right.pos == 7


# -- 3.4 leftovers: RocketMQ ignores them, sievemq rejects them ---------------------------------


@pytest.mark.parametrize(
    ("text", "column", "found"),
    [
        ("a REGEXP '^x'", 3, "REGEXP"),
        ("a NOTIN ('x')", 3, "NOTIN"),
        ("a-b > 1", 2, "-"),
        ("a = 007", 6, "0"),
        ("a = 0x10", 6, "x10"),
        ("a = 010", 6, "10"),
        ("a = 0L", 6, "L"),
        ("a = 1.5f", 8, "f"),
        ("a = 1e", 6, "e"),
        ("a = 1_000", 6, "_000"),
        ("a = '1' )", 9, ")"),
        ("a = '1' b #", 9, "b"),
        ("a = '1' -- x", 9, "-"),
        ("a='1'ANDb='2'", 6, "ANDb"),
        ("a = 1 2", 7, "2"),
        ("a = 1 'x'", 7, "'x'"),
        ("TRUE FALSE", 6, "FALSE"),
        ("(a = 1) (b = 2)", 9, "("),
    ],
)
def test_leftover_tokens_are_rejected(text: str, column: int, found: str) -> None:
    err = rejects(text)
    assert err.position == column
    assert f"unexpected {found} after a complete expression" in err.message
    assert "RocketMQ would silently ignore" in err.message


def test_leftover_message_suggests_splitting_glued_keywords() -> None:
    assert "did you mean 'AND b'" in rejects("a='1'ANDb='2'").message
    assert "did you mean 'or b'" in rejects("a = 1 orb = 2").message


@pytest.mark.parametrize(
    ("text", "column"),
    [
        ("a = 'x' AND", 12),
        ("a = 'x' OR", 11),
        ("NOT", 4),
        ("a = 'x' AND NOT", 16),
        ("a NOT b", 7),
        ("a NOT", 6),
        ("a IS 5", 6),
        ("a IS NOT 5", 10),
        ("a IS", 5),
        ("a BETWEEN 1 OR 5", 13),
        ("a BETWEEN 1", 12),
        ("(a = 1", 7),
        ("a = (b", 7),
        ("a IN", 5),
        ("a IN ('x'", 10),
        ("a IN ('x' 'y')", 11),
        ("a =", 4),
        ("a CONTAINS b", 12),
        ("a CONTAINS 5", 12),
        ("a STARTSWITH", 13),
    ],
)
def test_continuations_that_fail_in_rocketmq_too(text: str, column: int) -> None:
    assert rejects(text).position == column


def test_error_message_format() -> None:
    err = rejects("region IN (5)")
    assert str(err) == "at column 12: expected a string literal after IN (, found 5"
    assert err.position == 12
    assert err.message == "expected a string literal after IN (, found 5"


def test_error_on_a_later_line_names_line_and_column() -> None:
    err = rejects("a = 'x'\n AND b IN (5)")
    assert err.position == 20
    assert str(err).startswith("at column 20 (line 2, column 12): ")
    assert err.with_caret().splitlines()[1:] == ["   AND b IN (5)", "  " + " " * 11 + "^"]


def test_sql_error_is_a_value_error_and_pickles() -> None:
    import pickle

    err = rejects("a IN (5)")
    assert isinstance(err, ValueError)
    copy = pickle.loads(pickle.dumps(err))
    assert (copy.message, copy.position, str(copy)) == (err.message, err.position, str(err))


# -- 3.5 compile-time checks --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "column", "words"),
    [
        # = and <> refuse the NULL literal
        ("a = NULL", 5, "use IS NULL"),
        ("NULL = a", 1, "use IS NULL"),
        ("a <> NULL", 6, "use IS NOT NULL"),
        ("(NULL) = 1", 2, "use IS NULL"),
        ("NULL = NULL", 1, "IS NULL"),
        # a boolean literal on the left of a non-boolean constant
        ("TRUE = 1", 6, "TRUE cannot be compared with the number 1"),
        ("FALSE = 'x'", 7, "cannot be compared"),
        ("TRUE <> 1.5", 6, "cannot be compared"),
        # > >= < <= operands
        ("a > 'x'", 5, "cannot be used with >"),
        ("'x' < a", 1, "cannot be used with <"),
        ("a >= TRUE", 6, "cannot be used with >="),
        ("a <= NULL", 6, "cannot be used with <="),
        ("1 < a < 10", 1, "a condition cannot be used with <"),
        ("NOT a > 5", 1, "a condition cannot be used with >"),
        ("(a > 5) > 1", 2, "a condition"),
        ("a > (b = 1)", 6, "a condition"),
        ("a > EXISTS(b)", 5, "a condition"),
        # BETWEEN
        ("a BETWEEN 'a' AND 'z'", 11, "cannot be used with BETWEEN"),
        ("a BETWEEN NULL AND 5", 11, "NULL cannot be used with BETWEEN"),
        ("a BETWEEN 1 AND NULL", 17, "NULL cannot be used with BETWEEN"),
        ("a NOT BETWEEN NULL AND 5", 15, "NOT BETWEEN"),
        ("a BETWEEN TRUE AND 5", 11, "TRUE cannot be used"),
        ("(a > 1) BETWEEN 1 AND 5", 2, "a condition"),
        ("a BETWEEN 10 AND 0", 11, "reversed"),
        ("a BETWEEN (10) AND 0", 12, "reversed"),
        ("a BETWEEN 1.5 AND 1", 11, "reversed"),
        ("a BETWEEN 2147483648 AND 1", 11, "reversed"),
        ("a BETWEEN 2 AND 1.5", 11, "reversed"),
        # IN
        ("'x' IN ('x')", 1, "IN needs a property name"),
        ("5 IN ('x')", 1, "IN needs a property name"),
        ("(a = 1) IN ('x')", 2, "IN needs a property name"),
        ("-a IN ('x')", 1, "IN needs a property name"),
        ("a NOT IN ('x') NOT IN ('y')", 1, "NOT IN needs a property name"),
        ("a IN ()", 7, "expected a string literal after IN ("),
        ("a IN ('x',)", 11, "expected a string literal after ,"),
        ("a IN (NULL)", 7, "expected a string literal"),
        ("a IN ('x', 5)", 12, "expected a string literal"),
        ("a IN 'x'", 6, "expected ( after IN"),
        ("a NOT IN (b)", 11, "after NOT IN ("),
        # the selector and AND/OR/NOT operands must be conditions
        ("5", 1, "the number 5 is not a condition"),
        ("'x'", 1, "the string literal 'x' is not a condition"),
        ("-a", 1, "a negated value is not a condition"),
        ("-5", 1, "not a condition"),
        ("1.5", 1, "not a condition"),
        ("(5)", 2, "not a condition"),
        ("a AND 5", 7, "AND needs a comparison"),
        ("5 OR a", 1, "OR needs a comparison"),
        ("NOT 'x'", 5, "NOT needs a comparison"),
        ("NOT -a", 5, "NOT needs"),
        # empty
        ("", 1, "empty"),
        ("   ", 1, "empty"),
        ("/* only a comment */", 1, "empty"),
        ("-- only a comment\n", 1, "empty"),
    ],
)
def test_compile_time_errors(text: str, column: int, words: str) -> None:
    err = rejects(text)
    assert words in err.message
    assert err.position == column


@pytest.mark.parametrize(
    "text",
    [
        "1 = TRUE",
        "TRUE = FALSE",
        "TRUE = a",
        "a = TRUE",
        "'x' = TRUE",
        "TRUE = -1",  # a negated constant is not a constant
        "a > -'x'",
        "a > -TRUE",
        "a = b",
        "'x' = 'y'",
        "5 = 5",
        "NULL IS NULL",
        "NULL IS NOT NULL",
        "5 IS NULL",
        "a BETWEEN -10 AND -20",
        "a BETWEEN 1 AND 1",
        "a NOT BETWEEN 5 AND 1",
        "TRUE AND NULL OR FALSE",
        "(a = 1) = (b = 2)",
        "-(a > 5) > 1",
    ],
)
def test_accepted_odd_expressions(text: str) -> None:
    parse(text)


def test_round_trip_keeps_the_tree() -> None:
    for text in ["a = 1 AND NOT b OR c BETWEEN -1 AND 2.5 AND d NOT IN ('x', 'it''s')", "TRUE = (a IS NULL)"]:
        tree = parse(text)
        assert parse(to_sql(tree)) == tree


def test_sql_error_is_raised_not_other_exceptions() -> None:
    for text in ["(" * 10 + "a" + ")" * 9, "a = 'x' AND", "a IN ('" + "x', '" * 5]:
        with pytest.raises(SqlError):
            parse(text)
