"""Public API, limits, the compile cache, the documented differences, generated-code safety."""

from __future__ import annotations

import pytest

import sievemq.filter.sql92 as sql92
from sievemq.filter.sql92 import (
    CACHE_SIZE,
    DIFFERENCES_FROM_ROCKETMQ,
    MAX_DEPTH,
    MAX_IN_LIST,
    MAX_LENGTH,
    MAX_NESTING,
    Selector,
    SqlError,
    SqlEvaluationError,
    clear_selector_cache,
    compile_selector,
    parse,
    reference_evaluate,
)
from sievemq.filter.sql92.ast import Compare, Or, StringLiteral, depth
from sievemq.filter.sql92.compiler import _cache
from tests.unit.filter.helpers import check, rejects


def test_selector_attributes() -> None:
    text = "region = 'eu' AND amount > 100 AND kind IN ('a','b')"
    sel = compile_selector(text)
    assert isinstance(sel, Selector)
    assert sel.text == text
    assert sel.ast == parse(text)
    assert sel.properties_used == frozenset({"region", "amount", "kind"})
    assert sel.evaluate({"region": "eu", "amount": "250", "kind": "a"}) is True
    assert sel.evaluate({"region": "eu", "amount": "50", "kind": "a"}) is False
    assert sel.evaluate({"region": "eu", "amount": "lots", "kind": "a"}) is False
    assert sel.evaluate({}) is False
    assert sel.evaluate_tristate({}) is None
    with pytest.raises(SqlEvaluationError):
        sel.evaluate_tristate({"region": "eu", "amount": "lots", "kind": "a"})
    assert "def _match" in sel.python_source
    assert repr(sel) == f"Selector({text!r})"


def test_properties_used_includes_exists_and_every_branch() -> None:
    sel = compile_selector("EXISTS(x) OR (a BETWEEN b AND c) OR NOT d OR e IN ('1') OR -f IS NULL OR g LIKE 'h'")
    assert sel.properties_used == frozenset("xabcdefg")
    assert compile_selector("TRUE").properties_used == frozenset()


def test_reference_evaluate_api() -> None:
    tree = parse("a > 5")
    assert reference_evaluate(tree, {"a": "6"}) is True
    assert reference_evaluate(tree, {"a": "4"}) is False
    assert reference_evaluate(tree, {}) is None
    assert reference_evaluate(tree, {"a": "x"}) is None  # an error is "not delivered" too
    with pytest.raises(SqlEvaluationError):
        reference_evaluate(tree, {"a": "x"}, strict=True)


# -- limits ----------------------------------------------------------------------------------------


def test_length_limit() -> None:
    ok = "a = '" + "x" * (MAX_LENGTH - 6) + "'"
    assert len(ok) == MAX_LENGTH
    compile_selector(ok)
    err = rejects(ok + " ")
    assert err.position == MAX_LENGTH + 1
    assert f"{MAX_LENGTH + 1} characters long; the limit is {MAX_LENGTH}" in err.message


@pytest.mark.parametrize("levels", [100, 500, 1000, MAX_DEPTH, MAX_NESTING])
def test_deep_parentheses_match_like_rocketmq(levels: int) -> None:
    """RocketMQ's parser accepts any nesting its stack allows; parentheses leave no node, so the tree is flat."""
    text = "(" * levels + "a = '1'" + ")" * levels
    sel = compile_selector(text)
    assert sel.evaluate({"a": "1"}) and not sel.evaluate({"a": "2"}) and not sel.evaluate({})
    assert reference_evaluate(sel.ast, {"a": "1"}) is True


def test_parenthesis_nesting_limit() -> None:
    compile_selector("(" * MAX_NESTING + "a = 1" + ")" * MAX_NESTING)
    err = rejects("(" * (MAX_NESTING + 1) + "a = 1" + ")" * (MAX_NESTING + 1))
    assert err.position == MAX_NESTING + 1
    assert f"more than {MAX_NESTING} parentheses" in err.message


@pytest.mark.parametrize("levels", [100, 999, 1000])
def test_deep_not_and_unary_minus(levels: int) -> None:
    sel = compile_selector("NOT " * levels + "(a = '1')")
    want = levels % 2 == 0
    assert sel.evaluate({"a": "1"}) is want and sel.evaluate({"a": "2"}) is not want
    assert sel.evaluate_tristate({}) is None
    assert reference_evaluate(sel.ast, {"a": "1"}) is want
    neg = compile_selector("a > " + "- " * levels + "5")  # -(-(...5)): +5 or -5
    assert neg.evaluate({"a": "0"}) is (levels % 2 == 1)
    assert neg.evaluate({"a": "6"})


def test_unary_depth_limit() -> None:
    """NOT and unary minus add a tree level each: past MAX_DEPTH the tree is too high (unary plus adds none)."""
    compile_selector("NOT " * (MAX_DEPTH - 2) + "a")  # Not^(MAX_DEPTH-2)(BoolCast(Property)): MAX_DEPTH levels
    err = rejects("NOT " * MAX_DEPTH + "a")
    assert f"nested more than {MAX_DEPTH} levels" in err.message and err.position == 4 * MAX_DEPTH + 1  # at `a`
    err = rejects("a > " + "- " * (MAX_DEPTH + 1) + "5")
    assert "nested more than" in err.message and err.position == 5 + 2 * (MAX_DEPTH - 1)
    check("a > " + "+ " * (MAX_NESTING - 1) + "5", {"a": "6"}, True)
    assert f"more than {MAX_NESTING} parentheses" in rejects("+ " * (MAX_NESTING + 1) + "a").message


def test_tree_height_limit() -> None:
    # A left-nested comparison chain builds a tall tree without any parentheses.
    compile_selector("a = 1" + " = TRUE" * (MAX_DEPTH - 2))
    err = rejects("a = 1" + " = TRUE" * MAX_DEPTH)
    assert f"nested more than {MAX_DEPTH} levels" in err.message


def test_ten_thousand_term_chains_compile_and_evaluate() -> None:
    ors = " OR ".join(f"p{i} = '{i}'" for i in range(10_000))
    sel = compile_selector(ors)
    assert isinstance(sel.ast, Or) and len(sel.ast.operands) == 10_000
    for props in ({"p9999": "9999"}, {"p0": "0"}, {"p5": "x"}, {}):
        assert sel.evaluate_tristate(props) == reference_evaluate(sel.ast, props)
    assert sel.evaluate({"p9999": "9999"}) and not sel.evaluate({"p1": "x"})
    ands = " AND ".join(f"a > {i}" for i in range(10_000))
    sel = compile_selector(ands)
    assert sel.evaluate({"a": "10000"}) and not sel.evaluate({"a": "9999"})
    check(ands, {"a": "x"}, "ERROR")


def test_right_nested_chains_are_flattened() -> None:
    """Machine-built ``(... OR (... OR (...)))`` is one n-ary OR: its height does not grow with its length."""
    text = "a = '0'"
    for i in range(1, 1500):
        text = f"a = '{i}' OR ({text})"
    sel = compile_selector(text)
    assert isinstance(sel.ast, Or) and len(sel.ast.operands) == 1500 and depth(sel.ast) == 3
    assert sel.evaluate({"a": "0"}) and sel.evaluate({"a": "1499"}) and not sel.evaluate({"a": "1500"})
    mixed = "a = '0'"
    for i in range(1, 600):  # alternating AND / OR cannot be merged: 600 levels of tree, still fine
        mixed = f"a <> '{i}' {'AND' if i % 2 else 'OR'} ({mixed})"
    sel = compile_selector(mixed)
    for props in ({"a": "0"}, {"a": "5"}, {}, {"a": "599"}):
        assert sel.evaluate_tristate(props) == reference_evaluate(sel.ast, props)


def test_deep_inputs_never_hit_python_recursion() -> None:
    for text in ["(" * (2 * MAX_NESTING), "NOT " * (MAX_DEPTH + 5) + "a", "-" * (2 * MAX_DEPTH) + "1",
                 "a" + " = a" * (MAX_DEPTH + 5), "((((" * MAX_NESTING, "NOT (" * MAX_NESTING]:  # fmt: skip
        with pytest.raises(SqlError):
            compile_selector(text)


def test_in_list_limit() -> None:
    values = "'', " * (MAX_IN_LIST - 1) + "'x'"
    sel = compile_selector(f"a IN ({values})")
    assert sel.evaluate({"a": "x"})
    assert sel.evaluate({"a": ""})
    err = rejects(f"a IN ({values}, 'y')")
    assert "more than 1000 values" in err.message
    assert err.position == len(f"a IN ({values}") + 1


def test_long_flat_expressions_compile() -> None:
    # 4 KiB of ANDs/ORs: flat n-ary nodes, so no depth problem and no deep generated code.
    many_ands = " AND ".join(f"p{i} = '{i}'" for i in range(300))[:MAX_LENGTH].rsplit(" AND ", 1)[0]
    sel = compile_selector(many_ands)
    count = many_ands.count(" AND ") + 1
    props = {f"p{i}": str(i) for i in range(count)}
    assert sel.evaluate(props)
    check(many_ands, props, True)
    many_ors = " OR ".join(f"p{i} > {i}" for i in range(400))[:MAX_LENGTH].rsplit(" OR ", 1)[0]
    check(many_ors, {"p0": "1"}, True)
    check(many_ors, {"p0": "0", "p1": "x"}, "ERROR")


def test_deeply_nested_generated_code_is_split_into_functions() -> None:
    text = "(" * 30 + "a = 1" + " = TRUE)" * 30
    check(text, {"a": "1"}, True)
    check(text, {}, None)
    nested = "NOT " * 60 + "(a > 5)"
    check(nested, {"a": "6"}, True)
    check(nested, {"a": "x"}, "ERROR")
    chain = "(a > 1) = " * 40 + "(b > 1)"  # ((((a > 1) = (a > 1)) = ...) = (b > 1)
    check(chain, {"a": "2", "b": "2"}, True)
    check(chain, {"a": "2", "b": "0"}, False)
    check(chain, {"a": "x", "b": "0"}, "ERROR")


# -- the cache ---------------------------------------------------------------------------------------


def test_cache_returns_the_same_selector() -> None:
    clear_selector_cache()
    first = compile_selector("a = 'cache-test'")
    assert compile_selector("a = 'cache-test'") is first
    assert compile_selector("a  = 'cache-test'") is not first  # keyed by the exact text


def test_cache_remembers_failures_and_raises_fresh_errors() -> None:
    clear_selector_cache()
    with pytest.raises(SqlError) as first:
        compile_selector("a IN (5)")
    assert isinstance(_cache["a IN (5)"], SqlError)
    with pytest.raises(SqlError) as second:
        compile_selector("a IN (5)")
    assert first.value is not second.value
    assert str(first.value) == str(second.value)


def test_cache_is_bounded_lru() -> None:
    clear_selector_cache()
    keep = compile_selector("keep = '1'")
    for i in range(CACHE_SIZE - 1):
        compile_selector(f"a = '{i}'")
    assert compile_selector("keep = '1'") is keep  # refreshed: now the most recent
    compile_selector("one_more = '1'")
    assert len(_cache) == CACHE_SIZE
    assert "a = '0'" not in _cache
    assert "keep = '1'" in _cache


# -- documentation of the differences -------------------------------------------------------------


def test_differences_are_documented_and_exported() -> None:
    assert len(DIFFERENCES_FROM_ROCKETMQ) >= 4
    doc = sql92.__doc__ or ""
    assert "Differences from RocketMQ" in doc
    for entry in DIFFERENCES_FROM_ROCKETMQ:
        assert entry in doc
    joined = " ".join(DIFFERENCES_FROM_ROCKETMQ)
    for topic in ("left over", "LIKE", "EXISTS", f"{MAX_LENGTH:,}", f"{MAX_NESTING:,}", f"{MAX_DEPTH:,}", "1,000"):
        assert topic in joined


@pytest.mark.parametrize("text", ["a = 007", "a = 0x10", "a = 1.5f", "a = 1e", "a = 0L", "a = '1' )", "a = '1' b #"])
def test_every_leftover_example_in_the_differences_is_rejected(text: str) -> None:
    assert text in DIFFERENCES_FROM_ROCKETMQ[0]
    rejects(text)


# -- generated code safety ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "literal",
    [
        "'); import os; os.system(''echo pwned''); ('",
        "'x''; raise SystemExit #'",
        '\'"""\'',
        "'{__import__}'",
        "'\n'",
    ],
)
def test_string_literals_cannot_inject_code(literal: str) -> None:
    tree = parse(f"a = {literal}")
    assert isinstance(tree, Compare) and isinstance(tree.right, StringLiteral)
    value = tree.right.value
    sel = compile_selector(f"a = {literal} OR a CONTAINS {literal} OR a IN ({literal}) OR a LIKE {literal}")
    assert sel.evaluate({"a": value}) is True
    assert sel.evaluate({"a": "other"}) is False


def test_generated_code_has_no_builtins() -> None:
    sel = compile_selector("a = 'x'")
    assert "__import__" not in sel.python_source
    assert sel.matcher.__globals__["__builtins__"] == {"Exception": Exception}
