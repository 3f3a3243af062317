"""``python -m sievemq.cli ARGS``: the ``sievemq`` command."""

from sievemq.cli import main

main()
