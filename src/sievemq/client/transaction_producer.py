"""Transactional sends (docs/transactions.md §5): a half message, the local transaction, then commit or rollback.

``send_in_transaction`` sends the message as a half message (no consumer sees it), runs the application's local
transaction, and ends the transaction with its answer. When the answer is UNKNOWN (or the producer dies first),
the broker asks a producer of the same group later (CHECK_TRANSACTION_STATE); ``check_listener`` answers.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Unpack

from sievemq.client import api
from sievemq.client.errors import MessageValidationError
from sievemq.client.message import Message, SendResult, SendStatus
from sievemq.client.options import ClientOptions
from sievemq.client.producer import Producer, ProducerKwargs
from sievemq.client.tracing import trace_end_transaction
from sievemq.client.validation import validate_group
from sievemq.protocol.message import MessageExt, PropertyKey
from sievemq.protocol.msgid import parse_offset_msg_id
from sievemq.protocol.names import AUTO_CREATE_TOPIC_KEY
from sievemq.protocol.sysflag import TRANSACTION_PREPARED_TYPE
from sievemq.remoting.connection import Connection

__all__ = ["CheckListener", "LocalTransaction", "TransactionProducer", "TransactionSendResult", "TransactionState"]

log = logging.getLogger(__name__)


class TransactionState(enum.IntEnum):
    """How a local transaction ended (the values are the wire's ``commitOrRollback``)."""

    COMMIT = 8
    ROLLBACK = 12
    UNKNOWN = 0
    """Not known yet: the broker checks back later."""

    def __str__(self) -> str:
        """The name (``print(r.state)`` shows ``COMMIT``, not ``8``); ``int(state)`` is the wire value."""
        return self.name

    def __format__(self, spec: str) -> str:
        """The name in f-strings too (``f"{state:>8}"`` pads it); a numeric format (``:d``, ``:x``) the value."""
        if spec and spec[-1] in "bcdoxXneEfFgG%":
            return int.__format__(self, spec)
        return format(self.name, spec)


LocalTransaction = Callable[[Message, Any], Awaitable[TransactionState]]
"""``async def local(msg, arg) -> TransactionState``: runs the application's transaction."""
CheckListener = Callable[[MessageExt], Awaitable[TransactionState]]
"""``async def check(msg) -> TransactionState``: the state of the transaction of a half message, asked by a broker
(``msg.uniq_key`` is the ``msg_id`` the send returned; ``msg.topic`` the real topic)."""


@dataclass(frozen=True)
class TransactionSendResult:
    """The half message's send result and the state the transaction was ended with."""

    send: SendResult
    state: TransactionState
    end_error: str | None = None
    """Why END_TRANSACTION could not be delivered (the broker's check settles it then), or None."""


class TransactionProducer(Producer):
    """A producer whose sends are transactions. ``check_listener`` answers the broker's check-backs."""

    _kind = "transaction producer"

    def __init__(
        self,
        namesrv: str | Sequence[str] | None = None,
        group: str = "DEFAULT_TRANSACTION_PRODUCER",
        *,
        check_listener: CheckListener,
        topics: Sequence[str] = (),
        options: ClientOptions | None = None,
        **settings: Unpack[ProducerKwargs],
    ) -> None:
        """``topics``: where this producer sends; their brokers (and those of the auto-creation template) get
        its heartbeats from the start, so a restarted application receives the checks of transactions its
        previous run left open before it sends anything. ``options`` and the other keyword arguments: as
        ``Producer``'s."""
        validate_group(group)
        super().__init__(namesrv, group, options=options, **settings)
        self.check_listener = check_listener
        self._known_topics = tuple(topics)

    async def start(self) -> None:
        """Start, and make the brokers of ``topics`` and of the auto-creation template know this producer."""
        await super().start()
        inst = self._running()
        for topic in (*self._known_topics, AUTO_CREATE_TOPIC_KEY):
            try:
                route = await inst.fetch_route(topic)
            except Exception as e:
                log.debug("route of %s not fetched at start: %s", topic, e)
                continue
            if route is not None:
                inst.remember_brokers(route)

    async def send_in_transaction(
        self, msg: Message, local_transaction: LocalTransaction, arg: Any = None, *, timeout: float | None = None
    ) -> TransactionSendResult:
        """Send ``msg`` as a half message, run ``local_transaction(msg, arg)``, and commit or roll back.

        A half message the broker did not take (status other than SEND_OK) is rolled back without running the
        local transaction; a local transaction that raises counts as UNKNOWN (the broker checks back).
        """
        self._running()
        if msg.delay_level:
            raise MessageValidationError("a transactional message cannot have a delay level")
        out = self.prepare(msg)
        out.properties[PropertyKey.TRAN_MSG] = "true"
        out.properties[PropertyKey.PGROUP] = self.group
        out.sys_flag |= TRANSACTION_PREPARED_TYPE
        result = await self.send_outgoing(out, timeout=timeout)
        remark: str | None = None
        if result.status != SendStatus.SEND_OK:
            state = TransactionState.ROLLBACK
        else:
            try:
                state = TransactionState(await local_transaction(msg, arg))
            except Exception as e:
                log.warning("local transaction of message %s raised %r: the broker will check back", result.msg_id, e)
                state, remark = TransactionState.UNKNOWN, f"local transaction raised {type(e).__name__}: {e}"
        error = await self._end(result, state, remark)
        if self._tracer is not None:  # Java's EndTransactionTraceHook (docs/traces.md §5)
            addr = await self.master_addr(result.message_queue)
            trace_end_transaction(self._tracer, self.group, out, result.msg_id, addr, int(state), result.msg_id,
                                  False)  # fmt: skip
        return TransactionSendResult(result, state, error)

    async def _end(self, result: SendResult, state: TransactionState, remark: str | None) -> str | None:
        inst = self._running()
        try:
            conn = await inst.conn(await self.master_addr(result.message_queue))
            _, _, half_phy = parse_offset_msg_id(result.offset_msg_id)
            await api.end_transaction(conn, self.group, result.queue_offset, half_phy, int(state), result.msg_id,
                                      remark=remark, timeout=self.config.request_timeout)  # fmt: skip
        except Exception as e:
            log.warning("ending the transaction of %s failed (%s): the broker will check back", result.msg_id, e)
            return f"{type(e).__name__}: {e}"
        return None

    def check_transaction(self, conn: Connection, fields: Mapping[str, str], msg: MessageExt) -> None:
        """A broker's CHECK_TRANSACTION_STATE (from the client instance): ask ``check_listener``, answer on
        ``conn`` (the broker that asked)."""
        self._track(asyncio.ensure_future(self._answer_check(conn, dict(fields), msg)))

    async def _answer_check(self, conn: Connection, fields: dict[str, str], msg: MessageExt) -> None:
        msg_id = fields.get("msgId") or msg.uniq_key or ""
        try:
            state = TransactionState(await self.check_listener(msg))
        except Exception as e:
            log.warning("check listener raised %r for message %s: answered UNKNOWN", e, msg_id)
            return
        if state == TransactionState.UNKNOWN:
            return
        try:
            await api.end_transaction(
                conn,
                self.group,
                int(fields.get("tranStateTableOffset") or 0),
                int(fields.get("commitLogOffset") or 0),
                int(state),
                msg_id,
                from_check=True,
                timeout=self.config.request_timeout,
            )
        except Exception as e:
            log.warning("answering the broker's check of %s failed: %s", msg_id, e)
            return
        if self._tracer is not None:
            host = f"{conn.peer[0]}:{conn.peer[1]}"
            trace_end_transaction(self._tracer, self.group, msg, msg_id, host, int(state),
                                  fields.get("transactionId") or msg_id, True)  # fmt: skip
