"""CONSUME_MESSAGE_DIRECTLY (309): have one consumer run its listener on one stored message (docs/admin.md §8).

An operator asks a broker (header ``ConsumeMessageDirectlyResultRequestHeader``: ``consumerGroup``, ``clientId``,
``msgId``, the offsetMsgId of the record; sievemq adds ``timeoutMillis``). The broker puts the stored record in
the body, adds ``brokerName`` and passes the request to that client's connection; the client answers with a
``ConsumeMessageDirectlyResult`` JSON body, which the broker returns as it is. For a 5.x client the connection is
a proxy's, which asks the client with a Telemetry ``VerifyMessageCommand`` (docs/proxy.md §10).

Pure: the header, the result body and the mapping of a 5.x client's answer; no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import orjson

__all__ = [
    "DEFAULT_TIMEOUT_MS",
    "MAX_TIMEOUT_MS",
    "MIN_TIMEOUT_MS",
    "CMResult",
    "ConsumeDirectlyResult",
    "DirectlyHeader",
]

DEFAULT_TIMEOUT_MS = 10_000
"""How long a broker waits for the client when the request names no ``timeoutMillis``."""
MIN_TIMEOUT_MS = 500
MAX_TIMEOUT_MS = 60_000
"""``timeoutMillis`` is held within these bounds (a request cannot keep a broker's slot for longer)."""


class CMResult(StrEnum):
    """RocketMQ's ``CMResult``: what the listener did with the message."""

    CR_SUCCESS = "CR_SUCCESS"
    CR_LATER = "CR_LATER"
    CR_ROLLBACK = "CR_ROLLBACK"
    CR_COMMIT = "CR_COMMIT"
    CR_THROW_EXCEPTION = "CR_THROW_EXCEPTION"
    CR_RETURN_NULL = "CR_RETURN_NULL"


@dataclass(frozen=True, slots=True)
class DirectlyHeader:
    """The request's fields, read and checked (``ValueError`` names what is wrong)."""

    group: str
    client_id: str
    msg_id: str
    timeout_ms: int = DEFAULT_TIMEOUT_MS
    broker_name: str = ""

    @classmethod
    def parse(cls, fields: dict[str, str]) -> DirectlyHeader:
        """The header of a request as it arrived: group, client id and message id present (at most 255 bytes
        each), ``timeoutMillis`` a number (held within ``MIN_TIMEOUT_MS``..``MAX_TIMEOUT_MS``)."""
        values = []
        for key in ("consumerGroup", "clientId", "msgId"):
            v = fields.get(key) or ""
            if not v or len(v.encode()) > 255:
                raise ValueError(f"{key} must be given, at most 255 bytes")
            values.append(v)
        raw = fields.get("timeoutMillis") or str(DEFAULT_TIMEOUT_MS)
        if not (raw.isascii() and raw.isdigit() and len(raw) <= 9):
            raise ValueError("timeoutMillis must be a whole number of milliseconds")
        timeout = min(max(int(raw), MIN_TIMEOUT_MS), MAX_TIMEOUT_MS)
        return cls(values[0], values[1], values[2], timeout, (fields.get("brokerName") or "")[:255])

    def to_fields(self) -> dict[str, Any]:
        """The header as it travels."""
        out: dict[str, Any] = {"consumerGroup": self.group, "clientId": self.client_id, "msgId": self.msg_id,
                               "timeoutMillis": self.timeout_ms}  # fmt: skip
        if self.broker_name:
            out["brokerName"] = self.broker_name
        return out


@dataclass(frozen=True, slots=True)
class ConsumeDirectlyResult:
    """RocketMQ's ``ConsumeMessageDirectlyResult``: the listener's verdict (None when the client gave none)."""

    consume_result: CMResult | None
    remark: str = ""
    spent_ms: int = 0
    order: bool = False
    auto_commit: bool = True

    def to_json(self) -> dict[str, Any]:
        """The JSON document (RocketMQ's field names)."""
        return {"order": self.order, "autoCommit": self.auto_commit,
                "consumeResult": self.consume_result.value if self.consume_result else None,
                "remark": self.remark, "spentTimeMills": self.spent_ms}  # fmt: skip

    def encode(self) -> bytes:
        """The body."""
        return orjson.dumps(self.to_json())

    @classmethod
    def decode(cls, body: bytes) -> ConsumeDirectlyResult:
        """A client's answer (``ValueError`` when it is not such a document); an unknown result word is None."""
        try:
            doc = orjson.loads(body)
        except orjson.JSONDecodeError as e:
            raise ValueError(f"not JSON: {e}") from None
        if not isinstance(doc, dict):
            raise ValueError("not a ConsumeMessageDirectlyResult")
        word = doc.get("consumeResult")
        result = CMResult(word) if isinstance(word, str) and word in CMResult.__members__ else None
        spent = doc.get("spentTimeMills")
        return cls(result, str(doc.get("remark") or "")[:4096], spent if isinstance(spent, int) else 0,
                   doc.get("order") is True, doc.get("autoCommit") is not False)  # fmt: skip
