"""The processor table is the one place a request code finds its handler: a code registered twice is refused at
wiring time instead of silently replacing the first handler (the roles' real tables are built, and so checked, by
tests/unit/acl/test_classification.py)."""

from __future__ import annotations

import pytest

from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection
from sievemq.remoting.server import ProcessorTable


async def _first(conn: Connection, cmd: RemotingCommand) -> RemotingCommand | None:
    return None


async def _second(conn: Connection, cmd: RemotingCommand) -> RemotingCommand | None:
    return None


def test_a_code_registered_twice_is_refused() -> None:
    table = ProcessorTable("test")
    table.register(10, _first)
    with pytest.raises(ValueError, match="10"):
        table.register(10, _second)
    assert table.codes() == [10]

