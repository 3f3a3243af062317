"""Receipt handles: what a POP consumer is given for each message it received, and hands back to ack it or to
change its invisible time (docs/pop.md §2). Pure: no I/O.

A handle is the text ``1 <broker> <topic> <queueId> <queueOffset> <token>``: the version, where the message is,
and the token of the lease it was delivered under. The token changes with every delivery and every change of
invisible time, so an old handle of a message delivered again no longer acks it. A handle is hostile input: it is
parsed strictly (``HandleError`` for anything else) before any of it is used.
"""

from __future__ import annotations

from dataclasses import dataclass

from sievemq.protocol.names import group_problem, topic_problem

__all__ = ["MAX_HANDLE_CHARS", "HandleError", "ReceiptHandle"]

MAX_HANDLE_CHARS = 512
_VERSION = "1"
_INT64_MAX = (1 << 63) - 1
_INT32_MAX = (1 << 31) - 1


class HandleError(ValueError):
    """The text is not a receipt handle this broker makes."""


@dataclass(frozen=True, slots=True)
class ReceiptHandle:
    """One delivery of one message: ``token`` names the lease."""

    broker: str
    topic: str
    queue_id: int
    offset: int
    token: int

    def encode(self) -> str:
        """The handle's text."""
        return f"{_VERSION} {self.broker} {self.topic} {self.queue_id} {self.offset} {self.token}"

    @classmethod
    def parse(cls, text: str) -> ReceiptHandle:
        """Read a handle (``HandleError`` unless it is exactly what ``encode`` makes, with legal names)."""
        if not text or len(text) > MAX_HANDLE_CHARS:
            raise HandleError("a receipt handle is 1 to 512 characters")
        parts = text.split(" ")
        if len(parts) != 6 or parts[0] != _VERSION:
            raise HandleError("not a sievemq receipt handle (version 1, six fields)")
        _, broker, topic, qid, offset, token = parts
        problem = group_problem(broker, "broker") or topic_problem(topic)
        if problem is not None:
            raise HandleError(f"receipt handle: {problem}")
        return cls(broker, topic, _number(qid, _INT32_MAX), _number(offset, _INT64_MAX), _number(token, _INT64_MAX))


def _number(text: str, highest: int) -> int:
    if not text.isdecimal() or len(text) > 19 or text != str(int(text)):
        raise HandleError(f"receipt handle: {text[:24]!r} is not a non-negative number")
    value = int(text)
    if value > highest:
        raise HandleError(f"receipt handle: {value} is out of range")
    return value
