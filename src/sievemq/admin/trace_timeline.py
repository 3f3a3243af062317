"""One message's trace as a timeline (docs/traces.md §3): the trace records written for a message id, with the
stored copies of the message (the original, its retries, its dead letter), turned into what happened to it. Pure.

* sent: per Pub record, the producer group, the producer's host (the trace message's born host, as RocketMQ's
  ``TraceView`` takes it), when, to which broker, the send's cost and status, and the queue and offset of the stored
  message it became;
* per consumer group, each delivery to a client: when its listener got the message (SubBefore), the delivery
  count (``retryTimes``), and from the matching SubAfter (same request id) how long the listener took and what
  it answered; a delivery without a SubAfter is ``pending`` (the listener has not returned, or its client stopped
  before writing the trace);
* retries and the dead letter, from the stored copies in ``%RETRY%<group>`` and ``%DLQ%<group>``;
* the transaction's end (EndTransaction: COMMIT_MESSAGE, ROLLBACK_MESSAGE, UNKNOW, and whether a check-back asked)
  and a recall.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sievemq.protocol.names import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX
from sievemq.protocol.trace_records import TraceRecord, TraceType

__all__ = ["Copy", "Delivery", "GroupTimeline", "Sent", "Timeline", "TraceMessage", "assemble"]


@dataclass(frozen=True, slots=True)
class TraceMessage:
    """One stored trace message: who wrote it, when, and its records."""

    born_host: str
    store_timestamp: int
    records: Sequence[TraceRecord]


@dataclass(frozen=True, slots=True)
class Copy:
    """A stored copy of the traced message (in its topic, a retry topic or a dead-letter topic)."""

    topic: str
    broker: str
    queue_id: int
    queue_offset: int
    store_timestamp: int
    offset_msg_id: str = ""
    reconsume_times: int = 0

    @property
    def group(self) -> str | None:
        """The group of a retry or dead-letter topic."""
        for prefix in (RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX):
            if self.topic.startswith(prefix):
                return self.topic[len(prefix) :]
        return None

    def to_json(self) -> dict[str, Any]:
        """The copy's place and time."""
        return {"topic": self.topic, "brokerName": self.broker, "queueId": self.queue_id,
                "queueOffset": self.queue_offset, "storeTimestamp": self.store_timestamp,
                "offsetMsgId": self.offset_msg_id, "reconsumeTimes": self.reconsume_times}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Sent:
    """A Pub record, with the stored message it became."""

    record: TraceRecord
    client_host: str
    stored: Copy | None

    def to_json(self) -> dict[str, Any]:
        """The send as ``message trace --json`` prints it."""
        r = self.record
        out: dict[str, Any] = {
            "producerGroup": r.group, "clientHost": r.client_host or self.client_host, "timestamp": r.timestamp,
            "topic": r.topic, "tags": r.tags, "keys": r.keys, "storeHost": r.store_host, "costMs": r.cost_ms,
            "status": "success" if r.success else "failed", "msgType": r.msg_type_name,
            "offsetMsgId": r.offset_msg_id, "bodyLength": r.body_length, "regionId": r.region_id,
        }  # fmt: skip
        if self.stored is not None:
            out.update(brokerName=self.stored.broker, queueId=self.stored.queue_id,
                       queueOffset=self.stored.queue_offset, storeTimestamp=self.stored.store_timestamp)  # fmt: skip
        return out


@dataclass(slots=True)
class Delivery:
    """One delivery of the message to one client's listener."""

    group: str
    client_host: str
    timestamp: int
    retry_times: int
    request_id: str
    status: str = "pending"
    """``success``, ``failed`` (the listener asked for a retry, threw or timed out) or ``pending`` (no SubAfter)."""
    cost_ms: int | None = None
    consume_return: str | None = None
    finished_at: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The delivery as ``message trace --json`` prints it."""
        return {"clientHost": self.client_host, "timestamp": self.timestamp, "retryTimes": self.retry_times,
                "status": self.status, "costMs": self.cost_ms, "consumeReturn": self.consume_return,
                "finishedAt": self.finished_at, "requestId": self.request_id}  # fmt: skip


@dataclass(slots=True)
class GroupTimeline:
    """What one consumer group did with the message."""

    group: str
    deliveries: list[Delivery] = field(default_factory=list)
    retry_copies: list[Copy] = field(default_factory=list)
    dead_letter: Copy | None = None

    @property
    def consumed(self) -> bool:
        """Some listener of the group consumed it."""
        return any(d.status == "success" for d in self.deliveries)

    @property
    def state(self) -> str:
        """``CONSUMED``, ``DEAD_LETTERED``, ``RETRYING``, ``CONSUMING`` or ``FAILED`` (as the traces and copies
        show)."""
        if self.consumed:
            return "CONSUMED"
        if self.dead_letter is not None:
            return "DEAD_LETTERED"
        if self.deliveries and self.deliveries[-1].status == "pending":
            return "CONSUMING"
        if self.retry_copies:
            return "RETRYING"
        return "FAILED" if self.deliveries else "NOT_DELIVERED"

    def to_json(self) -> dict[str, Any]:
        """The group's part of ``message trace --json``."""
        return {"group": self.group, "state": self.state, "consumed": self.consumed,
                "deliveries": [d.to_json() for d in self.deliveries],
                "retries": len(self.retry_copies), "retryCopies": [c.to_json() for c in self.retry_copies],
                "deadLetter": self.dead_letter.to_json() if self.dead_letter else None}  # fmt: skip


@dataclass(slots=True)
class Timeline:
    """Everything the traces and the stored copies say about one message id."""

    msg_id: str
    sent: list[Sent] = field(default_factory=list)
    groups: dict[str, GroupTimeline] = field(default_factory=dict)
    transaction: list[dict[str, Any]] = field(default_factory=list)
    recalls: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    records: int = 0

    def group(self, name: str) -> GroupTimeline:
        """The group's timeline (made when new)."""
        g = self.groups.get(name)
        if g is None:
            g = self.groups[name] = GroupTimeline(name)
        return g

    def to_json(self) -> dict[str, Any]:
        """The timeline as ``message trace --json`` prints it (docs/traces.md §3)."""
        return {"msgId": self.msg_id, "traceRecords": self.records, "sent": [s.to_json() for s in self.sent],
                "transaction": self.transaction, "recalls": self.recalls,
                "groups": [g.to_json() for _, g in sorted(self.groups.items())], "events": self.events}  # fmt: skip


def _stored_for(rec: TraceRecord, copies: Sequence[Copy]) -> Copy | None:
    originals = [c for c in copies if c.group is None]
    for c in originals:
        if rec.offset_msg_id and c.offset_msg_id == rec.offset_msg_id:
            return c
    same = [c for c in originals if c.topic == rec.topic]
    return same[0] if len(same) == 1 else None


def assemble(
    msg_id: str, traces: Iterable[TraceMessage], copies: Sequence[Copy] = (), group: str | None = None
) -> Timeline:
    """The timeline of ``msg_id`` from the trace messages that name it and its stored copies; of the consumer
    groups, only ``group`` when given."""
    t = Timeline(msg_id)
    afters: dict[str, list[tuple[TraceRecord, str]]] = {}
    befores: list[tuple[TraceRecord, str]] = []
    for tm in traces:
        for r in tm.records:
            if r.msg_id != msg_id:
                continue
            t.records += 1
            if r.type == TraceType.PUB:
                t.sent.append(Sent(r, tm.born_host, _stored_for(r, copies)))
            elif r.type == TraceType.SUB_BEFORE:
                befores.append((r, tm.born_host))
            elif r.type == TraceType.SUB_AFTER:
                afters.setdefault(r.request_id, []).append((r, tm.born_host))
            elif r.type == TraceType.END_TRANSACTION:
                t.transaction.append({"producerGroup": r.group, "timestamp": r.timestamp, "clientHost": tm.born_host,
                                      "state": r.transaction_state, "fromTransactionCheck": r.from_transaction_check,
                                      "transactionId": r.transaction_id, "storeHost": r.store_host})  # fmt: skip
            elif r.type == TraceType.RECALL:
                t.recalls.append({"group": r.group, "timestamp": r.timestamp, "topic": r.topic,
                                  "status": "success" if r.success else "failed"})  # fmt: skip
    for r, host in sorted(befores, key=lambda b: (b[0].timestamp, b[0].retry_times)):
        d = Delivery(r.group, host, r.timestamp, r.retry_times, r.request_id)
        matches = afters.get(r.request_id)
        if matches:
            after, _ = matches.pop(0)
            d.status = "success" if after.success else "failed"
            d.cost_ms, d.consume_return = after.cost_ms, after.consume_return
            d.finished_at = after.timestamp or None
        t.group(r.group).deliveries.append(d)
    for rest in afters.values():  # a SubAfter whose SubBefore is missing (lost, or in a trace message not found)
        for after, host in rest:
            d = Delivery(after.group or "?", host, after.timestamp, -1, after.request_id,
                         "success" if after.success else "failed", after.cost_ms, after.consume_return,
                         after.timestamp or None)  # fmt: skip
            t.group(d.group).deliveries.append(d)
    for c in copies:
        g = c.group
        if g is None:
            continue
        if c.topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
            t.group(g).dead_letter = c
        else:
            t.group(g).retry_copies.append(c)
    if group is not None:
        t.groups = {k: g for k, g in t.groups.items() if k == group}
    t.events = _events(t)
    return t


def _events(t: Timeline) -> list[dict[str, Any]]:
    ev: list[dict[str, Any]] = []
    for s in t.sent:
        r = s.record
        ev.append({"timestamp": r.timestamp, "event": "SENT" if r.success else "SEND_FAILED", "group": r.group,
                   "host": r.client_host or s.client_host,
                   "detail": f"to {r.store_host or '?'} in {r.cost_ms} ms ({r.msg_type_name})"})  # fmt: skip
    for x in t.transaction:
        ev.append({"timestamp": x["timestamp"], "event": "END_TRANSACTION", "group": x["producerGroup"],
                   "host": x["clientHost"], "detail": x["state"] + (" (check-back)" if x["fromTransactionCheck"]
                                                                      else "")})  # fmt: skip
    for g in t.groups.values():
        for d in g.deliveries:
            ev.append({"timestamp": d.timestamp, "event": "DELIVERED", "group": g.group, "host": d.client_host,
                       "detail": f"delivery {d.retry_times + 1}" if d.retry_times >= 0 else "delivery"})  # fmt: skip
            if d.status != "pending":
                what = "CONSUMED" if d.status == "success" else "CONSUME_FAILED"
                more = f" ({d.consume_return})" if d.consume_return and d.consume_return != "SUCCESS" else ""
                ev.append({"timestamp": d.finished_at or d.timestamp + (d.cost_ms or 0), "event": what,
                           "group": g.group, "host": d.client_host, "detail": f"in {d.cost_ms} ms{more}"})  # fmt: skip
        for c in g.retry_copies:
            ev.append({"timestamp": c.store_timestamp, "event": "RETRY_STORED", "group": g.group, "host": "",
                       "detail": f"{c.topic} (reconsumeTimes {c.reconsume_times})"})  # fmt: skip
        if g.dead_letter is not None:
            ev.append({"timestamp": g.dead_letter.store_timestamp, "event": "DEAD_LETTERED", "group": g.group,
                       "host": "", "detail": f"{g.dead_letter.topic} (reconsumeTimes "
                       f"{g.dead_letter.reconsume_times})"})  # fmt: skip
    for x in t.recalls:
        ev.append({"timestamp": x["timestamp"], "event": "RECALLED", "group": x["group"], "host": "",
                   "detail": x["status"]})  # fmt: skip
    return sorted(ev, key=lambda e: (e["timestamp"], e["event"] != "SENT"))
