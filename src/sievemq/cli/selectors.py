"""The selector options, one vocabulary for every command that takes a selector (``consume``, ``explain``):
``--tag EXPR`` (a tag expression) and ``--sql EXPR`` (a SQL92 selector on properties), as ``produce --tag`` names a
message's tag. ``--expr``/``-e``, ``consume``'s old spelling of ``--tag``, still works everywhere, hidden from
``--help``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

TAG = "TAG"
SQL92 = "SQL92"


def selector_options(tag_help: str) -> Callable[[F], F]:
    """``--tag EXPR``, ``--sql EXPR`` and the hidden alias ``--expr``/``-e`` (parameters ``tag``, ``sql``,
    ``expr``); ``selector_of`` makes one selector of them."""

    def add(f: F) -> F:
        f = click.option("--expr", "-e", "expr", default=None, hidden=True,
                         help="old spelling of --tag")(f)  # fmt: skip
        f = click.option("--sql", "sql", metavar="EXPR", default=None,
                         help="a SQL92 selector on properties, e.g. \"region = 'eu' AND amount > 100\"")(f)  # fmt: skip
        return click.option("--tag", "tag", metavar="EXPR", default=None, help=tag_help)(f)

    return add


def selector_of(tag: str | None, sql: str | None, expr: str | None, default_tag: str | None) -> tuple[str, str]:
    """``(kind, expression)``: ``(TAG, ...)`` or ``(SQL92, ...)`` of the options given, ``(TAG, default_tag)`` when
    none was; a usage error (exit 2) for two at once, or none without a default."""
    given = [(name, value) for name, value in (("--tag", tag), ("--expr", expr), ("--sql", sql)) if value is not None]
    if len(given) > 1:
        raise click.UsageError(f"{' and '.join(n for n, _ in given)} exclude each other: give one selector, --tag EXPR "
                               "(a tag expression) or --sql EXPR (a SQL92 selector)")  # fmt: skip
    if not given:
        if default_tag is None:
            raise click.UsageError("give a selector: --tag EXPR (a tag expression) or --sql EXPR (a SQL92 selector)")
        return TAG, default_tag
    name, value = given[0]
    return (SQL92, value) if name == "--sql" else (TAG, value)


def sql_warnings(kind: str, expression: str) -> list[str]:
    """What a SQL92 selector says that its author most likely did not mean (``region = eu`` compares two
    properties: filter/sql92/lint.py); [] for tags, a clean selector, or one that does not parse (the broker says
    why)."""
    if kind != SQL92:
        return []
    from sievemq.filter.sql92 import SqlError, parse
    from sievemq.filter.sql92.lint import property_comparisons

    try:
        tree = parse(expression)
    except SqlError:
        return []
    return [c.hint() for c in property_comparisons(tree)]

