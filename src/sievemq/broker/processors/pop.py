"""POP_MESSAGE (200050), ACK_MESSAGE (200051), CHANGE_MESSAGE_INVISIBLETIME (200053): POP consumption
(docs/pop.md §4). The checks at the edge are here; ``broker/pop/service.py`` does the work.

POP_MESSAGE header: ``consumerGroup``, ``topic``, ``queueId`` (-1: any queue of the topic on this broker),
``maxMsgNums`` (1-64), ``invisibleTime`` (ms, 1 s to 12 h), ``pollTime`` (ms the broker may wait when there is
nothing; at most 25 s), ``initMode`` (0: a group's first POP starts at the oldest messages, 1 (default): RocketMQ's
rule, ``offset_rules.pop_start``), ``expType`` (TAG or SQL92) and ``exp`` (the filter; none or ``*``: everything),
``clientId`` (for the subscription-consistency check), ``order`` (true: orderly POP for a FIFO group, docs/pop.md
§5) and ``attemptId`` (an orderly POP's id; its retry with the same id gets the same batch). The answer: the records
in the body (as a pull's), and in the header ``handles`` (the receipt handles, ``;``-separated, in the records'
order), ``attempts`` (each one's delivery attempt, ``,``-separated), ``popTime``, ``invisibleTime``, ``restNum``.
Nothing to hand out: PULL_NOT_FOUND.

ACK_MESSAGE header: ``consumerGroup``, ``extraInfo`` (the receipt handle), ``deadLetter`` (true: to the group's
dead-letter topic now, as ForwardMessageToDeadLetterQueue asks). CHANGE_MESSAGE_INVISIBLETIME: the same and
``invisibleTime``; its answer's ``extraInfo`` is the new receipt handle.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from sievemq.broker.clients import ConsumerManager
from sievemq.broker.filter_manager import ConsumerFilterManager
from sievemq.broker.filters import build_filter
from sievemq.broker.groups import SubscriptionGroupManager
from sievemq.broker.pop.service import PopRequest, PopService
from sievemq.broker.stats import BrokerStats
from sievemq.broker.topics import TopicConfigManager
from sievemq.broker.write_gate import OPEN, WriteGate
from sievemq.errors import RemotingError
from sievemq.protocol.heartbeat import Subscription
from sievemq.protocol.reasons import Reason
from sievemq.protocol.receipt_handle import HandleError, ReceiptHandle
from sievemq.protocol.route import PERM_READ
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection
from sievemq.remoting.headers import get_bool, get_str, int_or, require_int, require_str
from sievemq.remoting.server import ProcessorTable

__all__ = ["MAX_INVISIBLE_MS", "MAX_POP_NUMS", "MIN_INVISIBLE_MS", "PopProcessor"]

MIN_INVISIBLE_MS = 1_000
MAX_INVISIBLE_MS = 12 * 3600 * 1000
MAX_POP_NUMS = 64
MAX_POLL_MS = 25_000
MAX_ATTEMPT_ID = 64
_ATTEMPT_ID_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:"


def _bad(what: str) -> RemotingError:
    return RemotingError(ResponseCode.SYSTEM_ERROR, what, Reason.INVALID_HEADER)


def parse_handle(fields: dict[str, str]) -> ReceiptHandle:
    """The request's ``extraInfo`` as a receipt handle (RECEIPT_HANDLE_INVALID when it is not one)."""
    try:
        return ReceiptHandle.parse(require_str(fields, "extraInfo"))
    except HandleError as e:
        raise RemotingError(ResponseCode.SYSTEM_ERROR, str(e), Reason.RECEIPT_HANDLE_INVALID) from None


def invisible_ms(fields: dict[str, str], lowest: int = MIN_INVISIBLE_MS) -> int:
    """``invisibleTime``, within ``lowest`` (1 s for a POP, 0 for a change: visible again now) to 12 h."""
    ms = require_int(fields, "invisibleTime")
    if not lowest <= ms <= MAX_INVISIBLE_MS:
        raise _bad(f"invisibleTime must be {lowest} to {MAX_INVISIBLE_MS} ms, got {ms}")
    return ms


@dataclass
class PopProcessor:
    """Answers the three POP requests."""

    pop: PopService
    topics: TopicConfigManager
    groups: SubscriptionGroupManager
    consumers: ConsumerManager
    filters: ConsumerFilterManager
    stats: BrokerStats
    property_filter: bool = True
    gate: WriteGate = OPEN
    """A slave refuses: POP state changes are writes (its consumers POP from the master)."""

    def register(self, table: ProcessorTable) -> None:
        """Put the POP requests into ``table``."""
        table.register(RequestCode.POP_MESSAGE, self.pop_message)
        table.register(RequestCode.ACK_MESSAGE, self.ack_message)
        table.register(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, self.change_invisible_time)

    def _writable(self) -> None:
        refusal = self.gate.write_refusal()
        if refusal is not None:
            raise refusal

    def _group(self, group: str) -> None:
        gc = self.groups.find(group)
        if gc is None:
            raise RemotingError(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group [{group}] not exist")
        if not gc.consumeEnable:
            raise RemotingError(ResponseCode.NO_PERMISSION, f"subscription group [{group}] consumption is disabled")

    def request(self, fields: dict[str, str]) -> PopRequest:
        """The POP_MESSAGE header, checked: the group may consume, the queue exists and is readable."""
        group, topic = require_str(fields, "consumerGroup"), require_str(fields, "topic")
        qid = require_int(fields, "queueId")
        self._group(group)
        tc = self.topics.get(topic)
        if tc is None:
            raise RemotingError(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!")
        if not tc.perm & PERM_READ:
            raise RemotingError(ResponseCode.NO_PERMISSION, f"the topic[{topic}] pulling message is forbidden")
        if not -1 <= qid < tc.read_queue_nums:
            raise _bad(f"queueId {qid} is illegal: topic {topic} has {tc.read_queue_nums} readable queues")
        nums = int_or(fields, "maxMsgNums", 32)
        if not 1 <= nums <= MAX_POP_NUMS:
            raise _bad(f"maxMsgNums must be 1 to {MAX_POP_NUMS}, got {nums}")
        poll = min(int_or(fields, "pollTime", 0), MAX_POLL_MS)
        attempt = get_str(fields, "attemptId") or ""
        if len(attempt) > MAX_ATTEMPT_ID or not attempt.isascii() or attempt.strip(_ATTEMPT_ID_CHARS):
            raise _bad(f"attemptId must be at most {MAX_ATTEMPT_ID} characters of letters, digits and '-_.:', got "
                       f"{attempt[:80]!r}")  # fmt: skip
        return PopRequest(group, topic, qid, nums, invisible_ms(fields), poll, int_or(fields, "initMode", 1) != 0,
                          get_bool(fields, "order"), attempt)  # fmt: skip

    def _check_consistency(self, client_id: str | None, group: str, topic: str) -> None:
        info = self.consumers.get(group)
        if info is None or client_id is None:
            return
        remark = info.remark(client_id, topic)
        if remark is not None:
            raise RemotingError(ResponseCode.SUBSCRIPTION_NOT_EXIST, remark, Reason.SUBSCRIPTION_INCONSISTENT)

    async def pop_message(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """200050: hand out messages of one queue under leases."""
        self._writable()
        f = cmd.ext_fields
        req = self.request(f)
        self._check_consistency(get_str(f, "clientId"), req.group, req.topic)
        exp = get_str(f, "exp") or "*"
        sub = Subscription(req.topic, exp, get_str(f, "expType") or "TAG", 0)
        flt = build_filter(sub, req.group, self.filters, self.property_filter)
        answer = await self.pop.pop(req, flt)
        fields = {
            "popTime": str(int(time.time() * 1000)),
            "invisibleTime": str(req.invisible_ms),
            "restNum": str(answer.rest),
        }
        if not answer.messages:
            return cmd.response(ResponseCode.PULL_NOT_FOUND, "no message to pop", fields)
        self.stats.get(req.topic, len(answer.messages), sum(len(m.record) for m in answer.messages), req.group)
        fields["handles"] = ";".join(m.handle.encode() for m in answer.messages)
        fields["attempts"] = ",".join(str(m.attempt) for m in answer.messages)
        return cmd.response(ResponseCode.SUCCESS, None, fields, b"".join(m.record for m in answer.messages))

    async def ack_message(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """200051: the message of the receipt handle is consumed."""
        self._writable()
        group = require_str(cmd.ext_fields, "consumerGroup")
        self._group(group)
        dead = (get_str(cmd.ext_fields, "deadLetter") or "").lower() == "true"
        await self.pop.ack(group, parse_handle(cmd.ext_fields), dead)
        return cmd.response(ResponseCode.SUCCESS)

    async def change_invisible_time(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """200053: the message stays invisible for ``invisibleTime`` from now; the answer carries its new handle."""
        self._writable()
        group = require_str(cmd.ext_fields, "consumerGroup")
        self._group(group)
        handle = await self.pop.change(group, parse_handle(cmd.ext_fields), invisible_ms(cmd.ext_fields, 0))
        return cmd.response(ResponseCode.SUCCESS, None, {"extraInfo": handle.encode()})
