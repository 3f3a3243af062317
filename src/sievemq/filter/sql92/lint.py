"""What in a SQL92 selector is legal but most likely not what its author meant (pure; used by ``explain`` and the
CLI to warn, never to refuse: the semantics stay RocketMQ's).

The one case today: a comparison of two properties, ``region = eu``. Written for ``region = 'eu'``, it compares
the property ``region`` with a property named ``eu``; where a message has neither, both sides are NULL and
RocketMQ's ``=`` of two NULLs is TRUE, so the selector delivers messages without a ``region`` at all.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from sievemq.filter.sql92.ast import Compare, Expr, Property

__all__ = ["COMPARES_TWO_PROPERTIES", "PropertyComparison", "property_comparisons"]

COMPARES_TWO_PROPERTIES = "COMPARES_TWO_PROPERTIES"
"""The stable code of the warning (``explain``'s ``warnings[].code``)."""


@dataclass(frozen=True, slots=True)
class PropertyComparison:
    """``left op right``, both sides property names; ``pos`` where it starts in the expression."""

    left: str
    op: str
    right: str
    pos: int

    def hint(self) -> str:
        """What to tell the author."""
        return (f"{self.left} {self.op} {self.right} compares two properties ({self.right!r} is a property name, not "
                f"text): a message with neither matches (NULL = NULL is TRUE); for the text write "
                f"{self.left} {self.op} '{self.right}'")  # fmt: skip


def property_comparisons(tree: Expr) -> list[PropertyComparison]:
    """Every comparison in ``tree`` whose two sides are bare properties, in the order they appear."""
    out: list[PropertyComparison] = []
    stack: list[object] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, Compare) and isinstance(node.left, Property) and isinstance(node.right, Property):
            out.append(PropertyComparison(node.left.name, node.op, node.right.name, node.pos))
        if dataclasses.is_dataclass(node):
            for f in dataclasses.fields(node):
                value = getattr(node, f.name)
                if isinstance(value, tuple):
                    stack.extend(v for v in value if dataclasses.is_dataclass(v))
                elif dataclasses.is_dataclass(value):
                    stack.append(value)
    return sorted(out, key=lambda c: c.pos)
