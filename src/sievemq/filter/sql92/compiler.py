"""Compiled SQL92 selectors: ``Selector`` (parse, then ``codegen.compile_ast``) and a cache of recent expressions,
keyed by their exact text as RocketMQ keys its own. How the source is generated: ``codegen.py``."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping

from sievemq.filter.sql92.ast import Expr, properties_used
from sievemq.filter.sql92.codegen import Matcher, Verdict, compile_ast
from sievemq.filter.sql92.errors import SqlError, SqlEvaluationError
from sievemq.filter.sql92.parser import parse

__all__ = ["CACHE_SIZE", "Matcher", "Selector", "Verdict", "clear_selector_cache", "compile_ast", "compile_selector"]

CACHE_SIZE = 100
"""How many recent expressions (compiled or failed) :func:`compile_selector` remembers, like RocketMQ."""


class Selector:
    """A compiled SQL92 selector.

    ``evaluate(props)`` is True only when the expression is TRUE for that property map; NULL,
    FALSE and evaluation errors all give False (not delivered), exactly like RocketMQ. For a hot
    loop, ``matcher`` is the same function without the method call; ``verdict`` tells an
    evaluation error (None) from a FALSE or NULL result (False), for the broker's error count.
    """

    __slots__ = ("_exact", "ast", "matcher", "properties_used", "python_source", "text", "verdict")

    text: str
    """The expression exactly as given (RocketMQ keys its cache by this string)."""
    ast: Expr
    """The parsed syntax tree."""
    properties_used: frozenset[str]
    """Every property name the expression reads; a message with none of them can only match if
    the expression is true of an empty map (the broker may precompute that)."""
    matcher: Matcher
    """``props -> bool``: never raises."""
    verdict: Verdict
    """``props -> True | False | None``: like ``matcher``, but None where the evaluation raised (RocketMQ's
    "Message Filter error": a property that is not a number compared with one...). Never raises."""
    python_source: str
    """The generated Python source (for debugging)."""

    def __init__(self, text: str, ast: Expr) -> None:
        compiled = compile_ast(ast, name=f"<sql92 {text[:40]!r}>")
        self.text = text
        self.ast = ast
        self.properties_used = properties_used(ast)
        self.matcher = compiled.matcher
        self.verdict = compiled.verdict
        self.python_source = compiled.source
        self._exact = compiled.exact

    def evaluate(self, props: Mapping[str, str]) -> bool:
        """True iff the selector is TRUE for ``props`` (message properties, ``TAGS`` included)."""
        return self.matcher(props)

    def evaluate_tristate(self, props: Mapping[str, str]) -> bool | None:
        """The three-valued result (``None`` for NULL); raises :class:`SqlEvaluationError` where
        RocketMQ's evaluator throws. For diagnostics and tests; brokers use :meth:`evaluate`."""
        try:
            return self._exact(props)
        except SqlEvaluationError:
            raise
        except Exception as exc:
            raise SqlEvaluationError(f"evaluation failed: {exc!r}") from exc

    def __repr__(self) -> str:
        return f"Selector({self.text!r})"


_cache: OrderedDict[str, Selector | SqlError] = OrderedDict()
_cache_lock = threading.Lock()


def compile_selector(text: str) -> Selector:
    """Parse and compile a selector, remembering the last :data:`CACHE_SIZE` expressions.

    Raises :class:`SqlError` when the expression does not compile (failures are cached too, like
    RocketMQ's). The cache key is the exact text.
    """
    with _cache_lock:
        hit = _cache.get(text)
        if hit is not None:
            _cache.move_to_end(text)
    if isinstance(hit, Selector):
        return hit
    if isinstance(hit, SqlError):
        raise SqlError(hit.message, hit.position, hit.text)
    result: Selector | SqlError
    try:
        result = Selector(text, parse(text))
    except SqlError as exc:
        result = exc
    with _cache_lock:
        _cache[text] = result
        _cache.move_to_end(text)
        while len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)
    if isinstance(result, SqlError):
        raise SqlError(result.message, result.position, result.text)
    return result


def clear_selector_cache() -> None:
    """Forget every cached expression."""
    with _cache_lock:
        _cache.clear()
