"""Recursive-descent parser for RocketMQ SQL92 selectors (docs/protocol/sql92.md §3-§5), on an explicit stack.

Each grammar rule is a generator that yields the rules it needs (``_run`` keeps them on a list), so nesting costs
heap memory, never Python's recursion limit (docs/protocol/sql92.md §6, ``limits.py``).

Grammar (RocketMQ's, in precedence order, loosest first; all loops left-associative)::

    selector   := or_expr EOF                  -- RocketMQ does not require EOF (see below)
    or_expr    := and_expr ( OR and_expr )*
    and_expr   := eq_expr ( AND eq_expr )*
    eq_expr    := cmp_expr ( "=" cmp_expr | "<>" cmp_expr | IS NULL | IS NOT NULL )*
    cmp_expr   := unary ( (">" | ">=" | "<" | "<=") unary
                        | [NOT] (CONTAINS | STARTSWITH | ENDSWITH) string
                        | [NOT] BETWEEN unary AND unary
                        | [NOT] IN "(" string ("," string)* ")"
                        | [NOT] LIKE string [ESCAPE string]          -- sievemq extension
                        )*
    unary      := "+" unary | "-" unary | NOT unary | primary
    primary    := literal | EXISTS "(" identifier ")"                -- sievemq extension
                | identifier | "(" or_expr ")"
    literal    := string | integer | float | TRUE | FALSE | NULL

``NOT`` binds tighter than every comparison: ``NOT a = 'x'`` is ``(NOT a) = 'x'``.

Compile-time checks are RocketMQ's (``ComparisonExpression.create*``, ``asBooleanExpression``):
the whole selector and every operand of AND/OR/NOT must be boolean (a bare property is cast);
``=``/``<>`` refuse the NULL literal and ``TRUE = <non-boolean constant>``; ``> >= < <=`` and
BETWEEN accept only numbers, properties and non-boolean expressions (a negated string is fine);
constant BETWEEN bounds must be in order; IN needs a property on its left.

Deliberate difference: everything must be consumed. RocketMQ stops at the first token that cannot
continue the expression and silently ignores the rest; sievemq reports it.
"""

from __future__ import annotations

import math
from collections.abc import Generator

from sievemq.filter.sql92.ast import (
    And,
    Between,
    BoolCast,
    BoolLiteral,
    Compare,
    CompareOp,
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
    StringTestOp,
    children,
    is_boolean,
    is_constant,
    merge_nested_logic,
    to_sql,
)
from sievemq.filter.sql92.errors import SqlError, SqlEvaluationError
from sievemq.filter.sql92.lexer import Lexer, Token
from sievemq.filter.sql92.like import LikePattern, LikePatternError
from sievemq.filter.sql92.limits import MAX_DEPTH, MAX_IN_LIST, MAX_LENGTH, MAX_NESTING, recursion_headroom
from sievemq.filter.sql92.values import INT64_MAX, JavaDouble, JavaInt, JavaLong, JavaValue, java_compare

__all__ = ["MAX_DEPTH", "MAX_IN_LIST", "MAX_LENGTH", "MAX_NESTING", "parse"]

_ORDER_OPS = (">", ">=", "<", "<=")
_STRING_TESTS: tuple[StringTestOp, ...] = ("CONTAINS", "STARTSWITH", "ENDSWITH")
_AFTER_NOT = "BETWEEN, IN, CONTAINS, STARTSWITH, ENDSWITH or LIKE"
_DOUBLE_MIN_VALUE = 5e-324  # Java Double.MIN_VALUE (printed by Java as 4.9E-324)


def parse(text: str) -> Expr:
    """Parse a selector into its syntax tree, applying every RocketMQ compile-time check.

    Raises :class:`SqlError` (with ``position`` and ``message``) for anything RocketMQ rejects,
    for text left over after a complete expression, and beyond the limits
    (:data:`MAX_LENGTH`, :data:`MAX_DEPTH`, :data:`MAX_IN_LIST`).
    """
    if len(text) > MAX_LENGTH:
        raise SqlError(
            f"the expression is {len(text)} characters long; the limit is {MAX_LENGTH}", MAX_LENGTH + 1, text
        )
    recursion_headroom()
    return _Parser(text).parse_selector()


_Step = Generator["_Step", Expr, Expr]
"""A grammar rule: a generator that yields the rules it needs parsed (receiving their trees) and returns its own
tree. ``_run`` drives them with an explicit stack, so nesting costs heap, never Python's recursion limit."""


def _run(rule: _Step) -> Expr:
    """Parse with ``rule``: each yielded sub-rule is run to completion and its tree sent back."""
    stack = [rule]
    value: Expr | None = None
    while True:
        try:
            sub = stack[-1].send(value) if value is not None else next(stack[-1])
        except StopIteration as done:
            stack.pop()
            value = done.value
            if not stack:
                assert value is not None
                return value
            continue
        stack.append(sub)
        value = None


def _describe(node: Expr) -> str:
    match node:
        case StringLiteral():
            return "the string literal " + _short(node)
        case IntLiteral() | FloatLiteral():
            return "the number " + _short(node)
        case BoolLiteral(value=v):
            return "TRUE" if v else "FALSE"
        case NullLiteral():
            return "NULL"
        case Property(name=name):
            return f"the property {name}"
        case Negate():
            return "a negated value"
        case _:
            return "a condition"


def _short(node: Expr) -> str:
    text = to_sql(node)
    return text if len(text) <= 32 else text[:29] + "..."


def _java_constant(node: Expr) -> JavaValue:
    match node:
        case StringLiteral(value=v):
            return v
        case IntLiteral(value=v):
            return JavaLong(v) if node.is_long else JavaInt(v)
        case FloatLiteral(value=v):
            return JavaDouble(v)
        case BoolLiteral(value=v):
            return v
        case _:
            return None


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.lex = Lexer(text)
        self.nesting = 0

    # -- helpers -----------------------------------------------------------------------------

    def error(self, message: str, pos: int) -> SqlError:
        return SqlError(message, pos, self.text)

    def expected(self, what: str, token: Token) -> SqlError:
        return self.error(f"expected {what}, found {token.describe()}", token.pos)

    def expect_op(self, op: str, what: str) -> Token:
        token = self.lex.next()
        if not token.is_op(op):
            raise self.expected(what, token)
        return token

    def expect_string(self, what: str) -> Token:
        token = self.lex.next()
        if token.kind != "STRING":
            raise self.expected(what, token)
        return token

    def enter(self, token: Token) -> None:
        self.nesting += 1
        if self.nesting > MAX_NESTING:
            raise self.error(f"the expression nests more than {MAX_NESTING} parentheses and unary operators", token.pos)

    def as_boolean(self, node: Expr, context: str) -> Expr:
        """RocketMQ ``asBooleanExpression``: conditions pass, a property is cast, the rest fail."""
        if is_boolean(node):
            return node
        if isinstance(node, Property):
            return BoolCast(node, pos=node.pos)
        raise self.error(
            f"{_describe(node)} is not a condition; {context} needs a comparison, TRUE, FALSE, NULL or a property name",
            node.pos,
        )

    # -- grammar -----------------------------------------------------------------------------

    def parse_selector(self) -> Expr:
        if self.lex.peek().kind == "EOF":
            raise self.error("the expression is empty", 1)
        node = _run(self.or_expr())
        node = self.as_boolean(node, "a selector")
        token = self.lex.peek()
        if token.kind != "EOF":
            raise self.error(self.leftover_message(token), token.pos)
        node = merge_nested_logic(node)
        self.check_depth(node)
        return node

    def leftover_message(self, token: Token) -> str:
        message = (
            f"unexpected {token.describe()} after a complete expression "
            "(RocketMQ would silently ignore everything from here on; sievemq refuses)"
        )
        if token.is_op("-") and self.lex.peek(1).is_op("-"):
            message += "; a -- comment must end with a line break"
        elif token.kind == "IDENT":
            upper = token.text.upper()
            for word in ("AND", "OR"):
                if upper.startswith(word) and len(upper) > len(word):
                    message += f"; did you mean '{token.text[: len(word)]} {token.text[len(word) :]}'?"
                    break
        return message

    def check_depth(self, root: Expr) -> None:
        stack: list[tuple[Expr, int]] = [(root, 1)]
        while stack:
            node, level = stack.pop()
            if level > MAX_DEPTH:
                raise self.error(f"the expression is nested more than {MAX_DEPTH} levels deep", node.pos)
            stack.extend((child, level + 1) for child in children(node))

    def or_expr(self) -> _Step:
        first = yield self.and_expr()
        if not self.lex.peek().is_keyword("OR"):
            return first
        operands = [first]
        while self.lex.peek().is_keyword("OR"):
            self.lex.next()
            operands.append((yield self.and_expr()))
        return Or(tuple(self.as_boolean(o, "OR") for o in operands), pos=first.pos)

    def and_expr(self) -> _Step:
        first = yield self.eq_expr()
        if not self.lex.peek().is_keyword("AND"):
            return first
        operands = [first]
        while self.lex.peek().is_keyword("AND"):
            self.lex.next()
            operands.append((yield self.eq_expr()))
        return And(tuple(self.as_boolean(o, "AND") for o in operands), pos=first.pos)

    def eq_expr(self) -> _Step:
        left = yield self.cmp_expr()
        while True:
            token = self.lex.peek()
            if token.is_op("=", "<>"):
                self.lex.next()
                right = yield self.cmp_expr()
                op: CompareOp = "=" if token.value == "=" else "<>"
                self.check_equality(op, left, right, token)
                left = Compare(op, left, right, pos=left.pos)
            elif token.is_keyword("IS"):
                self.lex.next()
                nxt = self.lex.next()
                negated = False
                if nxt.is_keyword("NOT"):
                    negated = True
                    nxt = self.lex.next()
                if not nxt.is_keyword("NULL"):
                    raise self.expected("NULL after IS NOT" if negated else "NULL or NOT NULL after IS", nxt)
                left = IsNull(left, negated, pos=left.pos)
            else:
                return left

    def check_equality(self, op: str, left: Expr, right: Expr, token: Token) -> None:
        fix = "IS NULL" if op == "=" else "IS NOT NULL"
        for side in (left, right):
            if isinstance(side, NullLiteral):
                raise self.error(f"NULL cannot be compared with {op}; use {fix}", side.pos)
        if isinstance(left, BoolLiteral) and is_constant(right) and not isinstance(right, BoolLiteral):
            raise self.error(f"{_describe(left)} cannot be compared with {_describe(right)}", token.pos)

    def check_order_operand(self, node: Expr, op: str) -> None:
        if is_constant(node) and not isinstance(node, (IntLiteral, FloatLiteral)):
            raise self.error(
                f"{_describe(node)} cannot be used with {op}: only numbers and property names can", node.pos
            )
        if is_boolean(node):
            raise self.error(f"a condition cannot be used with {op}: only numbers and property names can", node.pos)

    def cmp_expr(self) -> _Step:
        left = yield self.unary()
        while True:
            token = self.lex.peek()
            if token.is_op(*_ORDER_OPS):
                self.lex.next()
                right = yield self.unary()
                op: CompareOp = token.value  # type: ignore[assignment]
                self.check_order_operand(left, op)
                self.check_order_operand(right, op)
                left = Compare(op, left, right, pos=left.pos)
                continue
            negated = False
            op_token = token
            if token.is_keyword("NOT"):
                op_token = self.lex.peek(1)
                if not (op_token.is_keyword("BETWEEN", "IN", *_STRING_TESTS) or op_token.is_word("LIKE")):
                    raise self.expected(f"{_AFTER_NOT} after NOT", op_token)
                self.lex.next()
                negated = True
            if op_token.is_keyword(*_STRING_TESTS):
                self.lex.next()
                word = op_token.value
                value = self.expect_string(f"a string literal after {'NOT ' if negated else ''}{word}")
                test_op: StringTestOp = word  # type: ignore[assignment]
                left = StringTest(test_op, left, value.value, negated, pos=left.pos)
            elif op_token.is_keyword("BETWEEN"):
                self.lex.next()
                left = yield self.between(left, negated, op_token)
            elif op_token.is_keyword("IN"):
                self.lex.next()
                left = self.in_list(left, negated, op_token)
            elif op_token.is_word("LIKE"):
                self.lex.next()
                left = self.like(left, negated)
            else:
                return left

    def between(self, operand: Expr, negated: bool, token: Token) -> _Step:
        name = "NOT BETWEEN" if negated else "BETWEEN"
        low = yield self.unary()
        and_token = self.lex.next()
        if not and_token.is_keyword("AND"):
            raise self.expected(f"AND in {name} ... AND ...", and_token)
        high = yield self.unary()
        for side in (operand, low, high):
            self.check_order_operand(side, name)
        if not negated and is_constant(low) and is_constant(high):
            try:
                reversed_bounds = java_compare(_java_constant(high), _java_constant(low)) < 0
            except SqlEvaluationError as exc:  # pragma: no cover - both are numbers here
                raise self.error(f"BETWEEN bounds cannot be compared: {exc}", low.pos) from None
            if reversed_bounds:
                raise self.error(
                    f"BETWEEN bounds are reversed: {_short(low)} is greater than {_short(high)} "
                    "(write the lower bound first)",
                    low.pos,
                )
        return Between(operand, low, high, negated, pos=operand.pos)

    def in_list(self, operand: Expr, negated: bool, token: Token) -> Expr:
        name = "NOT IN" if negated else "IN"
        self.expect_op("(", f"( after {name}")
        values = [self.expect_string(f"a string literal after {name} (").value]
        while True:
            sep = self.lex.next()
            if sep.is_op(")"):
                break
            if not sep.is_op(","):
                raise self.expected(f", or ) in the {name} list", sep)
            if len(values) >= MAX_IN_LIST:
                raise self.error(f"the {name} list has more than {MAX_IN_LIST} values", sep.pos)
            values.append(self.expect_string(f"a string literal after , in the {name} list").value)
        if not isinstance(operand, Property):
            raise self.error(f"{name} needs a property name on its left, found {_describe(operand)}", operand.pos)
        return In(operand, tuple(values), negated, pos=operand.pos)

    def like(self, operand: Expr, negated: bool) -> Expr:
        name = "NOT LIKE" if negated else "LIKE"
        pattern = self.expect_string(f"a string literal pattern after {name}")
        escape: str | None = None
        escape_token: Token | None = None
        if self.lex.peek().is_word("ESCAPE"):
            self.lex.next()
            escape_token = self.expect_string("a one-character string literal after ESCAPE")
            escape = escape_token.value
            if len(escape) != 1:
                raise self.error(
                    f"ESCAPE needs exactly one character, found {escape_token.describe()}", escape_token.pos
                )
        try:
            LikePattern.parse(pattern.value, escape)
        except LikePatternError as exc:
            raise self.error(f"bad LIKE pattern: {exc.message}", pattern.pos) from None
        return Like(operand, pattern.value, escape, negated, pos=operand.pos)

    def unary(self) -> _Step:
        token = self.lex.peek()
        if token.is_op("+"):
            self.lex.next()
            self.enter(token)
            node = yield self.unary()
            self.nesting -= 1
            return node
        if token.is_op("-"):
            self.lex.next()
            self.enter(token)
            node = Negate((yield self.unary()), pos=token.pos)
            self.nesting -= 1
            return node
        if token.is_keyword("NOT"):
            self.lex.next()
            self.enter(token)
            node = Not(self.as_boolean((yield self.unary()), "NOT"), pos=token.pos)
            self.nesting -= 1
            return node
        return (yield self.primary())

    def primary(self) -> _Step:
        token = self.lex.next()
        kind = token.kind
        if kind == "STRING":
            return StringLiteral(token.value, pos=token.pos)
        if kind == "INT":
            return self.integer(token)
        if kind == "FLOAT":
            return self.floating(token)
        if kind == "KEYWORD":
            if token.value == "TRUE":
                return BoolLiteral(True, pos=token.pos)
            if token.value == "FALSE":
                return BoolLiteral(False, pos=token.pos)
            if token.value == "NULL":
                return NullLiteral(pos=token.pos)
        if kind == "IDENT":
            if token.is_word("EXISTS") and self.lex.peek().is_op("("):
                self.lex.next()
                name = self.lex.next()
                if name.kind != "IDENT":
                    raise self.expected("a property name inside EXISTS( )", name)
                self.expect_op(")", f") after EXISTS({name.text}")
                return Exists(name.text, pos=token.pos)
            return Property(token.text, pos=token.pos)
        if token.is_op("("):
            self.enter(token)
            node = yield self.or_expr()
            close = self.lex.next()
            if not close.is_op(")"):
                raise self.expected(f") to close the ( at column {token.pos}", close)
            self.nesting -= 1
            return node
        hint = ""
        if token.is_op("=") and self.lex_previous_was_equals(token):
            hint = " (the equality operator is a single =)"
        raise self.expected(
            "an operand (a property name, a string, a number, TRUE, FALSE, NULL, NOT, - or a parenthesised expression)"
            + hint,
            token,
        )

    def lex_previous_was_equals(self, token: Token) -> bool:
        before = self.text[: token.pos - 1].rstrip(" \t\n\r\f")
        return before.endswith("=") and not before.endswith(("<=", ">="))

    def integer(self, token: Token) -> Expr:
        digits = token.text.rstrip("lL")
        value = int(digits)
        if value > INT64_MAX:
            raise self.error(f"the integer {token.text} is out of range (the largest is {INT64_MAX})", token.pos)
        return IntLiteral(value, pos=token.pos)

    def floating(self, token: Token) -> Expr:
        value = float(token.text)
        if math.isinf(value):
            raise self.error(f"the number {token.text} is too large for a double", token.pos)
        if value < _DOUBLE_MIN_VALUE:
            raise self.error(
                f"the number {token.text} is zero or below 4.9E-324, which RocketMQ rejects; write 0 for zero",
                token.pos,
            )
        return FloatLiteral(value, pos=token.pos)
