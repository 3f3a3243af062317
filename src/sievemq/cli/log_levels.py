"""How much the ``sievemq`` command logs (on stderr).

Servers (``dev``, ``namesrv``, ``broker``, ``proxy``, ``filtersrv``) log INFO by default: an operator wants to see
them start, register and drop peers. Client and admin commands (``produce``, ``consume``, ``topic ...``) print
their answers on stdout and log only warnings and errors, so their output is what the user asked for; ``-v`` shows
their INFO logs, ``-vv`` DEBUG. ``sievemq --log-level LEVEL`` wins over both.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
ROLE_LEVEL = logging.INFO
CLIENT_LEVEL = logging.WARNING
_VERBOSE_HELP = "log INFO lines on stderr (-vv: DEBUG)"
_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"


class _State:
    explicit: int | None = None
    """The level given with ``--log-level`` (None: the command's default)."""


def setup(level: str | None) -> None:
    """Log to stderr at ``level`` (one of ``LEVELS``, any letter case), else at the client commands' level until a
    server role raises it (``role_level``)."""
    _State.explicit = logging.getLevelNamesMapping()[level.upper()] if level else None
    logging.basicConfig(format=_FORMAT, stream=sys.stderr)
    logging.getLogger().setLevel(_State.explicit if _State.explicit is not None else CLIENT_LEVEL)


def role_level() -> None:
    """A server role starts: INFO, unless ``--log-level`` said otherwise."""
    if _State.explicit is None:
        logging.getLogger().setLevel(ROLE_LEVEL)


def _verbosity(ctx: click.Context, param: click.Parameter, count: int) -> None:
    if count and _State.explicit is None:
        logging.getLogger().setLevel(logging.INFO if count == 1 else logging.DEBUG)


def log_level_option(f: F) -> F:
    """``--log-level`` of the ``sievemq`` command itself (refuses anything but ``LEVELS``)."""
    return click.option(
        "--log-level",
        type=click.Choice(LEVELS, case_sensitive=False),
        default=None,
        help="log level on stderr [default: INFO for the servers, WARNING for client and admin commands]",
    )(f)


def _verbose_param() -> click.Option:
    return click.Option(
        ["-v", "--verbose"],
        count=True,
        expose_value=False,
        callback=_verbosity,
        help=_VERBOSE_HELP,
    )


def leaf_commands(cmd: click.Command) -> Iterator[click.Command]:
    """``cmd`` itself, or every command below a group (recursively)."""
    if isinstance(cmd, click.Group):
        for sub in cmd.commands.values():
            yield from leaf_commands(sub)
    else:
        yield cmd


def add_verbose(commands: Iterable[click.Command]) -> None:
    """Give each command (every command of a group) ``-v``, unless it has a ``-v`` or ``--verbose`` already."""
    for leaf in (leaf for cmd in commands for leaf in leaf_commands(cmd)):
        taken = {opt for p in leaf.params for opt in (*p.opts, *p.secondary_opts)}
        if not taken & {"-v", "--verbose"}:
            leaf.params.append(_verbose_param())
