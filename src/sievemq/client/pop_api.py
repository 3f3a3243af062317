"""POP requests over one remoting connection (docs/pop.md §4): what the gRPC proxy uses to serve 5.x consumers,
and any program that wants broker-side leases instead of offsets.

Like ``api.py``: each function returns a typed result or raises ``RemotingError`` with the code and reason.
"""

from __future__ import annotations

from dataclasses import dataclass

from sievemq.errors import RemotingError
from sievemq.protocol.message import MessageExt, decode_records
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection

__all__ = ["PopResult", "PoppedMessage", "ack_message", "change_invisible_time", "pop_message"]


@dataclass(frozen=True)
class PoppedMessage:
    """One message handed out under a lease."""

    message: MessageExt
    handle: str
    """The receipt handle: ack it or change its invisible time with it."""
    attempt: int
    """1 for the first delivery."""


@dataclass(frozen=True)
class PopResult:
    """What a POP handed out (nothing: ``messages`` empty)."""

    messages: list[PoppedMessage]
    pop_time: int
    invisible_ms: int
    rest: int


async def pop_message(
    conn: Connection,
    group: str,
    topic: str,
    queue_id: int,
    *,
    max_nums: int = 32,
    invisible_ms: int = 30_000,
    poll_ms: int = 0,
    expression: str = "*",
    expression_type: str = "TAG",
    from_latest: bool = True,
    client_id: str | None = None,
    order: bool = False,
    attempt_id: str | None = None,
    timeout: float | None = None,
) -> PopResult:
    """POP_MESSAGE: up to ``max_nums`` messages of one queue, invisible to the group for ``invisible_ms``.

    With ``order`` (a FIFO group) the broker hands out one batch of a queue at a time, in queue order, and a locked
    queue nothing until its batch is acked or its invisible time ran out (docs/pop.md §5); ``attempt_id`` names the
    POP, so that its retry (the same id) gets the same batch again."""
    fields = {
        "consumerGroup": group,
        "topic": topic,
        "queueId": str(queue_id),
        "maxMsgNums": str(max_nums),
        "invisibleTime": str(invisible_ms),
        "pollTime": str(poll_ms),
        "initMode": "1" if from_latest else "0",
        "expType": expression_type,
        "exp": expression,
    }
    if client_id is not None:
        fields["clientId"] = client_id
    if order:
        fields["order"] = "true"
    if attempt_id:
        fields["attemptId"] = attempt_id
    wait = timeout if timeout is not None else poll_ms / 1000.0 + 5.0
    resp = await conn.request(RemotingCommand.request(RequestCode.POP_MESSAGE, fields), wait)
    f = resp.ext_fields
    head = (int(f.get("popTime", "0")), int(f.get("invisibleTime", "0")), int(f.get("restNum", "0")))
    if resp.code == ResponseCode.PULL_NOT_FOUND:
        return PopResult([], *head)
    if resp.code != ResponseCode.SUCCESS:
        raise RemotingError.from_response(resp.code, resp.remark, f)
    msgs = decode_records(resp.body) if resp.body else []
    handles = f.get("handles", "").split(";")
    attempts = f.get("attempts", "").split(",")
    if len(handles) != len(msgs) or len(attempts) != len(msgs):
        raise RemotingError(ResponseCode.SYSTEM_ERROR, f"POP answer holds {len(msgs)} messages and "
                            f"{len(handles)} handles: not a POP answer")  # fmt: skip
    return PopResult([PoppedMessage(m, h, int(a)) for m, h, a in zip(msgs, handles, attempts, strict=True)], *head)


async def ack_message(
    conn: Connection, group: str, handle: str, timeout: float = 5.0, *, dead_letter: bool = False
) -> None:
    """ACK_MESSAGE: the message of ``handle`` is consumed (RECEIPT_HANDLE_EXPIRED: it was delivered again); with
    ``dead_letter`` it goes to the group's dead-letter topic instead, in the same step."""
    fields = {"consumerGroup": group, "extraInfo": handle}
    if dead_letter:
        fields["deadLetter"] = "true"
    resp = await conn.request(RemotingCommand.request(RequestCode.ACK_MESSAGE, fields), timeout)
    if resp.code != ResponseCode.SUCCESS:
        raise RemotingError.from_response(resp.code, resp.remark, resp.ext_fields)


async def change_invisible_time(
    conn: Connection, group: str, handle: str, invisible_ms: int, timeout: float = 5.0
) -> str:
    """CHANGE_MESSAGE_INVISIBLETIME: invisible for ``invisible_ms`` from now; the message's new receipt handle."""
    fields = {"consumerGroup": group, "extraInfo": handle, "invisibleTime": str(invisible_ms)}
    resp = await conn.request(RemotingCommand.request(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, fields), timeout)
    if resp.code != ResponseCode.SUCCESS:
        raise RemotingError.from_response(resp.code, resp.remark, resp.ext_fields)
    return resp.ext_fields.get("extraInfo", "")
