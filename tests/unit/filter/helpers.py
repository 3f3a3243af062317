"""Shared checks for the SQL92 tests: every case runs through the compiler AND the reference."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import pytest

from sievemq.filter.sql92 import SqlError, SqlEvaluationError, compile_selector, parse, reference_evaluate

ERROR: Final = "ERROR"
"""Expected outcome: RocketMQ's evaluator throws (the message is not delivered)."""

Outcome = bool | None | str


def outcome(expr: str, props: Mapping[str, str]) -> Outcome:
    """The reference interpreter's three-valued result, or ERROR."""
    try:
        return reference_evaluate(parse(expr), props, strict=True)
    except SqlEvaluationError:
        return ERROR


def check(expr: str, props: Mapping[str, str], expected: Outcome) -> None:
    """Assert one evaluation outcome in every evaluator: reference, compiled (three-valued) and
    the broker's verdict (``evaluate``: True only for TRUE)."""
    assert outcome(expr, props) == expected, "reference interpreter"
    selector = compile_selector(expr)
    try:
        compiled: Outcome = selector.evaluate_tristate(props)
    except SqlEvaluationError:
        compiled = ERROR
    assert compiled == expected, f"compiled three-valued\n{selector.python_source}"
    assert selector.evaluate(props) is (expected is True), f"compiled verdict\n{selector.python_source}"
    assert (reference_evaluate(parse(expr), props) is True) is (expected is True)


def rejects(expr: str) -> SqlError:
    """Assert the expression does not compile; return the error."""
    with pytest.raises(SqlError) as info:
        compile_selector(expr)
    with pytest.raises(SqlError):
        parse(expr)
    return info.value
