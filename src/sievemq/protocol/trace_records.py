"""Message trace records (docs/traces.md §2): the text RocketMQ's clients write to ``RMQ_SYS_TRACE_TOPIC`` when
message trace is on (Java ``enableMsgTrace``), decoded and encoded. Pure.

A trace message's body is UTF-8 text: records, each ended by ``FIELD_SPLITOR`` (char 2), whose fields are separated
by ``CONTENT_SPLITOR`` (char 1), the first field naming the record's type. Its KEYS are the traced messages' ids
and keys, so a trace is found through the broker's key index. The layouts (as RocketMQ's clients write them):

* ``Pub``: type, timestamp, regionId, producer group, topic, msgId, tags, keys, storeHost (the broker's address),
  bodyLength, costTime (ms), msgType (``MessageType`` ordinal), offsetMsgId, success; old clients wrote 13 fields
  (no offsetMsgId), some 15 (a clientHost last);
* ``SubBefore``: type, timestamp, regionId, consumer group, requestId, msgId, retryTimes, keys;
* ``SubAfter``: type, requestId, msgId, costTime (ms), success, keys, then contextCode (``ConsumeReturnType``
  ordinal), then timestamp and consumer group (not on Alibaba Cloud's access channel);
* ``EndTransaction``: type, timestamp, regionId, producer group, topic, msgId, tags, keys, storeHost, msgType,
  transactionId, transactionState (``LocalTransactionState`` name), fromTransactionCheck;
* ``Recall``: type, timestamp, regionId, group, topic, msgId, success.

Java writes a missing text as ``null``: such a field decodes to "" here. A record of an unknown type, or one too short
or with a number that does not parse, is not a ``TraceRecord``: ``decode`` returns it among the ``skipped`` texts.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

__all__ = [
    "CONSUME_RETURN_TYPES",
    "CONTENT_SPLITOR",
    "FIELD_SPLITOR",
    "MESSAGE_TYPES",
    "TRACE_PRODUCER_GROUP_PREFIX",
    "Decoded",
    "TraceRecord",
    "TraceType",
    "decode",
    "encode",
    "keys_of",
]

CONTENT_SPLITOR = "\x01"
"""Between the fields of a record."""
FIELD_SPLITOR = "\x02"
"""After each record."""
TRACE_PRODUCER_GROUP_PREFIX = "_INNER_TRACE_PRODUCER"
"""The group of a client's trace producer starts so (RocketMQ's ``TraceConstants.GROUP_NAME_PREFIX``)."""
MESSAGE_TYPES = ("Normal_Msg", "Trans_Msg_Half", "Trans_msg_Commit", "Delay_Msg", "Order_Msg")
"""RocketMQ's ``MessageType`` by ordinal (the ``msgType`` field)."""
CONSUME_RETURN_TYPES = ("SUCCESS", "TIME_OUT", "EXCEPTION", "RETURNNULL", "FAILED")
"""RocketMQ's ``ConsumeReturnType`` by ordinal (a SubAfter's ``contextCode``)."""


class TraceType(StrEnum):
    """The record types (RocketMQ's ``TraceType``)."""

    PUB = "Pub"
    SUB_BEFORE = "SubBefore"
    SUB_AFTER = "SubAfter"
    END_TRANSACTION = "EndTransaction"
    RECALL = "Recall"


@dataclass(frozen=True, slots=True)
class TraceRecord:
    """One decoded record; the fields its type does not have keep their defaults."""

    type: TraceType
    msg_id: str
    timestamp: int = 0
    """Epoch ms: when the send started (Pub), the listener was called (SubBefore) or returned (SubAfter)."""
    region_id: str = ""
    group: str = ""
    topic: str = ""
    tags: str = ""
    keys: str = ""
    store_host: str = ""
    body_length: int = 0
    cost_ms: int = 0
    msg_type: int = 0
    offset_msg_id: str = ""
    success: bool = True
    client_host: str = ""
    request_id: str = ""
    retry_times: int = 0
    context_code: int | None = None
    transaction_id: str = ""
    transaction_state: str = ""
    from_transaction_check: bool = False

    @property
    def msg_type_name(self) -> str:
        """``msg_type`` as RocketMQ names it (``Normal_Msg``...), or its number."""
        return MESSAGE_TYPES[self.msg_type] if 0 <= self.msg_type < len(MESSAGE_TYPES) else str(self.msg_type)

    @property
    def consume_return(self) -> str | None:
        """A SubAfter's ``contextCode`` as RocketMQ names it (``SUCCESS``, ``EXCEPTION``...)."""
        if self.context_code is None:
            return None
        code = self.context_code
        return CONSUME_RETURN_TYPES[code] if 0 <= code < len(CONSUME_RETURN_TYPES) else str(code)


@dataclass(frozen=True, slots=True)
class Decoded:
    """The records of a trace message's body, and the texts that were not records."""

    records: list[TraceRecord] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def _text(v: str) -> str:
    return "" if v == "null" else v


def _bool(v: str) -> bool:
    return v.strip().lower() == "true"  # Java's Boolean.parseBoolean


def _record(f: Sequence[str]) -> TraceRecord | None:
    kind = f[0]
    if kind == TraceType.PUB and len(f) >= 13:
        return TraceRecord(
            TraceType.PUB, _text(f[5]), int(f[1]), _text(f[2]), _text(f[3]), _text(f[4]), _text(f[6]), _text(f[7]),
            _text(f[8]), int(f[9]), int(f[10]), int(f[11]),
            offset_msg_id=_text(f[12]) if len(f) >= 14 else "",
            success=_bool(f[13] if len(f) >= 14 else f[12]),
            client_host=_text(f[14]) if len(f) >= 15 else "",
        )  # fmt: skip
    if kind == TraceType.SUB_BEFORE and len(f) >= 8:
        return TraceRecord(TraceType.SUB_BEFORE, _text(f[5]), int(f[1]), _text(f[2]), _text(f[3]),
                           keys=_text(f[7]), request_id=_text(f[4]), retry_times=int(f[6]))  # fmt: skip
    if kind == TraceType.SUB_AFTER and len(f) >= 6:
        return TraceRecord(
            TraceType.SUB_AFTER, _text(f[2]),
            timestamp=int(f[7]) if len(f) >= 9 else 0,
            group=_text(f[8]) if len(f) >= 9 else "",
            keys=_text(f[5]), cost_ms=int(f[3]), success=_bool(f[4]), request_id=_text(f[1]),
            context_code=int(f[6]) if len(f) >= 7 and f[6] != "" else None,
        )  # fmt: skip
    if kind == TraceType.END_TRANSACTION and len(f) >= 13:
        return TraceRecord(
            TraceType.END_TRANSACTION, _text(f[5]), int(f[1]), _text(f[2]), _text(f[3]), _text(f[4]), _text(f[6]),
            _text(f[7]), _text(f[8]), msg_type=int(f[9]), transaction_id=_text(f[10]),
            transaction_state=_text(f[11]), from_transaction_check=_bool(f[12]),
        )  # fmt: skip
    if kind == TraceType.RECALL and len(f) >= 7:
        return TraceRecord(TraceType.RECALL, _text(f[5]), int(f[1]), _text(f[2]), _text(f[3]), _text(f[4]),
                           success=_bool(f[6]))  # fmt: skip
    return None


def decode(body: bytes | str) -> Decoded:
    """The records of a trace message's body (UTF-8; undecodable bytes are replaced)."""
    text = body.decode("utf-8", errors="replace") if isinstance(body, bytes | bytearray) else body
    out = Decoded()
    for chunk in text.split(FIELD_SPLITOR):
        if not chunk.strip():
            continue
        fields = chunk.split(CONTENT_SPLITOR)
        try:
            rec = _record(fields)
        except ValueError:
            rec = None
        if rec is None:
            out.skipped.append(chunk)
        else:
            out.records.append(rec)
    return out


def _java(v: str) -> str:
    return v if v else "null"


def _jbool(v: bool) -> str:
    return "true" if v else "false"


def encode(rec: TraceRecord) -> str:
    """One record as RocketMQ's current clients write it (FIELD_SPLITOR included); Pub without a client host,
    SubAfter with timestamp and group (not the cloud layout)."""
    c = CONTENT_SPLITOR
    t = rec.type
    if t == TraceType.PUB:
        parts = [t.value, str(rec.timestamp), rec.region_id, rec.group, rec.topic, rec.msg_id, _java(rec.tags),
                 _java(rec.keys), rec.store_host, str(rec.body_length), str(rec.cost_ms), str(rec.msg_type),
                 rec.offset_msg_id, _jbool(rec.success)]  # fmt: skip
    elif t == TraceType.SUB_BEFORE:
        parts = [t.value, str(rec.timestamp), rec.region_id, rec.group, rec.request_id, rec.msg_id,
                 str(rec.retry_times), _java(rec.keys)]  # fmt: skip
    elif t == TraceType.SUB_AFTER:
        parts = [t.value, rec.request_id, rec.msg_id, str(rec.cost_ms), _jbool(rec.success), _java(rec.keys),
                 str(rec.context_code or 0), str(rec.timestamp), rec.group]  # fmt: skip
    elif t == TraceType.END_TRANSACTION:
        parts = [t.value, str(rec.timestamp), rec.region_id, rec.group, rec.topic, rec.msg_id, _java(rec.tags),
                 _java(rec.keys), rec.store_host, str(rec.msg_type), _java(rec.transaction_id),
                 rec.transaction_state, _jbool(rec.from_transaction_check)]  # fmt: skip
    else:
        parts = [t.value, str(rec.timestamp), rec.region_id, rec.group, rec.topic, rec.msg_id, _jbool(rec.success)]
    return c.join(parts) + FIELD_SPLITOR


def keys_of(records: Iterable[TraceRecord]) -> list[str]:
    """The KEYS of a trace message carrying ``records``: each traced message's id and its keys (space-separated in
    a record, as in a message's KEYS), without repeats, in order."""
    out: dict[str, None] = {}
    for r in records:
        if r.msg_id:
            out[r.msg_id] = None
        for k in r.keys.split(" "):
            if k:
                out[k] = None
    return list(out)
