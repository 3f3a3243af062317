"""Syntax tree of a SQL92 selector, as built by :func:`sievemq.filter.sql92.parse`.

The tree mirrors what RocketMQ's parser builds, with three simplifications that do not change
meaning: a unary ``+`` and parentheses leave no node (RocketMQ drops them too), a chain
``a AND b AND c`` is one n-ary :class:`And` (evaluating it left to right with short-circuit is
exactly RocketMQ's left-nested binary evaluation), and ``<>`` / ``IS NOT NULL`` / ``NOT BETWEEN`` /
``NOT IN`` / ``NOT CONTAINS``... are flags on one node instead of a ``NOT`` wrapper.

The implicit boolean cast RocketMQ applies to a bare property used as a condition (``a``,
``a AND b``, ``NOT a``) is an explicit :class:`BoolCast` node, inserted by the parser exactly where
RocketMQ inserts it.

Every node records ``pos``, the 1-based character offset where it starts in the text; ``pos`` does
not take part in equality, so ``parse(to_sql(tree)) == tree``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

__all__ = [
    "INT32_MAX",
    "INT32_MIN",
    "And",
    "Between",
    "BoolCast",
    "BoolLiteral",
    "Compare",
    "CompareOp",
    "Exists",
    "Expr",
    "FloatLiteral",
    "In",
    "IntLiteral",
    "IsNull",
    "Like",
    "Negate",
    "Not",
    "NullLiteral",
    "Or",
    "Property",
    "StringLiteral",
    "StringTest",
    "StringTestOp",
    "children",
    "depth",
    "is_boolean",
    "is_constant",
    "merge_nested_logic",
    "merge_operands",
    "properties_used",
    "to_sql",
    "walk",
    "with_children",
]

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1

CompareOp: TypeAlias = Literal["=", "<>", "<", "<=", ">", ">="]
StringTestOp: TypeAlias = Literal["CONTAINS", "STARTSWITH", "ENDSWITH"]


@dataclass(frozen=True, slots=True)
class StringLiteral:
    """A string constant ``'it''s'`` (value without quotes, ``''`` already folded to ``'``)."""

    value: str
    pos: int = field(default=0, compare=False, kw_only=True)


@dataclass(frozen=True, slots=True)
class IntLiteral:
    """An integer constant (never negative: ``-5`` is ``Negate(IntLiteral(5))``).

    A value inside the 32-bit range is a Java ``int`` constant, anything larger a ``long``; the
    type decides how a property compared with it is parsed (``Integer.valueOf`` vs ``Long.valueOf``).
    """

    value: int
    pos: int = field(default=0, compare=False, kw_only=True)

    @property
    def is_long(self) -> bool:
        """True when this constant is a Java ``long`` (outside the ``int`` range)."""
        return not INT32_MIN <= self.value <= INT32_MAX


@dataclass(frozen=True, slots=True)
class FloatLiteral:
    """A floating-point constant (a Java ``double``; never zero, never infinite)."""

    value: float
    pos: int = field(default=0, compare=False, kw_only=True)


@dataclass(frozen=True, slots=True)
class BoolLiteral:
    """``TRUE`` or ``FALSE``."""

    value: bool
    pos: int = field(default=0, compare=False, kw_only=True)


@dataclass(frozen=True, slots=True)
class NullLiteral:
    """``NULL`` (a valid, never-matching, whole selector; not allowed next to ``=``/``<>``)."""

    pos: int = field(default=0, compare=False, kw_only=True)


@dataclass(frozen=True, slots=True)
class Property:
    """A message property by name (case-sensitive); its value is a string, or NULL when absent."""

    name: str
    pos: int = field(default=0, compare=False, kw_only=True)


@dataclass(frozen=True, slots=True)
class Negate:
    """Unary minus. Negates a number; anything else (a property, a string, a condition) gives NULL."""

    operand: Expr
    pos: int = field(default=0, compare=False, kw_only=True)


@dataclass(frozen=True, slots=True)
class Not:
    """``NOT x`` (binds tighter than any comparison: ``NOT a = 'x'`` is ``(NOT a) = 'x'``)."""

    operand: Expr
    pos: int = field(default=0, compare=False, kw_only=True)


@dataclass(frozen=True, slots=True)
class BoolCast:
    """A bare property used as a condition: NULL when absent, otherwise FALSE."""

    operand: Property
    pos: int = field(default=0, compare=False, kw_only=True)


@dataclass(frozen=True, slots=True)
class And:
    """``a AND b AND ...`` (at least two operands, evaluated left to right, short-circuit)."""

    operands: tuple[Expr, ...]
    pos: int = field(default=0, compare=False, kw_only=True)


@dataclass(frozen=True, slots=True)
class Or:
    """``a OR b OR ...`` (at least two operands, evaluated left to right, short-circuit)."""

    operands: tuple[Expr, ...]
    pos: int = field(default=0, compare=False, kw_only=True)


@dataclass(frozen=True, slots=True)
class Compare:
    """A binary comparison ``left op right``; ``<>`` is ``NOT (left = right)``."""

    op: CompareOp
    left: Expr
    right: Expr
    pos: int = field(default=0, compare=False, kw_only=True)


@dataclass(frozen=True, slots=True)
class Between:
    """``x [NOT] BETWEEN low AND high`` (``x >= low AND x <= high``; negated: ``x < low OR x > high``)."""

    operand: Expr
    low: Expr
    high: Expr
    negated: bool = False
    pos: int = field(default=0, compare=False, kw_only=True)


@dataclass(frozen=True, slots=True)
class In:
    """``prop [NOT] IN ('a', 'b')``: exact string membership; NULL when the property is absent."""

    operand: Property
    values: tuple[str, ...]
    negated: bool = False
    pos: int = field(default=0, compare=False, kw_only=True)


@dataclass(frozen=True, slots=True)
class IsNull:
    """``x IS [NOT] NULL``: presence test, never NULL itself."""

    operand: Expr
    negated: bool = False
    pos: int = field(default=0, compare=False, kw_only=True)


@dataclass(frozen=True, slots=True)
class StringTest:
    """``x [NOT] CONTAINS|STARTSWITH|ENDSWITH 'v'``: FALSE (both forms) for an empty ``v``, a
    missing ``x`` or a non-string ``x``."""

    op: StringTestOp
    operand: Expr
    value: str
    negated: bool = False
    pos: int = field(default=0, compare=False, kw_only=True)


@dataclass(frozen=True, slots=True)
class Like:
    """sievemq extension: ``x [NOT] LIKE 'pattern' [ESCAPE 'c']`` (``%`` any run, ``_`` one character)."""

    operand: Expr
    pattern: str
    escape: str | None = None
    negated: bool = False
    pos: int = field(default=0, compare=False, kw_only=True)


@dataclass(frozen=True, slots=True)
class Exists:
    """sievemq extension: ``EXISTS(name)``: TRUE when the property is present, else FALSE (never NULL)."""

    name: str
    pos: int = field(default=0, compare=False, kw_only=True)


Expr: TypeAlias = (
    StringLiteral
    | IntLiteral
    | FloatLiteral
    | BoolLiteral
    | NullLiteral
    | Property
    | Negate
    | Not
    | BoolCast
    | And
    | Or
    | Compare
    | Between
    | In
    | IsNull
    | StringTest
    | Like
    | Exists
)

_BOOLEAN_TYPES = (
    BoolLiteral,
    NullLiteral,
    Not,
    BoolCast,
    And,
    Or,
    Compare,
    Between,
    In,
    IsNull,
    StringTest,
    Like,
    Exists,
)
_CONSTANT_TYPES = (StringLiteral, IntLiteral, FloatLiteral, BoolLiteral, NullLiteral)


def is_boolean(node: Expr) -> bool:
    """True for nodes RocketMQ types as boolean expressions (conditions and ``TRUE``/``FALSE``/``NULL``)."""
    return isinstance(node, _BOOLEAN_TYPES)


def is_constant(node: Expr) -> bool:
    """True for literal constants (RocketMQ's ``ConstantExpression``; a negated literal is not one)."""
    return isinstance(node, _CONSTANT_TYPES)


def children(node: Expr) -> tuple[Expr, ...]:
    """The direct sub-expressions of ``node``, left to right."""
    match node:
        case Negate(operand=o) | Not(operand=o) | BoolCast(operand=o) | In(operand=o):
            return (o,)
        case IsNull(operand=o) | StringTest(operand=o) | Like(operand=o):
            return (o,)
        case And(operands=ops) | Or(operands=ops):
            return ops
        case Compare(left=left, right=right):
            return (left, right)
        case Between(operand=o, low=lo, high=hi):
            return (o, lo, hi)
        case _:
            return ()


def merge_operands(kind: type[And] | type[Or], operands: Iterable[Expr]) -> tuple[Expr, ...]:
    """The operands of an n-ary AND/OR with directly nested operands of the same kind spliced in.

    ``a OR (b OR c)`` is ``a OR b OR c``: RocketMQ evaluates both left to right and stops at the same operand,
    and three-valued AND/OR are associative, so nothing changes but the tree's height.
    """
    out: list[Expr] = []
    for o in operands:
        if isinstance(o, kind):
            out.extend(o.operands)
        else:
            out.append(o)
    return tuple(out)


def with_children(node: Expr, kids: tuple[Expr, ...]) -> Expr:
    """``node`` with its direct sub-expressions replaced by ``kids`` (same order as ``children``)."""
    match node:
        case In() | BoolCast():
            operand = kids[0]
            assert isinstance(operand, Property)  # the operand of IN and of a cast is always a property
            return dataclasses.replace(node, operand=operand)
        case Negate() | Not() | IsNull() | StringTest() | Like():
            return dataclasses.replace(node, operand=kids[0])
        case And() | Or():
            return dataclasses.replace(node, operands=kids)
        case Compare():
            return dataclasses.replace(node, left=kids[0], right=kids[1])
        case Between():
            return dataclasses.replace(node, operand=kids[0], low=kids[1], high=kids[2])
        case _:
            return node


def merge_nested_logic(root: Expr) -> Expr:
    """The tree with every AND/OR operand of the same kind spliced into its parent (see ``merge_operands``).

    Linear in the size of the tree and iterative: a 10,000-term ``a OR (b OR (c ...))`` becomes one OR node
    without copying operand lists level by level.
    """
    inner: set[int] = set()  # ids of AND/OR nodes whose operands go to a same-kind parent
    order: list[Expr] = []
    stack = [root]
    while stack:  # parents before children; ``order`` reversed is a post-order
        node = stack.pop()
        order.append(node)
        kids = children(node)
        if isinstance(node, And | Or):
            inner.update(id(k) for k in kids if type(k) is type(node))
        stack.extend(kids)
    rebuilt: dict[int, Expr] = {}
    for node in reversed(order):
        if id(node) in inner:
            continue  # expanded by its region's topmost AND/OR below
        if isinstance(node, And | Or):
            leaves: list[Expr] = []
            todo = list(reversed(node.operands))
            while todo:
                k = todo.pop()
                if id(k) in inner and type(k) is type(node):
                    todo.extend(reversed(k.operands))
                else:
                    leaves.append(rebuilt[id(k)])
            rebuilt[id(node)] = dataclasses.replace(node, operands=tuple(leaves))
        else:
            kids = children(node)
            new = tuple(rebuilt[id(k)] for k in kids)
            same = all(a is b for a, b in zip(new, kids, strict=True))
            rebuilt[id(node)] = node if same else with_children(node, new)
    return rebuilt[id(root)]


def walk(node: Expr) -> Iterator[Expr]:
    """Every node of the tree, parents before children (iterative: safe on any depth)."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(children(current)))


def depth(node: Expr) -> int:
    """Height of the tree: 1 for a leaf (iterative: safe on any depth)."""
    best = 0
    stack = [(node, 1)]
    while stack:
        current, level = stack.pop()
        best = max(best, level)
        stack.extend((child, level + 1) for child in children(current))
    return best


def properties_used(node: Expr) -> frozenset[str]:
    """Names of every property the expression reads (including ``EXISTS`` arguments)."""
    names: set[str] = set()
    for current in walk(node):
        if isinstance(current, (Property, Exists)):
            names.add(current.name)
    return frozenset(names)


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _wrap(node: Expr) -> str:
    text = to_sql(node)
    if isinstance(node, (*_CONSTANT_TYPES, Property, BoolCast, Exists)):
        return text
    return f"({text})"


def to_sql(node: Expr) -> str:
    """Render a tree back to selector text that parses to an equal tree.

    Every compound operand is parenthesised, which never changes meaning (parentheses leave no
    node in RocketMQ either), so the text is unambiguous despite RocketMQ's unusual precedence.
    """
    match node:
        case StringLiteral(value=v):
            return _quote(v)
        case IntLiteral(value=v):
            return str(v)
        case FloatLiteral(value=v):
            return repr(v)
        case BoolLiteral(value=v):
            return "TRUE" if v else "FALSE"
        case NullLiteral():
            return "NULL"
        case Property(name=name):
            return name
        case Negate(operand=o):
            return f"-{_wrap(o)}" if isinstance(o, (IntLiteral, FloatLiteral, Property)) else f"-({to_sql(o)})"
        case Not(operand=o):
            return f"NOT {_wrap(o)}"
        case BoolCast(operand=o):
            return to_sql(o)
        case And(operands=ops):
            return " AND ".join(_wrap(o) for o in ops)
        case Or(operands=ops):
            return " OR ".join(_wrap(o) for o in ops)
        case Compare(op=op, left=left, right=right):
            return f"{_wrap(left)} {op} {_wrap(right)}"
        case Between(operand=o, low=lo, high=hi, negated=neg):
            return f"{_wrap(o)} {'NOT ' if neg else ''}BETWEEN {_wrap(lo)} AND {_wrap(hi)}"
        case In(operand=o, values=values, negated=neg):
            return f"{_wrap(o)} {'NOT ' if neg else ''}IN ({', '.join(_quote(v) for v in values)})"
        case IsNull(operand=o, negated=neg):
            return f"{_wrap(o)} IS {'NOT ' if neg else ''}NULL"
        case StringTest(op=op, operand=o, value=v, negated=neg):
            return f"{_wrap(o)} {'NOT ' if neg else ''}{op} {_quote(v)}"
        case Like(operand=o, pattern=pattern, escape=esc, negated=neg):
            tail = f" ESCAPE {_quote(esc)}" if esc is not None else ""
            return f"{_wrap(o)} {'NOT ' if neg else ''}LIKE {_quote(pattern)}{tail}"
        case Exists(name=name):
            return f"EXISTS({name})"
    raise TypeError(f"not a selector node: {node!r}")  # pragma: no cover
