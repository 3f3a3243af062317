"""How the operator's commands print: tables (rich) for people, JSON for programs."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import click
import orjson

__all__ = ["consume_type_word", "echo_json", "print_table"]


def echo_json(document: Any) -> None:
    """``document`` as indented JSON on stdout."""
    click.echo(orjson.dumps(document, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode())


def print_table(
    columns: Sequence[str], rows: Sequence[Sequence[Any]], *, numeric: Sequence[str] = (), title: str | None = None
) -> None:
    """A table on stdout (plain text when stdout is not a terminal; never wrapped or cut)."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    tty = sys.stdout.isatty()
    console = Console(highlight=False, soft_wrap=False, width=None if tty else 100_000, no_color=not tty)
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, title=title, title_justify="left")
    for c in columns:
        table.add_column(c, justify="right" if c in numeric else "left", no_wrap=True, overflow="ignore")
    for row in rows:
        table.add_row(*("-" if v is None else str(v) for v in row))
    with console.capture() as captured:
        console.print(table)
    click.echo("\n".join(line.rstrip() for line in captured.get().splitlines()))


_TYPES = {"CONSUME_PASSIVELY": "push", "CONSUME_ACTIVELY": "pull", "CONSUME_POP": "pop"}


def consume_type_word(consume_type: str | None) -> str:
    """``push``, ``pull`` or ``pop`` for RocketMQ's consume type names; ``-`` when no client is online."""
    if not consume_type:
        return "-"
    return _TYPES.get(consume_type, consume_type)
