"""The ``sievemq`` command, the top layer: every click command lives here (``app.py`` holds the root group and the
server roles; the others add their groups to it). Nothing below imports this package."""

from __future__ import annotations


def main() -> None:
    """The ``sievemq`` console script (``python -m sievemq.cli`` too)."""
    from sievemq.cli.app import main as group

    group()
