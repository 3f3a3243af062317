"""``sievemq message trace ID``: a message's trace and every consumer group's filter verdict on it (docs/traces.md).

The trace records come from the trace topic (``RMQ_SYS_TRACE_TOPIC`` unless told otherwise) by the message id, as
RocketMQ's ``mqadmin queryMsgTraceById`` finds them (the trace messages' KEYS hold the ids they trace); the stored
message, its retries and its dead letter from the topics by UNIQ_KEY (``admin/messages.py``); the verdicts from the
message's broker (EXPLAIN_MESSAGE, 30013: ``broker/processors/verdicts.py``). ``AdminClient.message_trace`` is the
API, which the dashboard's trace view calls too.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from sievemq.admin.api import AdminClient
from sievemq.admin.errors import MessageNotFound, TopicNotFound
from sievemq.admin.message_view import MessageView
from sievemq.admin.messages import FIND_MAX, Found, find_by_key, message_id, show
from sievemq.admin.trace_timeline import Copy, Timeline, TraceMessage, assemble
from sievemq.errors import RemotingError, SieveError
from sievemq.protocol import mq_json
from sievemq.protocol.msgid import parse_offset_msg_id
from sievemq.protocol.names import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX
from sievemq.protocol.trace_records import decode
from sievemq.remoting.codes import RequestCode, ResponseCode

__all__ = ["DEFAULT_TRACE_TOPIC", "TraceReport", "message_trace", "verdicts"]

DEFAULT_TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
"""RocketMQ's trace topic (``TopicValidator.RMQ_SYS_TRACE_TOPIC``; brokers: ``msgTraceTopicName``)."""


@dataclass
class TraceReport:
    """A message's trace, its stored copies and the groups' verdicts."""

    msg_id: str
    trace_topic: str
    message: MessageView | None
    timeline: Timeline
    verdicts: list[dict[str, Any]] = field(default_factory=list)
    """Per group, as its broker's EXPLAIN_MESSAGE answered."""
    errors: dict[str, str] = field(default_factory=dict)
    """What could not be asked, and why."""

    def groups(self) -> list[dict[str, Any]]:
        """Every group the traces, the copies or the broker know, with its timeline and its filter verdict."""
        by_name: dict[str, dict[str, Any]] = {}
        for g in self.timeline.groups.values():
            by_name[g.group] = {**g.to_json(), "filter": None}
        for v in self.verdicts:
            row = by_name.setdefault(v["group"], {"group": v["group"], "state": "NOT_TRACED", "consumed": False,
                                                  "deliveries": [], "retries": 0, "retryCopies": [],
                                                  "deadLetter": None})  # fmt: skip
            row["filter"] = v
            if row["state"] == "NOT_TRACED" and v.get("verdict") == "FILTERED":
                row["state"] = "FILTERED"
        return [by_name[k] for k in sorted(by_name)]

    def to_json(self) -> dict[str, Any]:
        """The report as ``message trace --json`` prints it (docs/traces.md §3)."""
        t = self.timeline.to_json()
        m = self.message
        return {
            "msgId": self.msg_id,
            "traceTopic": self.trace_topic,
            "message": None if m is None else {
                "topic": m.msg.topic, "brokerName": m.broker, "queueId": m.msg.queue_id,
                "queueOffset": m.msg.queue_offset, "offsetMsgId": m.msg.offset_msg_id, "tags": m.msg.tags,
                "keys": m.msg.keys, "bornHost": f"{m.msg.born_host[0]}:{m.msg.born_host[1]}",
                "bornTimestamp": m.msg.born_timestamp, "storeTimestamp": m.msg.store_timestamp},
            "traceRecords": t["traceRecords"],
            "sent": t["sent"],
            "transaction": t["transaction"],
            "recalls": t["recalls"],
            "events": t["events"],
            "groups": self.groups(),
            "errors": self.errors,
        }  # fmt: skip


def _copy(v: MessageView) -> Copy:
    m = v.msg
    return Copy(m.topic, v.broker, m.queue_id, m.queue_offset, m.store_timestamp, m.offset_msg_id, m.reconsume_times)


async def _traces(admin: AdminClient, trace_topic: str, msg_id: str) -> list[TraceMessage]:
    found = await find_by_key(admin, trace_topic, msg_id, limit=FIND_MAX)
    out = []
    for v in found.messages:
        m = v.msg
        out.append(TraceMessage(m.born_host[0], m.store_timestamp, decode(v.body).records))
    return out


async def _copies(admin: AdminClient, msg_id: str, topic: str) -> list[MessageView]:
    try:
        return (await show(admin, msg_id, topic)).messages
    except (TopicNotFound, MessageNotFound):
        return []


async def _resolve(admin: AdminClient, msg_id: str, topic: str | None) -> Found | None:
    """The message in ``topic``; without one, only when ``msg_id`` is an offsetMsgId of a broker of the cluster
    (a message id is looked for in its Pub record's topic first: cheaper than every topic)."""
    if topic is not None:
        return await show(admin, msg_id, topic)
    try:
        host, port, _ = parse_offset_msg_id(msg_id)
    except ValueError:
        return None
    if any(f"{host}:{port}" in b.addrs.values() for b in await admin.brokers()):
        return await show(admin, msg_id)
    return None


async def verdicts(admin: AdminClient, view: MessageView, group: str | None = None) -> list[dict[str, Any]]:
    """EXPLAIN_MESSAGE at the message's broker: every group's (or ``group``'s) verdict on the stored message."""
    brokers = {b.name: b for b in await admin.brokers()}
    b = brokers.get(view.broker)
    addr = b.read_addr if b is not None else None
    if addr is None:
        raise SieveError(f"broker {view.broker} has no address")
    m = view.msg
    fields: dict[str, Any] = {"topic": m.topic, "queueId": m.queue_id, "queueOffset": m.queue_offset}
    if group:
        fields["consumerGroup"] = group
    resp = await admin.call(addr, RequestCode.EXPLAIN_MESSAGE, fields)
    return list(mq_json.loads(resp.body).get("groups") or [])


async def message_trace(
    admin: AdminClient,
    msg_id: str,
    topic: str | None = None,
    trace_topic: str = DEFAULT_TRACE_TOPIC,
    group: str | None = None,
) -> TraceReport:
    """The trace of message ``msg_id`` (its id, or an offsetMsgId) in ``topic`` (found from its traces, else in
    every topic, when None), and the verdict of every group of the topic (only ``group`` when given).
    NotAMessageId for a malformed id; MessageNotFound when neither a trace nor the message is found."""
    msg_id = message_id(msg_id)
    errors: dict[str, str] = {}
    original: MessageView | None = None
    try:  # an offsetMsgId names one record: trace by its UNIQ_KEY
        found = await _resolve(admin, msg_id, topic)
    except (TopicNotFound, MessageNotFound) as e:
        found, errors["message"] = None, str(e)
    if found is not None and found.messages:
        original = next((v for v in found.messages if not v.msg.topic.startswith(("%RETRY%", "%DLQ%"))), None)
        if original is not None and original.msg.uniq_key:
            msg_id = original.msg.uniq_key
    try:
        traces = await _traces(admin, trace_topic, msg_id)
    except TopicNotFound:
        traces, errors["traces"] = [], f"no trace topic {trace_topic}: no client wrote traces to it"
    except (SieveError, OSError) as e:
        traces, errors["traces"] = [], str(e)
    if original is None:  # the topic from a Pub record, else every topic
        pubs = [r.topic for tm in traces for r in tm.records if r.msg_id == msg_id and r.topic]
        where = topic or (pubs[0] if pubs else None)
        try:
            found = await show(admin, msg_id, where)
            original = next((v for v in found.messages if not v.msg.topic.startswith(("%RETRY%", "%DLQ%"))), None)
            errors.pop("message", None)
        except (TopicNotFound, MessageNotFound) as e:
            errors["message"] = str(e)
    views = [original] if original is not None else []
    groups: list[dict[str, Any]] = []
    if original is not None:
        try:
            groups = await verdicts(admin, original, group)
        except RemotingError as e:
            errors["verdicts"] = (f"broker {original.broker} does not explain messages (an older sievemq or RocketMQ)"
                                  if e.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED else str(e))  # fmt: skip
        except (SieveError, OSError) as e:
            errors["verdicts"] = str(e)
    names = {r.group for tm in traces for r in tm.records if r.msg_id == msg_id and r.group}
    names |= {v["group"] for v in groups}
    if group:
        names &= {group}
    lookups = [_copies(admin, msg_id, p + g) for g in sorted(names) for p in (RETRY_GROUP_TOPIC_PREFIX,
                                                                              DLQ_GROUP_TOPIC_PREFIX)]  # fmt: skip
    for more in await asyncio.gather(*lookups):
        views.extend(more)
    if not traces and original is None:
        raise MessageNotFound(f"no trace of message {msg_id} in {trace_topic} and no such message"
                              f" ({errors.get('message', '')})")  # fmt: skip
    timeline = assemble(msg_id, traces, [_copy(v) for v in views], group or None)
    return TraceReport(msg_id, trace_topic, original, timeline, groups, errors)
