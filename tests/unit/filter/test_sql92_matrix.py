"""Exhaustive agreement matrices: compiler vs reference on every small case of a kind.

Complements the random tests with the combinations random generation finds too rarely:
every comparison operator against every literal type, on both sides, over a corpus of property
values; every property-vs-property pair; and every small AND/OR/NOT structure over TRUE, FALSE,
NULL and a failing atom (where RocketMQ's short-circuit and exception rules interact).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from functools import partial

import pytest

from sievemq.filter.sql92 import SqlError, SqlEvaluationError, compile_selector, parse, reference_evaluate

VALUES = [
    None,
    "",
    "0",
    "5",
    "-5",
    "+5",
    "05",
    "6",
    "4",
    "5.0",
    "5.5",
    " 5",
    "5 ",
    "1e3",
    "2147483647",
    "2147483648",
    "-2147483648",
    "3000000000",
    "9007199254740993",
    "9223372036854775807",
    "9223372036854775808",
    "NaN",
    "-NaN",
    "Infinity",
    "-Infinity",
    "-0.0",
    "0.0",
    "0x1p1",
    "5d",
    "5f",
    "1_0",
    "\u0661\u0660",
    "\uff15",
    "true",
    "TRUE",
    "false",
    "yes",
    "x",
]
LITERALS = [
    "0",
    "5",
    "-5",
    "2147483647",
    "2147483648",
    "-2147483648",
    "3000000000",
    "9007199254740993",
    "5.0",
    "-5.5",
    "1e300",
    "9007199254740992.0",
    "'5'",
    "'x'",
    "''",
    "TRUE",
    "FALSE",
    "NULL",
    "-'x'",
    "-a2",
]
OPS = ["=", "<>", "<", "<=", ">", ">="]


def _result(evaluate: Callable[[], object]) -> object:
    try:
        return evaluate()
    except SqlEvaluationError:
        return "ERROR"


def _agree(text: str, props_list: list[dict[str, str]]) -> None:
    try:
        tree = parse(text)
    except SqlError:
        return  # a compile-time error: nothing to evaluate
    selector = compile_selector(text)
    for props in props_list:
        expected = _result(partial(reference_evaluate, tree, props, strict=True))
        got = _result(partial(selector.evaluate_tristate, props))
        assert got == expected, f"{text} with {props}\n{selector.python_source}"
        assert selector.evaluate(props) is (expected is True), f"{text} with {props}"


def _props(value: str | None) -> dict[str, str]:
    return {} if value is None else {"a": value}


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("literal", LITERALS)
def test_property_against_every_literal(op: str, literal: str) -> None:
    props_list = [_props(v) for v in VALUES]
    _agree(f"a {op} {literal}", props_list)
    _agree(f"{literal} {op} a", props_list)


@pytest.mark.parametrize("op", OPS)
def test_property_against_property(op: str) -> None:
    props_list = []
    for left, right in itertools.product(VALUES, repeat=2):
        props: dict[str, str] = {}
        if left is not None:
            props["a"] = left
        if right is not None:
            props["b"] = right
        props_list.append(props)
    _agree(f"a {op} b", props_list)


@pytest.mark.parametrize("op", OPS)
def test_literal_against_literal(op: str) -> None:
    for left, right in itertools.product(LITERALS, repeat=2):
        _agree(f"{left} {op} {right}", [{}, {"a2": "5"}])


@pytest.mark.parametrize("negated", ["", "NOT "])
@pytest.mark.parametrize("low", ["1", "5", "5.0", "-1", "3000000000", "b"])
@pytest.mark.parametrize("high", ["5", "6", "5.5", "3000000000", "c"])
def test_between(negated: str, low: str, high: str) -> None:
    props_list = [{"a": v, "b": "4", "c": "6"} for v in VALUES if v is not None] + [{}, {"a": "5"}]
    _agree(f"a {negated}BETWEEN {low} AND {high}", props_list)


ATOMS = ["TRUE", "FALSE", "NULL", "(e > 5)", "n"]
# With e = 'x', "(e > 5)" throws; n is missing, so the bare property n is NULL.
LOGIC_PROPS = [{"e": "x"}, {"e": "6"}, {"e": "4"}, {}, {"e": "6", "n": "1"}]


def _level1() -> list[str]:
    out = [f"NOT {a}" for a in ATOMS]
    for x, y in itertools.product(ATOMS, repeat=2):
        out += [f"({x} AND {y})", f"({x} OR {y})"]
    for x, y, z in itertools.product(ATOMS, repeat=3):
        out += [f"({x} AND {y} AND {z})", f"({x} OR {y} OR {z})"]
    return out


LEVEL1 = _level1()


@pytest.mark.parametrize("atom", ATOMS)
def test_logic_combinations(atom: str) -> None:
    texts = [f"{atom} AND {e}" for e in LEVEL1] + [f"{e} OR {atom}" for e in LEVEL1]
    texts += [f"{atom} OR {e}" for e in LEVEL1] + [f"{e} AND {atom}" for e in LEVEL1]
    texts += [f"NOT ({e})" for e in LEVEL1 if atom == "TRUE"]
    texts += [f"({e}) IS NULL" for e in LEVEL1 if atom == "TRUE"]
    texts += [f"({e}) = {atom}" for e in LEVEL1 if atom in ("TRUE", "FALSE")]
    for text in texts:
        _agree(text, LOGIC_PROPS)
