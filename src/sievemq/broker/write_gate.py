"""What a broker's role allows a write: the gate the send, send-back and admin processors ask.

A master with no slaves lets everything through (``OPEN``); ``broker/replication.py``'s ``Replication`` refuses
writes on a slave and on a master behind its slave, and under SYNC_MASTER answers a send after a slave has it
(docs/protocol/replication.md §3).
"""

from __future__ import annotations

from typing import Protocol

from sievemq.errors import RemotingError
from sievemq.remoting.codes import ResponseCode

__all__ = ["OPEN", "WriteGate"]


class WriteGate(Protocol):
    """Decides whether this broker takes a write, and when a stored send may be answered."""

    def write_refusal(self) -> RemotingError | None:
        """The error to answer a write with, or None to take it."""
        ...

    async def replicated(self, end: int) -> int:
        """Wait until a send whose records end at commit-log offset ``end`` may be answered; its response code."""
        ...

    def replicated_now(self, end: int) -> int | None:
        """``replicated``'s code when it is known without waiting (it may raise as ``replicated`` does); None when
        the answer must wait for replicas."""
        ...


class _Open:
    def write_refusal(self) -> RemotingError | None:
        return None

    async def replicated(self, end: int) -> int:
        return ResponseCode.SUCCESS

    def replicated_now(self, end: int) -> int | None:
        return ResponseCode.SUCCESS


OPEN: WriteGate = _Open()
"""The gate of a broker without replication duties: every write is taken and answered at once."""
