"""A straightforward tree-walking interpreter of selectors: the executable specification.

It follows RocketMQ's evaluator class by class (``LogicExpression``, ``ComparisonExpression``,
``UnaryExpression``, ``UnaryInExpression``) on tagged Java values (:mod:`.values`), with no
shortcuts: binary AND/OR folded left to right, BETWEEN expanded into its two comparisons, the
operand of BETWEEN evaluated twice. The compiler (:mod:`.compiler`) is checked against it.

Three-valued results are ``True``, ``False`` and ``None`` (NULL / unknown). An evaluation error
(what Java throws) is :class:`SqlEvaluationError`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from sievemq.filter.sql92.ast import (
    And,
    Between,
    BoolCast,
    BoolLiteral,
    Compare,
    Exists,
    Expr,
    FloatLiteral,
    In,
    IntLiteral,
    IsNull,
    Like,
    Negate,
    Not,
    NullLiteral,
    Or,
    Property,
    StringLiteral,
    StringTest,
)
from sievemq.filter.sql92.errors import SqlEvaluationError
from sievemq.filter.sql92.like import LikePattern
from sievemq.filter.sql92.limits import recursion_headroom
from sievemq.filter.sql92.values import (
    JavaDouble,
    JavaInt,
    JavaLong,
    JavaValue,
    java_compare,
    java_equals,
    parse_java_double,
    wrap_int32,
    wrap_int64,
)

__all__ = ["reference_evaluate"]


def reference_evaluate(node: Expr, props: Mapping[str, str], *, strict: bool = False) -> bool | None:
    """Evaluate a parsed selector on a property map, three-valued.

    Returns ``True``, ``False`` or ``None`` (NULL). An evaluation error (RocketMQ's evaluator would
    throw) gives ``None`` — the message is not delivered either way — unless ``strict`` is true, in
    which case :class:`SqlEvaluationError` is raised.
    """
    recursion_headroom()
    try:
        result = _Evaluator(props).eval(node)
    except SqlEvaluationError:
        if strict:
            raise
        return None
    # RocketMQ: "ret == null || !(ret instanceof Boolean)" means no match.
    return result if isinstance(result, bool) else None


def _and(lv: JavaValue, right: Callable[[], JavaValue]) -> JavaValue:
    # LogicExpression.createAND
    if lv is False:
        return False
    rv = right()
    if rv is False:
        return False
    if lv is None or rv is None:
        return None
    return True


def _or(lv: JavaValue, right: Callable[[], JavaValue]) -> JavaValue:
    # LogicExpression.createOR
    if lv is True:
        return True
    rv = right()
    if rv is True:
        return True
    if lv is None or rv is None:
        return None
    return False


def _not(value: JavaValue) -> JavaValue:
    # UnaryExpression.createNOT: "(Boolean) right.evaluate(context)"
    if value is None:
        return None
    if not isinstance(value, bool):
        raise SqlEvaluationError("NOT applied to a non-boolean (Java ClassCastException)")
    return not value


class _Evaluator:
    def __init__(self, props: Mapping[str, str]) -> None:
        self.props = props

    def eval(self, node: Expr) -> JavaValue:
        match node:
            case StringLiteral(value=v):
                return v
            case IntLiteral(value=v):
                return JavaLong(v) if node.is_long else JavaInt(v)
            case FloatLiteral(value=v):
                return JavaDouble(v)
            case BoolLiteral(value=v):
                return v
            case NullLiteral():
                return None
            case Property(name=name):
                return self.props.get(name)
            case Negate(operand=o):
                return self.negate(self.eval(o))
            case Not(operand=o):
                return _not(self.eval(o))
            case BoolCast(operand=o):
                value = self.eval(o)
                if value is None:
                    return None
                return value if isinstance(value, bool) else False
            case And(operands=ops):
                acc = self.eval(ops[0])
                for op in ops[1:]:
                    acc = _and(acc, lambda op=op: self.eval(op))  # type: ignore[misc]
                return acc
            case Or(operands=ops):
                acc = self.eval(ops[0])
                for op in ops[1:]:
                    acc = _or(acc, lambda op=op: self.eval(op))  # type: ignore[misc]
                return acc
            case Compare(op="=", left=left, right=right):
                return self.equal(left, right)
            case Compare(op="<>", left=left, right=right):
                return _not(self.equal(left, right))
            case Compare(op=op, left=left, right=right):
                return self.order(op, left, right)
            case Between(operand=o, low=lo, high=hi, negated=False):
                return _and(self.order(">=", o, lo), lambda: self.order("<=", o, hi))
            case Between(operand=o, low=lo, high=hi, negated=True):
                return _or(self.order("<", o, lo), lambda: self.order(">", o, hi))
            case In(operand=o, values=values, negated=neg):
                value = self.eval(o)
                if value is None or not isinstance(value, str):
                    return None
                return (value in values) != neg
            case IsNull(operand=o, negated=neg):
                # createIsNull is doCreateEqual(x, NULL); IS NOT NULL wraps it in NOT.
                return (self.eval(o) is None) != neg
            case StringTest(op=op, operand=o, value=search, negated=neg):
                if search == "":
                    return False
                value = self.eval(o)
                if not isinstance(value, str):
                    return False
                if op == "CONTAINS":
                    found = search in value
                elif op == "STARTSWITH":
                    found = value.startswith(search)
                else:
                    found = value.endswith(search)
                return found != neg
            case Like(operand=o, pattern=pattern, escape=esc, negated=neg):
                value = self.eval(o)
                if value is None:
                    return None
                matched = isinstance(value, str) and LikePattern.parse(pattern, esc).matches(value)
                return matched != neg
            case Exists(name=name):
                return self.props.get(name) is not None
        raise TypeError(f"not a selector node: {node!r}")  # pragma: no cover

    @staticmethod
    def negate(value: JavaValue) -> JavaValue:
        # UnaryExpression.createNegate: numbers are negated, anything else gives null.
        if isinstance(value, JavaInt):
            return JavaInt(wrap_int32(-value.value))
        if isinstance(value, JavaLong):
            return JavaLong(wrap_int64(-value.value))
        if isinstance(value, JavaDouble):
            return JavaDouble(-value.value)
        return None

    def equal(self, left: Expr, right: Expr) -> JavaValue:
        # ComparisonExpression.doCreateEqual
        lv = self.eval(left)
        rv = self.eval(right)
        if (lv is None) != (rv is None):
            return None if lv is None else False
        if lv is None or rv is None:  # both null: "lv == rv"
            return True
        if java_equals(lv, rv):
            return True
        return java_compare(lv, rv) == 0

    def order(self, op: str, left: Expr, right: Expr) -> JavaValue:
        # ComparisonExpression.evaluate for > >= < <=
        lv = self.eval(left)
        if lv is None:
            return None
        rv = self.eval(right)
        if rv is None:
            return None
        if isinstance(lv, str) and isinstance(rv, str):
            lv = JavaDouble(parse_java_double(lv))
            rv = JavaDouble(parse_java_double(rv))
        answer = java_compare(lv, rv)
        if op == ">":
            return answer > 0
        if op == ">=":
            return answer >= 0
        if op == "<":
            return answer < 0
        return answer <= 0
