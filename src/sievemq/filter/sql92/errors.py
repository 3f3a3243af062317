"""Errors of the SQL92 selector package: one for bad expressions, one for failed evaluations.

``SqlError`` is raised by :func:`~sievemq.filter.sql92.parse` and
:func:`~sievemq.filter.sql92.compile_selector` for any expression RocketMQ would reject (and for the
few that sievemq rejects deliberately); a broker answers it with ``SUBSCRIPTION_PARSE_FAILED`` (23)
and the error's text as the remark.

``SqlEvaluationError`` is what RocketMQ's evaluator throws at run time (a property that does not
parse as the number it is compared with, a boolean compared with a string). It never escapes
``Selector.evaluate``: there it simply means "not delivered".
"""

from __future__ import annotations

import re

from sievemq.errors import SieveError

__all__ = ["SqlError", "SqlEvaluationError"]

_LINE_BREAK = re.compile(r"\r\n|\r|\n")


class SqlError(SieveError, ValueError):
    """A selector expression that does not compile.

    ``position`` is the 1-based character offset of the problem in the expression text (for a
    one-line expression, its column); ``message`` says what was expected and what was found.
    ``str(error)`` reads ``"at column 12: expected a string literal after IN (, found 5"``; for a
    multi-line expression the line and the column within it are added.
    """

    def __init__(self, message: str, position: int, text: str | None = None) -> None:
        self.message = message
        self.position = position
        self.text = text
        super().__init__(self._render())

    def _render(self) -> str:
        where = f"at column {self.position}"
        if self.text is not None:
            lines_before = _LINE_BREAK.split(self.text[: max(self.position - 1, 0)])
            if len(lines_before) > 1:
                where += f" (line {len(lines_before)}, column {len(lines_before[-1]) + 1})"
        return f"{where}: {self.message}"

    def __str__(self) -> str:
        return self._render()

    def __reduce__(self) -> tuple[type[SqlError], tuple[str, int, str | None]]:
        return (type(self), (self.message, self.position, self.text))

    def with_caret(self) -> str:
        """The message, then the offending line of the expression with a ``^`` under the position."""
        if self.text is None:
            return str(self)
        lines_before = _LINE_BREAK.split(self.text[: max(self.position - 1, 0)])
        line_start = self.position - 1 - len(lines_before[-1])
        line = _LINE_BREAK.split(self.text[line_start:], maxsplit=1)[0]
        return f"{self}\n  {line}\n  {' ' * len(lines_before[-1])}^"


class SqlEvaluationError(SieveError):
    """Evaluating a selector on one message failed (RocketMQ's evaluator threw).

    Like RocketMQ, sievemq treats this as "the message does not match"; it is only visible through
    the strict evaluation entry points (``Selector.evaluate_tristate``, ``reference_evaluate(...,
    strict=True)``).
    """
