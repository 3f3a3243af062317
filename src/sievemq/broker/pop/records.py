"""The POP log: what the broker writes to keep POP state durable (docs/pop.md §3). Pure: no I/O.

Every change of a group's POP state is one record in ``RMQ_SYS_POP_LOG`` queue 0, written (and, under SYNC_FLUSH,
flushed) before the change is answered: replaying the records in log order onto the last snapshot rebuilds the
state exactly. The tag says the kind, the body is a small JSON document:

- ``init``  ``{"g", "t", "c": {queueId: cursor}}``: a group's first POP of a topic here; where each queue starts.
- ``lease`` ``{"g", "t", "q", "c", "d", "e": [[offset, token, attempt], ...], "a"}``: messages handed out,
  invisible until ``d`` (epoch ms); ``c`` the queue's cursor after them (filtered-out messages skipped on the way);
  ``a`` (only when not empty) the attempt id of the orderly POP that handed them out (docs/pop.md §5).
- ``ack``   ``{"g", "t", "q", "o", "n"}``: the lease ``n`` of offset ``o`` is done.
- ``change`` ``{"g", "t", "q", "o", "n", "m", "d"}``: lease ``n`` becomes lease ``m``, invisible until ``d``.
- ``dead``  ``{"g", "t", "q", "o", "n"}``: moved to the group's dead-letter topic after its last attempt.
- ``reset`` ``{"g", "t", "q", "c"}``: an operator reset the group's offset of the queue (docs/admin.md §4): the
  cursor is ``c`` and every lease of the queue is gone.

Applying a record is a pure function of the record (each sets what it names), so applying a suffix of the log
twice in order ends in the same state: a snapshot that already holds some of the records it is replayed with is
harmless (``book.PopBook.apply``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import orjson

from sievemq.protocol.message import MessageExt, PropertyKey
from sievemq.protocol.names import POP_LOG_TOPIC, dlq_topic

__all__ = ["POP_LOG_TOPIC", "Kind", "PopRecord", "dead_letter_message", "parse_record", "record_message"]


class Kind(StrEnum):
    """What a POP record records (its tag)."""

    INIT = "init"
    LEASE = "lease"
    ACK = "ack"
    CHANGE = "change"
    DEAD = "dead"
    RESET = "reset"


@dataclass(frozen=True, slots=True)
class PopRecord:
    """One parsed POP record (fields unused by its kind keep their defaults)."""

    kind: Kind
    group: str
    topic: str
    queue_id: int = 0
    cursor: int = 0
    deadline: int = 0
    entries: tuple[tuple[int, int, int], ...] = ()
    """``lease``: (offset, token, attempt) of each message handed out."""
    offset: int = 0
    token: int = 0
    new_token: int = 0
    cursors: dict[int, int] = field(default_factory=dict)
    """``init``: queue id -> cursor."""
    attempt_id: str = ""
    """``lease``: the attempt id of the orderly POP that handed the messages out ("" for none)."""

    def document(self) -> dict[str, Any]:
        """The record's body as a JSON-ready dict."""
        d: dict[str, Any] = {"g": self.group, "t": self.topic}
        if self.kind is Kind.INIT:
            d["c"] = {str(q): c for q, c in self.cursors.items()}
        elif self.kind is Kind.RESET:
            d.update(q=self.queue_id, c=self.cursor)
        elif self.kind is Kind.LEASE:
            d.update(q=self.queue_id, c=self.cursor, d=self.deadline, e=[list(e) for e in self.entries])
            if self.attempt_id:
                d["a"] = self.attempt_id
        else:
            d.update(q=self.queue_id, o=self.offset, n=self.token)
            if self.kind is Kind.CHANGE:
                d.update(m=self.new_token, d=self.deadline)
        return d


def record_message(rec: PopRecord, store_host: tuple[str, int], now_ms: int) -> MessageExt:
    """``rec`` as the message the store keeps (``RMQ_SYS_POP_LOG`` queue 0, tag = kind, born at ``now_ms``)."""
    return MessageExt(
        topic=POP_LOG_TOPIC,
        body=orjson.dumps(rec.document()),
        properties={PropertyKey.TAGS: rec.kind.value},
        queue_id=0,
        store_host=store_host,
        born_host=store_host,
        born_timestamp=now_ms,
    )


def parse_record(msg: MessageExt) -> PopRecord | None:
    """The record a POP log message holds (None for anything that is not one: it is skipped)."""
    try:
        kind = Kind(msg.properties.get(PropertyKey.TAGS, ""))
        d = orjson.loads(msg.body)
        g, t = str(d["g"]), str(d["t"])
        if kind is Kind.INIT:
            return PopRecord(kind, g, t, cursors={int(q): int(c) for q, c in d["c"].items()})
        q = int(d["q"])
        if kind is Kind.RESET:
            return PopRecord(kind, g, t, q, cursor=int(d["c"]))
        if kind is Kind.LEASE:
            entries = tuple((int(o), int(n), int(a)) for o, n, a in d["e"])
            return PopRecord(kind, g, t, q, cursor=int(d["c"]), deadline=int(d["d"]), entries=entries,
                             attempt_id=str(d.get("a", "")))  # fmt: skip
        if kind is Kind.CHANGE:
            return PopRecord(kind, g, t, q, offset=int(d["o"]), token=int(d["n"]), new_token=int(d["m"]),
                             deadline=int(d["d"]))  # fmt: skip
        return PopRecord(kind, g, t, q, offset=int(d["o"]), token=int(d["n"]))
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def dead_letter_message(group: str, old: MessageExt, attempts: int, store_host: tuple[str, int]) -> MessageExt:
    """``old`` as the message ``%DLQ%<group>`` queue 0 keeps after its last attempt: its topic in ``RETRY_TOPIC``,
    its id in ``ORIGIN_MESSAGE_ID``, its deliveries in ``reconsume_times`` (written just before its ``dead``
    record, in one step)."""
    props = dict(old.properties)
    props.setdefault(PropertyKey.RETRY_TOPIC, old.topic)
    props.setdefault(PropertyKey.ORIGIN_MESSAGE_ID, old.uniq_key or old.offset_msg_id)
    props.pop(PropertyKey.DELAY, None)
    return MessageExt(topic=dlq_topic(group), body=old.body, flag=old.flag, properties=props, queue_id=0,
                      sys_flag=old.sys_flag, born_timestamp=old.born_timestamp, born_host=old.born_host,
                      store_host=store_host, reconsume_times=attempts)  # fmt: skip
