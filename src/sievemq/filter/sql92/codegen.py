"""Generate Python source from a selector's syntax tree, and compile it into fast callables.

Every operand's Java type is known at compile time (a property is a String or null, a literal has
its own type, a condition is a Boolean or null, a negated non-number is always null), so each
comparison compiles to the one conversion RocketMQ would perform for that pair of types: ``a > 5``
becomes ``_i32(v) > 5`` with ``_i32`` = Java ``Integer.valueOf``. Two versions are generated:

* ``_exact(p)``: three-valued (``True``/``False``/``None``), raising exactly where RocketMQ's
  evaluator throws, with RocketMQ's short-circuit order. Used for n-ary AND/OR helpers, the
  operands of NOT/OR/comparisons, and :meth:`Selector.evaluate_tristate`.
* ``_match(p)``: "is the result TRUE?" — the broker's question. AND becomes Python ``and``, the
  last operand of an OR and every operand of a top-level AND may cut corners (returning False
  where RocketMQ throws is the same verdict), and the whole thing sits in one ``try``: any
  exception means "not delivered".
* ``_verdict(p)``: the same code, but None (instead of False) when it raised: what the broker
  counts as an evaluation error (docs/metrics.md §4). Errors skipped by a corner cut (an AND
  already FALSE or NULL before the failing part) are not seen: those messages count as not
  matched.

Safety: the only text interpolated into the generated source is produced by ``repr`` of a string
or number (property names are passed as ``g('name')`` dict lookups, string literals as ``repr``),
and larger constants (IN sets, regexes) are passed in the function's globals.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import NoReturn

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
from sievemq.filter.sql92.like import ANY, LikePattern
from sievemq.filter.sql92.limits import recursion_headroom
from sievemq.filter.sql92.reference import reference_evaluate
from sievemq.filter.sql92.values import (
    double_compare,
    java_boolean_value,
    parse_java_double,
    parse_java_int,
    parse_java_long,
    wrap_int32,
    wrap_int64,
)

__all__ = ["Matcher", "Verdict", "compile_ast"]

Matcher = Callable[[Mapping[str, str]], bool]
Verdict = Callable[[Mapping[str, str]], bool | None]
"""``props -> True`` (deliver), ``False`` (not TRUE), ``None`` (the evaluation raised: not delivered either)."""

_NUMERIC = ("int", "long", "double")
_PARSE = {"int": "_i32", "long": "_i64", "double": "_dbl"}
_SPILL_AT = 24  # generated-expression nesting beyond which a subtree becomes its own function
_TRUTH_MAX_SOURCE = 256 * 1024
"""Source bytes past which the "is it TRUE?" version is not compiled (see ``compile_ast``)."""


class _NoConst:
    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return "<no constant>"


_NO = _NoConst()


def _fail(message: str) -> NoReturn:
    raise SqlEvaluationError(message)


def _class_cast() -> NoReturn:
    raise SqlEvaluationError("cannot compare a boolean with a string (Java ClassCastException)")


_RUNTIME: dict[str, object] = {
    "__builtins__": {"Exception": Exception},
    "_i32": parse_java_int,
    "_i64": parse_java_long,
    "_dbl": parse_java_double,
    "_jbool": java_boolean_value,
    "_dcmp": double_compare,
    "_cce": _class_cast,
    "_fail": _fail,
}


@dataclass(slots=True)
class _Val:
    """A generated Python expression and what is statically known about its value.

    ``typ`` is the Java class of the value when it is not null: ``str``, ``int``, ``long``,
    ``double``, ``bool``, or ``null`` (always null). ``const`` is the value when known at compile
    time (``_NO`` otherwise); ``pure`` means evaluating it cannot raise, so it may be skipped.
    """

    code: str
    typ: str
    nullable: bool
    const: object = _NO
    pure: bool = False
    nest: int = 1


def _num_code(value: int | float) -> str:
    text = repr(value)
    return f"({text})" if text.startswith("-") else text


class _Codegen:
    def __init__(self) -> None:
        self.namespace: dict[str, object] = dict(_RUNTIME)
        self.helpers: list[str] = []
        self._counter = 0

    # -- plumbing ----------------------------------------------------------------------------

    def fresh(self, prefix: str) -> str:
        self._counter += 1
        return f"{prefix}{self._counter}"

    def constant(self, value: object) -> str:
        name = self.fresh("_k")
        self.namespace[name] = value
        return name

    def make(self, code: str, typ: str, nullable: bool, *parts: _Val, const: object = _NO, pure: bool = False) -> _Val:
        nest = 1 + max((p.nest for p in parts), default=0)
        if nest > _SPILL_AT:
            name = self.fresh("_f")
            self.helpers.append(f"def {name}(p):\n    g = p.get\n    return {code}\n")
            code = f"{name}(p)"
            nest = 1
        return _Val(code, typ, nullable, const, pure, nest)

    def folded(self, node: Expr) -> _Val:
        """A condition whose operands are all compile-time constants: evaluate it now."""
        try:
            result = reference_evaluate(node, {}, strict=True)
        except SqlEvaluationError as exc:
            return _Val(f"_fail({str(exc)!r})", "bool", True)
        return _Val(repr(result), "bool", result is None, result, pure=True)

    def effect_then(self, val: _Val, result: str, typ: str, const: object) -> _Val:
        """Evaluate ``val`` for its exceptions only, then produce ``result``."""
        if val.pure:
            return _Val(result, typ, result == "None", const, pure=True)
        return self.make(f"({val.code}, {result})[1]", typ, result == "None", val)

    # -- values ------------------------------------------------------------------------------

    def value(self, node: Expr) -> _Val:
        match node:
            case StringLiteral(value=v):
                return _Val(repr(v), "str", False, v, pure=True)
            case IntLiteral(value=v):
                return _Val(_num_code(v), "long" if node.is_long else "int", False, v, pure=True)
            case FloatLiteral(value=v):
                return _Val(_num_code(v), "double", False, v, pure=True)
            case BoolLiteral(value=v):
                return _Val(repr(v), "bool", False, v, pure=True)
            case NullLiteral():
                return _Val("None", "null", True, None, pure=True)
            case Property(name=name):
                return _Val(f"g({name!r})", "str", True, pure=True)
            case Negate(operand=o):
                inner = self.value(o)
                if inner.typ in _NUMERIC and isinstance(inner.const, (int, float)):
                    c = inner.const
                    if inner.typ == "int":
                        negated: int | float = wrap_int32(-int(c))
                    elif inner.typ == "long":
                        negated = wrap_int64(-int(c))
                    else:
                        negated = -c
                    return _Val(_num_code(negated), inner.typ, False, negated, pure=True)
                # A negated non-number is null (after evaluating it, which may throw).
                return self.effect_then(inner, "None", "null", None)
        return self.exact(node)

    # -- three-valued (exact) conditions -----------------------------------------------------

    def exact(self, node: Expr) -> _Val:
        match node:
            case BoolLiteral() | NullLiteral():
                return self.value(node)
            case BoolCast(operand=o):
                v = self.value(o)
                return self.make(f"(None if {v.code} is None else False)", "bool", True, v)
            case Not(operand=o):
                v = self.value(o)
                if v.const is not _NO:
                    return self.folded(node)
                t = self.fresh("_t")
                return self.make(f"(not {t} if ({t} := {v.code}) is not None else None)", "bool", True, v)
            case And() | Or():
                return self.logic_function(node)
            case Compare(op="=" | "<>"):
                return self.equality(node, truth=False)
            case Compare():
                return self.ordering(node, truth=False)
            case Between(operand=o, low=lo, high=hi, negated=False):
                return self.exact(And((Compare(">=", o, lo), Compare("<=", o, hi))))
            case Between(operand=o, low=lo, high=hi, negated=True):
                return self.exact(Or((Compare("<", o, lo), Compare(">", o, hi))))
            case In(operand=o, values=values, negated=neg):
                k = self.constant(frozenset(values))
                t = self.fresh("_t")
                test = f"{t} not in {k}" if neg else f"{t} in {k}"
                return self.make(f"(None if ({t} := {self.value(o).code}) is None else {test})", "bool", True)
            case IsNull(operand=o, negated=neg):
                v = self.value(o)
                if v.const is not _NO:
                    return self.folded(node)
                return self.make(f"(({v.code}) is {'not ' if neg else ''}None)", "bool", False, v)
            case StringTest() | Like():
                return self.string_match(node, truth=False)
            case Exists(name=name):
                return _Val(f"(g({name!r}) is not None)", "bool", False)
        raise TypeError(f"not a condition: {node!r}")  # pragma: no cover

    def logic_function(self, node: And | Or) -> _Val:
        """An n-ary AND/OR as its own function: RocketMQ's left-to-right three-valued evaluation."""
        is_and = isinstance(node, And)
        stop, other = ("False", "True") if is_and else ("True", "False")
        name = self.fresh("_f")
        lines = [f"def {name}(p):", "    g = p.get", "    n = False"]
        for operand in node.operands:
            v = self.exact(operand)
            lines += [f"    if (t := {v.code}) is {stop}: return {stop}", "    n = n or t is None"]
        lines.append(f"    return None if n else {other}")
        self.helpers.append("\n".join(lines) + "\n")
        return _Val(f"{name}(p)", "bool", True)

    # -- "is it TRUE?" (truth) conditions ----------------------------------------------------

    def truth(self, node: Expr) -> _Val:
        """Code that is True iff ``node`` is TRUE; may return False (instead of raising) where
        RocketMQ throws, because the caller only ever asks "TRUE or not"."""
        match node:
            case BoolLiteral(value=flag):
                return _Val(repr(flag), "bool", False, flag, pure=True)
            case NullLiteral() | BoolCast():
                return _Val("False", "bool", False, False, pure=True)
            case And(operands=ops):
                parts = [self.truth(o) for o in ops]
                return self.make(" and ".join(f"({p.code})" for p in parts), "bool", False, *parts)
            case Or(operands=ops):
                parts = [self.exact(o) for o in ops[:-1]]
                last = self.truth(ops[-1])
                code = " or ".join([*(f"({p.code}) is True" for p in parts), f"({last.code})"])
                return self.make(code, "bool", False, *parts, last)
            case Not(operand=o):
                v = self.value(o)
                return self.make(f"({v.code}) is False", "bool", False, v)
            case Between(operand=o, low=lo, high=hi, negated=False):
                return self.truth(And((Compare(">=", o, lo), Compare("<=", o, hi))))
            case Compare(op="=" | "<>"):
                return self.as_truth(self.equality(node, truth=True))
            case Compare():
                return self.as_truth(self.ordering(node, truth=True))
            case In(operand=o, values=values, negated=False):
                k = self.constant(frozenset(values))
                return _Val(f"{self.value(o).code} in {k}", "bool", False)
            case In(operand=o, values=values, negated=True):
                k = self.constant(frozenset(values))
                t = self.fresh("_t")
                return _Val(f"(({t} := {self.value(o).code}) is not None and {t} not in {k})", "bool", False)
            case Like():
                return self.as_truth(self.string_match(node, truth=True))
        return self.as_truth(self.exact(node))

    def as_truth(self, v: _Val) -> _Val:
        """``v is True``, unless ``v`` is already exactly True or False."""
        if not v.nullable:
            return v
        return self.make(f"({v.code}) is True", "bool", False, v)

    # -- comparisons -------------------------------------------------------------------------

    def equal_nonnull(self, ltyp: str, rtyp: str, a: str, b: str) -> str:
        """Java ``=`` of two non-null values of known classes (``equals``, then ``__compare``)."""
        if ltyp == "str":
            if rtyp == "str":
                return f"{a} == {b}"
            if rtyp in _NUMERIC:
                # The number is a constant: never NaN, never zero, so Python == is Double.compare == 0.
                return f"{_PARSE[rtyp]}({a}) == {b}"
            if rtyp == "bool":
                return f"_jbool({a}) is {b}"
        elif ltyp in _NUMERIC:
            if rtyp == "str":
                return f"{a} == {_PARSE[ltyp]}({b})"
            if rtyp == "bool":
                return "False"  # __compare: -1
        elif ltyp == "bool":
            if rtyp == "str":
                return "_cce()"
            if rtyp == "bool":
                return f"{a} is {b}"
            if rtyp in _NUMERIC:
                return "False"  # __compare: -1
        return "False"  # a side that is always null: unreachable

    def equality(self, node: Compare, *, truth: bool) -> _Val:
        left = self.value(node.left)
        right = self.value(node.right)
        neg = node.op == "<>"
        if left.const is not _NO and right.const is not _NO:
            return self.folded(node)
        lt = self.fresh("_t")
        rt = self.fresh("_t")
        if left.nullable and right.nullable:
            if truth and not neg and left.typ == "str" and right.typ == "str":
                # both present and equal (both missing is TRUE too)
                return self.make(f"({left.code}) == ({right.code})", "bool", False, left, right)
            if right.typ == "null" and right.pure:
                code = f"(({left.code}) is {'not ' if neg else ''}None)"
            elif left.typ == "null" and left.pure:
                code = f"({'False' if neg else 'True'} if ({right.code}) is None else None)"
            else:
                cmp = self.equal_nonnull(left.typ, right.typ, lt, rt)
                if neg:
                    cmp = f"not ({cmp})"
                both, right_null = ("False", "True") if neg else ("True", "False")
                code = (
                    f"(({cmp}) if (({lt} := {left.code}) is not None) & (({rt} := {right.code}) is not None) "
                    f"else (({both} if {rt} is None else None) if {lt} is None else {right_null}))"
                )
        elif left.nullable:
            # RocketMQ evaluates both sides before it looks at either: a right side that can raise (a condition
            # used as a value) raises even when the left is null. Only "is it TRUE?" may skip it.
            must_eval_right = not right.pure and not truth
            if left.typ == "null":
                if must_eval_right:
                    return self.make(f"({left.code}, {right.code}, None)[2]", "bool", True, left, right)
                return self.effect_then(left, "None", "bool", None)
            cmp = self.equal_nonnull(left.typ, right.typ, lt, rt if must_eval_right else right.code)
            if neg:
                cmp = f"not ({cmp})"
            if truth:
                if left.typ == "str" and right.typ == "str" and not neg:
                    return self.make(f"{left.code} == {right.code}", "bool", False, left)
                return self.make(f"(({lt} := {left.code}) is not None and {cmp})", "bool", False, left)
            if must_eval_right:
                code = f"(({lt} := {left.code}), ({rt} := {right.code}), None if {lt} is None else {cmp})[2]"
            else:
                code = f"(None if ({lt} := {left.code}) is None else {cmp})"
        else:  # right nullable, left non-null: a constant, or a condition used as a value
            # The left is evaluated first, whatever the right: when it can raise, that error is the answer, also
            # for "is it TRUE?" (``cond <> b`` with ``b`` missing would otherwise be TRUE where RocketMQ raises).
            hoist = not left.pure
            a = lt if hoist else left.code
            if right.typ == "null":
                if hoist:
                    return self.make(f"({left.code}, {right.code}, {neg!r})[2]", "bool", False, left, right)
                return self.effect_then(right, "True" if neg else "False", "bool", neg)
            cmp = self.equal_nonnull(left.typ, right.typ, a, rt)
            if neg:
                code = f"(True if ({rt} := {right.code}) is None else not ({cmp}))"
            else:
                code = f"(False if ({rt} := {right.code}) is None else {cmp})"
            if hoist:
                code = f"(({lt} := {left.code}), {code})[1]"
        v = self.make(code, "bool", True, left, right)
        if truth:
            return self.make(f"({v.code}) is True", "bool", False, v)
        return v

    def order_nonnull(self, op: str, ltyp: str, rtyp: str, a: str, b: str) -> str:
        """Java ``> >= < <=`` of two non-null values of known classes."""
        if ltyp == "str" and rtyp == "str":
            return f"_dcmp(_dbl({a}), _dbl({b})) {op} 0"
        if ltyp == "str" and rtyp in ("int", "long"):
            return f"{_PARSE[rtyp]}({a}) {op} {b}"
        if ltyp in ("int", "long") and rtyp == "str":
            return f"{a} {op} {_PARSE[ltyp]}({b})"
        x = self.fresh("_x")
        if ltyp == "str" and rtyp == "double":
            # Double.compare puts NaN above everything; the constant is never NaN or zero.
            if op in (">", ">="):
                return f"(({x} := _dbl({a})) {op} {b} or {x} != {x})"
            return f"_dbl({a}) {op} {b}"
        if ltyp == "double" and rtyp == "str":
            if op in ("<", "<="):
                return f"({a} {op} ({x} := _dbl({b})) or {x} != {x})"
            return f"{a} {op} _dbl({b})"
        raise AssertionError(f"unexpected operand types {ltyp} {op} {rtyp}")  # pragma: no cover

    def ordering(self, node: Compare, *, truth: bool) -> _Val:
        op = node.op
        left = self.value(node.left)
        right = self.value(node.right)
        if left.const is not _NO and right.const is not _NO:
            v = self.folded(node)
            return self.make(f"({v.code}) is True", "bool", False, v) if truth else v
        if truth and (left.typ == "null" or right.typ == "null"):
            return _Val("False", "bool", False, False, pure=True)
        if left.typ == "null":
            return self.effect_then(left, "None", "bool", None)
        lt = self.fresh("_t")
        rt = self.fresh("_t")
        a = lt if left.nullable else left.code
        if right.typ == "null":
            inner = self.effect_then(right, "None", "bool", None).code
        elif right.nullable:
            cmp = self.order_nonnull(op, left.typ, right.typ, a, rt)
            if truth:
                inner = f"(({rt} := {right.code}) is not None and {cmp})"
            else:
                inner = f"(None if ({rt} := {right.code}) is None else {cmp})"
        else:
            inner = self.order_nonnull(op, left.typ, right.typ, a, right.code)
        if left.nullable:
            if truth:
                code = f"(({lt} := {left.code}) is not None and {inner})"
            else:
                code = f"(None if ({lt} := {left.code}) is None else {inner})"
        else:
            code = inner
        return self.make(code, "bool", not truth, left, right)

    # -- CONTAINS / STARTSWITH / ENDSWITH / LIKE ---------------------------------------------

    def like_test(self, pattern: LikePattern, t: str) -> str:
        parts = pattern.parts
        kinds = tuple(kind for kind, _ in parts)
        texts = [text for _, text in parts]
        if kinds == ():
            return f"{t} == ''"
        if kinds == ("lit",):
            return f"{t} == {texts[0]!r}"
        if kinds == (ANY,):
            return "True"
        if kinds == ("lit", ANY):
            return f"{t}.startswith({texts[0]!r})"
        if kinds == (ANY, "lit"):
            return f"{t}.endswith({texts[1]!r})"
        if kinds == (ANY, "lit", ANY):
            return f"{texts[1]!r} in {t}"
        return f"{self.constant(pattern.regex())}.fullmatch({t}) is not None"

    def string_match(self, node: StringTest | Like, *, truth: bool) -> _Val:
        operand = self.value(node.operand)
        if isinstance(node, StringTest) and node.value == "":
            return _Val("False", "bool", False, False, pure=True)  # operand not even evaluated
        if operand.const is not _NO:
            v = self.folded(node)
            return self.make(f"({v.code}) is True", "bool", False, v) if truth else v
        t = self.fresh("_t")
        if isinstance(node, StringTest):
            if operand.typ != "str":
                return self.effect_then(operand, "False", "bool", False)
            if node.op == "CONTAINS":
                test = f"{node.value!r} {'not in' if node.negated else 'in'} {t}"
            else:
                method = "startswith" if node.op == "STARTSWITH" else "endswith"
                test = f"{'not ' if node.negated else ''}{t}.{method}({node.value!r})"
            return self.make(f"(({t} := {operand.code}) is not None and {test})", "bool", False, operand)
        # LIKE (JMS semantics): NULL operand -> NULL, non-string -> FALSE; NOT LIKE is NOT (LIKE).
        if operand.typ == "str":
            test = self.like_test(LikePattern.parse(node.pattern, node.escape), t)
            if node.negated:
                test = f"not ({test})"
            if truth:
                return self.make(f"(({t} := {operand.code}) is not None and {test})", "bool", False, operand)
            return self.make(f"(None if ({t} := {operand.code}) is None else {test})", "bool", True, operand)
        if operand.typ == "null":
            v = self.effect_then(operand, "None", "bool", None)
        else:
            v = self.make(f"(None if ({operand.code}) is None else {node.negated!r})", "bool", True, operand)
        return self.make(f"({v.code}) is True", "bool", False, v) if truth else v


@dataclass(frozen=True, slots=True)
class _Compiled:
    matcher: Matcher
    exact: Callable[[Mapping[str, str]], bool | None]
    source: str
    verdict: Verdict


def compile_ast(root: Expr, *, name: str = "<sql92>") -> _Compiled:
    """Generate and compile the Python functions for a parsed selector (no caching)."""
    recursion_headroom()
    gen = _Codegen()
    exact = gen.exact(root)
    # The "is it TRUE?" version is faster to run, but Python's compiler takes about 0.5 us per byte of source: past
    # _TRUTH_MAX_SOURCE bytes it is dropped and the three-valued version answers (the same verdicts). It is
    # compiled twice (``_match`` and ``_verdict``).
    before = len(gen.helpers)
    truth = gen.truth(root)
    if 2 * len(truth.code) + sum(len(h) for h in gen.helpers[before:]) > _TRUTH_MAX_SOURCE:
        del gen.helpers[before:]
        truth = _Val(f"{exact.code} is True", "bool", False)
    source = "\n".join(
        [
            *gen.helpers,
            "def _match(p):",
            "    try:",
            "        g = p.get",
            f"        return {truth.code}",
            "    except Exception:",
            "        return False",
            "",
            "def _verdict(p):",
            "    try:",
            "        g = p.get",
            f"        return {truth.code}",
            "    except Exception:",
            "        return None",
            "",
            "def _exact(p):",
            "    g = p.get",
            f"    return {exact.code}",
            "",
        ]
    )
    namespace = gen.namespace
    exec(compile(source, name, "exec"), namespace)
    matcher = namespace["_match"]
    exact_fn = namespace["_exact"]
    verdict = namespace["_verdict"]
    assert callable(matcher) and callable(exact_fn) and callable(verdict)
    return _Compiled(matcher, exact_fn, source, verdict)  # type: ignore[arg-type]
