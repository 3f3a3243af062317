"""The SQL92 lint (filter/sql92/lint.py): comparisons of two bare properties are found wherever they stand, and
nothing else is reported; the selector's meaning is untouched (it still delivers a message with neither)."""

from __future__ import annotations

import pytest

from sievemq.filter.sql92 import compile_selector, parse
from sievemq.filter.sql92.lint import property_comparisons


@pytest.mark.parametrize(
    ("expression", "found"),
    [
        ("region = eu", [("region", "=", "eu", 1)]),
        ("a = 'x' AND (b <> c OR d > 5)", [("b", "<>", "c", 14)]),
        ("x >= y AND NOT (p < q)", [("x", ">=", "y", 1), ("p", "<", "q", 17)]),
        ("region = 'eu'", []),
        ("a > 5 AND b IN ('x') AND c BETWEEN 1 AND 2", []),
        ("a IS NULL OR EXISTS(b)", []),
    ],
)
def test_comparisons_of_two_properties(expression: str, found: list[tuple[str, str, str, int]]) -> None:
    got = property_comparisons(parse(expression))
    assert [(c.left, c.op, c.right, c.pos) for c in got] == found


def test_the_hint_says_what_happens_and_what_to_write() -> None:
    (c,) = property_comparisons(parse("region = eu"))
    assert "NULL = NULL is TRUE" in c.hint() and "region = 'eu'" in c.hint()
    assert compile_selector("region = eu").evaluate({}) is True  # the semantics stay RocketMQ's
