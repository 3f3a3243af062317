"""The ``-n/--namesrv`` option every client and admin command takes, defined once: its default, its environment
variable (shown in each ``--help``), and the banner line that points the CLI at a name server elsewhere."""

from __future__ import annotations

import click

DEFAULT_NAMESRV = "127.0.0.1:9876"
"""Where the CLI looks for a name server when neither ``-n`` nor ``$SIEVEMQ_NAMESRV`` says (``sievemq dev``'s)."""
NAMESRV_ENV = "SIEVEMQ_NAMESRV"

namesrv_option = click.option(
    "--namesrv",
    "-n",
    default=DEFAULT_NAMESRV,
    envvar=NAMESRV_ENV,
    show_envvar=True,
    show_default=True,
    help="name server address(es), ';'-separated",
)
"""``-n/--namesrv``: ``--help`` shows ``[env var: SIEVEMQ_NAMESRV; default: 127.0.0.1:9876]``."""


def export_line(namesrv_addr: str) -> str | None:
    """The shell line that points later CLI commands at ``namesrv_addr`` (``export SIEVEMQ_NAMESRV=...``), or None
    when the CLI finds it without one (it is the default)."""
    if namesrv_addr == DEFAULT_NAMESRV:
        return None
    return f"export {NAMESRV_ENV}={namesrv_addr}"
