"""The records of a transaction, as the store keeps them (docs/transactions.md §2). Pure: no I/O.

- A **half** message is the producer's message parked in ``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0, its real topic and
  queue in ``REAL_TOPIC`` / ``REAL_QID``, its transaction bits cleared (so it has a consume-queue entry there and in
  no topic a consumer reads).
- An **op** record in ``RMQ_SYS_TRANS_OP_HALF_TOPIC`` queue 0 says what became of a half: its body is the half's
  queue offset in decimal (as RocketMQ writes it), its tag the kind: ``d`` committed or rolled back (``TRAN_OP``
  says which: commit, rollback, expired), ``c`` checked once more.
- A transaction rolled back after ``transactionCheckMax`` unanswered checks leaves a copy of its half message in
  ``TRANS_CHECK_MAX_TIME_TOPIC`` (written before its op record).
- A **commit** record is the message rebuilt from its half, in its real topic and queue, transaction bits COMMIT,
  ``prepared_transaction_offset`` the half's commit-log offset, its properties as Apache RocketMQ leaves them. It is
  written right after its op record.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from sievemq.protocol.message import MessageExt, PropertyKey
from sievemq.protocol.names import TRANS_CHECK_MAX_TIME_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from sievemq.protocol.sysflag import TRANSACTION_COMMIT_TYPE, TRANSACTION_NOT_TYPE, reset_transaction_value

__all__ = [
    "OP_KIND",
    "OpKind",
    "OpRecord",
    "commit_message",
    "half_message",
    "op_message",
    "parse_op",
    "set_aside_message",
]

OP_KIND = "TRAN_OP"
"""Property of an op record: what became of the half (``OpKind``)."""
_DONE_TAG = "d"
_CHECKED_TAG = "c"


class OpKind(StrEnum):
    """What an op record records."""

    COMMIT = "commit"
    ROLLBACK = "rollback"
    EXPIRED = "expired"
    """Rolled back by the broker after ``transactionCheckMax`` unanswered checks."""
    CHECKED = "checked"
    """One more CHECK_TRANSACTION_STATE was sent (counts survive a restart)."""

    @property
    def resolves(self) -> bool:
        """True for the kinds that end the transaction."""
        return self is not OpKind.CHECKED


@dataclass(frozen=True, slots=True)
class OpRecord:
    """A parsed op record."""

    half_offset: int
    """Queue offset of the half message in ``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0."""
    kind: OpKind


def half_message(msg: MessageExt) -> MessageExt:
    """``msg`` (a producer's message with ``TRAN_MSG=true``) parked as a half message, in place; its message id is
    also its ``__transactionId__``, as Apache RocketMQ stores it (check-backs and the commit carry it)."""
    uniq = msg.properties.get(PropertyKey.UNIQ_KEY)
    if uniq:
        msg.properties[PropertyKey.TRANSACTION_ID] = uniq
    msg.properties[PropertyKey.REAL_TOPIC] = msg.topic
    msg.properties[PropertyKey.REAL_QID] = str(msg.queue_id)
    msg.sys_flag = reset_transaction_value(msg.sys_flag, TRANSACTION_NOT_TYPE)
    msg.topic = TRANS_HALF_TOPIC
    msg.queue_id = 0
    return msg


def commit_message(half: MessageExt, checks: int = 0) -> MessageExt:
    """The message a commit stores: the half's topic, queue and transaction bits restored (ValueError when the half
    has no usable ``REAL_TOPIC`` / ``REAL_QID``). As Apache RocketMQ stores it: ``TRAN_MSG`` stays, the message id
    is also its ``__transactionId__``, and a commit answering the broker's ``checks``-th check-back carries
    ``TRANSACTION_CHECK_TIMES`` = ``checks``."""
    props = dict(half.properties)
    topic = props.pop(PropertyKey.REAL_TOPIC, "")
    qid = props.pop(PropertyKey.REAL_QID, "")
    if not topic or not qid.isdecimal():
        raise ValueError(f"half message at {half.commit_log_offset} names no real topic and queue")
    props.pop(PropertyKey.TRANSACTION_CHECK_TIMES, None)
    if checks > 0:
        props[PropertyKey.TRANSACTION_CHECK_TIMES] = str(checks)
    uniq = props.get(PropertyKey.UNIQ_KEY)
    if uniq:
        props[PropertyKey.TRANSACTION_ID] = uniq
    return MessageExt(
        topic=topic,
        body=half.body,
        flag=half.flag,
        properties=props,
        queue_id=int(qid),
        sys_flag=reset_transaction_value(half.sys_flag, TRANSACTION_COMMIT_TYPE),
        born_timestamp=half.born_timestamp,
        born_host=half.born_host,
        store_host=half.store_host,
        reconsume_times=half.reconsume_times,
        prepared_transaction_offset=half.commit_log_offset,
    )


def set_aside_message(half: MessageExt, checks: int) -> MessageExt:
    """The copy of a half message the broker rolled back after ``checks`` unanswered checks, for
    ``TRANS_CHECK_MAX_TIME_TOPIC`` queue 0, where an operator finds it: as Apache RocketMQ writes it, the half's body
    and properties (``REAL_TOPIC`` and ``REAL_QID`` name where it was going) with the checks counted."""
    props = {**half.properties, PropertyKey.TRANSACTION_CHECK_TIMES: str(checks)}
    return MessageExt(
        topic=TRANS_CHECK_MAX_TIME_TOPIC,
        body=half.body,
        flag=half.flag,
        properties=props,
        queue_id=0,
        sys_flag=half.sys_flag,
        born_timestamp=half.born_timestamp,
        born_host=half.born_host,
        store_host=half.store_host,
        reconsume_times=half.reconsume_times,
    )


def op_message(half_offset: int, kind: OpKind, store_host: tuple[str, int], now_ms: int) -> MessageExt:
    """The op record saying ``kind`` happened to the half at queue offset ``half_offset``."""
    tag = _CHECKED_TAG if kind is OpKind.CHECKED else _DONE_TAG
    return MessageExt(
        topic=TRANS_OP_HALF_TOPIC,
        body=str(half_offset).encode(),
        properties={PropertyKey.TAGS: tag, OP_KIND: kind.value},
        queue_id=0,
        born_timestamp=now_ms,
        born_host=store_host,
        store_host=store_host,
    )


def parse_op(rec: MessageExt) -> OpRecord | None:
    """The op a record of the op topic holds, or None for one that is not ours (skipped, never fatal)."""
    try:
        half_offset = int(rec.body.decode("ascii"))
        kind = OpKind(rec.properties.get(OP_KIND, OpKind.COMMIT.value))
    except (UnicodeDecodeError, ValueError):
        return None
    if half_offset < 0:
        return None
    return OpRecord(half_offset, kind)
