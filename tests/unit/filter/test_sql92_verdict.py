"""``Selector.verdict``: the broker's matcher that tells an evaluation error (None) from FALSE or NULL (False), for
the ``sql`` ``error`` count (docs/metrics.md §4). It agrees with ``matcher`` on what is delivered, and says None
only where RocketMQ's evaluator throws too."""

from __future__ import annotations

import pytest

from sievemq.filter.sql92 import SqlEvaluationError, compile_selector

CASES: list[tuple[str, dict[str, str], bool | None]] = [
    ("amount > 100", {"amount": "250"}, True),
    ("amount > 100", {"amount": "5"}, False),
    ("amount > 100", {}, False),  # NULL: not delivered, no error
    ("amount > 100", {"amount": "lots"}, None),  # Integer.valueOf("lots") throws in RocketMQ
    ("amount > 1.5", {"amount": "x"}, None),  # Double.valueOf
    ("amount = 3", {"amount": "3.0"}, None),  # Integer.valueOf("3.0") throws
    ("amount BETWEEN 1 AND 5", {"amount": "x"}, None),
    ("region = 'eu' AND amount > 100", {"region": "eu", "amount": "lots"}, None),
    ("region = 'eu' AND amount > 100", {"region": "us", "amount": "lots"}, False),  # FALSE AND ...: not evaluated
    ("region = 'eu' OR amount > 100", {"region": "eu", "amount": "lots"}, True),  # TRUE OR ...: not evaluated
    ("amount > 100 OR region = 'eu'", {"region": "eu", "amount": "lots"}, None),
    ("region IN ('eu', 'us')", {"region": "eu"}, True),
    ("NOT (amount > 100)", {"amount": "lots"}, None),
]


@pytest.mark.parametrize(("expression", "props", "verdict"), CASES)
def test_verdict(expression: str, props: dict[str, str], verdict: bool | None) -> None:
    selector = compile_selector(expression)
    assert selector.verdict(props) is verdict
    assert selector.matcher(props) is (verdict is True), "the same messages are delivered"
    if verdict is None:
        with pytest.raises(SqlEvaluationError):
            selector.evaluate_tristate(props)  # RocketMQ's evaluator throws there too


def test_a_property_map_that_is_not_one_is_an_error_not_a_crash() -> None:
    assert compile_selector("a > 5").verdict(None) is None  # type: ignore[arg-type]
