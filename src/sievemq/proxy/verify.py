"""Message verification for 5.x consumers (docs/proxy.md §10): a broker's CONSUME_MESSAGE_DIRECTLY (309) for a
5.x client arrives on the proxy's broker connection (the proxy registered the client there under its own id) and
goes to the client as a Telemetry ``VerifyMessageCommand`` with a nonce; the client's ``VerifyMessageResult``
(same nonce, the outcome in the command's status) is the broker's answer.

The client's status, as RocketMQ's proxy reads it: OK is CR_SUCCESS, FAILED_TO_CONSUME_MESSAGE CR_LATER,
MESSAGE_CORRUPTED CR_RETURN_NULL. sievemq is plainer where RocketMQ's proxy answers SUCCESS with no result: a
client that says NOT_IMPLEMENTED (or UNSUPPORTED) is REQUEST_CODE_NOT_SUPPORTED, as a 4.x client without the
request; any other status is CR_THROW_EXCEPTION with the client's code and message in the remark; no answer in
time is SYSTEM_ERROR with reason CLIENT_NO_ANSWER. The Node.js client 1.0.8 answers NOT_IMPLEMENTED in a
``verify_message_command`` carrying the nonce instead of a ``verify_message_result``: taken alike.

Bounded: ``MAX_PENDING`` verifications wait at once, each at most its ``timeoutMillis``; a nonce is answered only
by the client it was sent to.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from dataclasses import dataclass

from sievemq.client.pop_api import PoppedMessage
from sievemq.protocol.consume_directly import CMResult, ConsumeDirectlyResult, DirectlyHeader
from sievemq.protocol.message import decode_record
from sievemq.protocol.reasons import REASON_FIELD, Reason
from sievemq.proxy.convert import message_of
from sievemq.proxy.v2 import definition_pb2 as pb
from sievemq.proxy.v2 import service_pb2 as svc
from sievemq.remoting.codes import ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection

__all__ = ["MAX_PENDING", "VerifyRelay", "answer_of"]

log = logging.getLogger(__name__)

MAX_PENDING = 256
"""Verifications waiting for their clients at once; more are refused with SYSTEM_BUSY."""
MARGIN_S = 0.3
"""The proxy stops waiting this much before the broker does, so the broker gets the proxy's answer."""

_RESULTS = {
    pb.OK: CMResult.CR_SUCCESS,
    pb.FAILED_TO_CONSUME_MESSAGE: CMResult.CR_LATER,
    pb.MESSAGE_CORRUPTED: CMResult.CR_RETURN_NULL,
}
_NOT_SUPPORTED = frozenset({pb.NOT_IMPLEMENTED, pb.UNSUPPORTED})


def answer_of(client_id: str, status: pb.Status) -> tuple[int, str, ConsumeDirectlyResult | None]:
    """The broker's answer (response code, remark, result body) for a 5.x client's verification status."""
    result = _RESULTS.get(status.code)
    if result is not None:
        return ResponseCode.SUCCESS, "", ConsumeDirectlyResult(result, f"from 5.x client {client_id}")
    name = pb.Code.Name(status.code) if status.code in pb.Code.values() else str(status.code)
    said = f"{name}" + (f": {status.message}" if status.message else "")
    if status.code in _NOT_SUPPORTED:
        return (ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                f"5.x client {client_id} does not verify messages (it answered {said})", None)  # fmt: skip
    return ResponseCode.SUCCESS, "", ConsumeDirectlyResult(CMResult.CR_THROW_EXCEPTION,
                                                           f"5.x client {client_id} answered {said}")  # fmt: skip


@dataclass
class _Pending:
    client_id: str
    future: asyncio.Future[pb.Status]


class VerifyRelay:
    """The Telemetry streams of 5.x clients, and the verifications sent on them."""

    def __init__(self) -> None:
        self.streams: dict[str, asyncio.Queue[svc.TelemetryCommand | None]] = {}
        self.pending: dict[str, _Pending] = {}

    # ------------------------------------------------------------------------------------------ streams
    def attach(self, client_id: str, queue: asyncio.Queue[svc.TelemetryCommand | None]) -> None:
        """A client's Telemetry stream (its latest one wins)."""
        if client_id:
            self.streams[client_id] = queue

    def detach(self, client_id: str, queue: asyncio.Queue[svc.TelemetryCommand | None]) -> None:
        """That stream ended (a newer stream of the client stays)."""
        if self.streams.get(client_id) is queue:
            del self.streams[client_id]

    def answered(self, client_id: str, cmd: svc.TelemetryCommand) -> bool:
        """A command the client sent: True when it answers a verification sent to it and still waiting (which it
        settles); anything else (another client's nonce, a late answer) changes nothing."""
        kind: str | None = cmd.WhichOneof("command")
        if kind == "verify_message_result":
            nonce = cmd.verify_message_result.nonce
        elif kind == "verify_message_command":  # the Node.js client's form of its NOT_IMPLEMENTED answer
            nonce = cmd.verify_message_command.nonce
        else:
            return False
        p = self.pending.get(nonce)
        if p is None or p.client_id != client_id or p.future.done():
            return False
        p.future.set_result(cmd.status)
        return True

    # ------------------------------------------------------------------------------------------ relaying
    async def relay(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """A broker's 309 for a 5.x client: ask it over Telemetry, answer with what it says."""
        try:
            h = DirectlyHeader.parse(cmd.ext_fields)
            msg, _ = decode_record(cmd.body)
        except ValueError as e:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"unreadable CONSUME_MESSAGE_DIRECTLY: {e}",
                                {REASON_FIELD: Reason.INVALID_HEADER})  # fmt: skip
        queue = self.streams.get(h.client_id)
        if queue is None:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"5.x client {h.client_id} has no Telemetry stream at "
                                "this proxy", {REASON_FIELD: Reason.CONSUMER_NOT_ONLINE})  # fmt: skip
        if len(self.pending) >= MAX_PENDING:
            return cmd.response(ResponseCode.SYSTEM_BUSY, f"{MAX_PENDING} verifications wait for clients already")
        nonce = secrets.token_hex(16)
        message = message_of(PoppedMessage(msg, "", 1), 1000)
        message.system_properties.ClearField("receipt_handle")
        ask = svc.TelemetryCommand(verify_message_command=svc.VerifyMessageCommand(nonce=nonce, message=message))
        try:
            queue.put_nowait(ask)
        except asyncio.QueueFull:
            return cmd.response(ResponseCode.SYSTEM_BUSY, f"5.x client {h.client_id} does not read its Telemetry "
                                "stream")  # fmt: skip
        future: asyncio.Future[pb.Status] = asyncio.get_running_loop().create_future()
        self.pending[nonce] = _Pending(h.client_id, future)
        wait = max(h.timeout_ms / 1000 - MARGIN_S, 0.1)
        try:
            status = await asyncio.wait_for(future, wait)
        except TimeoutError:
            why = f"5.x client {h.client_id} did not answer the verification within {wait:.1f} s"
            return cmd.response(ResponseCode.SYSTEM_ERROR, why, {REASON_FIELD: Reason.CLIENT_NO_ANSWER})
        finally:
            self.pending.pop(nonce, None)
        code, remark, result = answer_of(h.client_id, status)
        log.info("message %s verified by 5.x client %s: %s", h.msg_id, h.client_id,
                 result.consume_result if result else remark)  # fmt: skip
        return cmd.response(code, remark or None, body=result.encode() if result else b"")
