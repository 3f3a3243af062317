"""Filter insight (sievemq extensions): GET_GROUP_FILTERS (30011) — per (group, topic) what was matched and
filtered out, by tag hash, by Bloom bitmap and by evaluation, and what the group's filter function decided on
this broker's filter servers — and EXPLAIN_SELECTOR (30012) — run a selector
over a topic's stored messages and say how many match, show a sample, and where the time went."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from sievemq.broker.clients import ConsumerManager
from sievemq.broker.filter_manager import ConsumerFilterManager
from sievemq.broker.filter_servers import FunctionCounts
from sievemq.broker.topics import TopicConfigManager
from sievemq.errors import RemotingError
from sievemq.filter.tags import TagExpression, tag_code
from sievemq.protocol.message import decode_record
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection
from sievemq.remoting.headers import get_str, int_or, require_str
from sievemq.remoting.server import ProcessorTable
from sievemq.store import MessageStore

SAMPLE_SIZE = 10
MAX_EXPLAIN = 1_000_000


@dataclass
class FilterAdminProcessor:
    """Counts and explanations of filters."""

    consumers: ConsumerManager
    filters: ConsumerFilterManager
    topics: TopicConfigManager
    store: MessageStore
    broker_name: str
    functions: Mapping[tuple[str, str], FunctionCounts] = field(default_factory=dict)
    """(group, topic) -> what the filter servers' functions decided, as they reported it (``FunctionCountBook``)."""

    def register(self, table: ProcessorTable) -> None:
        """Put the filter admin codes into ``table``."""
        table.register(RequestCode.GET_GROUP_FILTERS, self.group_filters)
        table.register(RequestCode.EXPLAIN_SELECTOR, self.explain)

    async def group_filters(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """30011: the group's filters and their counts on this broker."""
        group = require_str(cmd.ext_fields, "consumerGroup")
        info = self.consumers.get(group)
        out = []
        topics = {t for (g, t) in self.filters.counts if g == group} | (info.topics() if info else set())
        topics |= {t for (g, t) in self.functions if g == group}
        for topic in sorted(topics):
            sub = info.subscription(topic) if info else None
            entry = self.filters.get(group, topic)
            item: dict[str, Any] = {
                "topic": topic,
                "expression": sub.sub_string if sub else (entry.expression if entry else None),
                "expressionType": sub.expression_type if sub else ("SQL92" if entry else None),
                "counts": self.filters.counts_for(group, topic).as_dict(),
            }
            if entry is not None:
                item["bloomBitPositions"] = entry.bit_positions
                item["registeredAt"] = entry.born_time
            if (fc := self.functions.get((group, topic))) is not None:
                item["functionCounts"] = {"matched": fc.matched, "filteredOut": fc.filtered_out, "errors": fc.errors}
            if (error := self.filters.error(group, topic)) is not None:
                item["error"] = error
            out.append(item)
        body = {"group": group, "broker": self.broker_name, "filters": out}
        return cmd.response(ResponseCode.SUCCESS, body=orjson.dumps(body))

    async def explain(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """30012: evaluate an expression over the last N messages of each queue of a topic."""
        f = cmd.ext_fields
        topic = require_str(f, "topic")
        expression = require_str(f, "expression")
        kind = (get_str(f, "expressionType", "SQL92") or "SQL92").upper()
        last = min(max(1, int_or(f, "last", 1000)), MAX_EXPLAIN)
        tc = self.topics.get(topic)
        if tc is None:
            raise RemotingError(ResponseCode.TOPIC_NOT_EXIST, f"topic {topic} does not exist on this broker")
        result = explain_selector(self.store, self.broker_name, topic, tc.read_queue_nums, expression, kind, last)
        return cmd.response(ResponseCode.SUCCESS, body=orjson.dumps(result))


def explain_selector(
    store: MessageStore, broker_name: str, topic: str, queues: int, expression: str, kind: str, last: int
) -> dict[str, Any]:
    """The explanation of ``expression`` over the last ``last`` messages of each queue of ``topic``."""
    from sievemq.filter.sql92 import SqlError, compile_selector, parse, reference_evaluate
    from sievemq.filter.sql92.lint import COMPARES_TWO_PROPERTIES, PropertyComparison, property_comparisons

    t0 = time.perf_counter()
    used: frozenset[str] = frozenset()
    pairs: list[PropertyComparison] = []
    if kind == "SQL92":
        try:
            selector = compile_selector(expression)
            tree = parse(expression)
        except SqlError as e:
            raise RemotingError(ResponseCode.SUBSCRIPTION_PARSE_FAILED, e.with_caret()) from None
        used = selector.properties_used
        pairs = property_comparisons(tree)
    elif kind == "TAG":
        try:
            tags = TagExpression.parse(expression)
        except ValueError as e:
            raise RemotingError(ResponseCode.SUBSCRIPTION_PARSE_FAILED, str(e)) from None
    else:
        raise RemotingError(ResponseCode.SUBSCRIPTION_PARSE_FAILED, f"unknown expression type {kind}")
    compile_s = time.perf_counter() - t0
    read_s = decode_s = eval_s = 0.0
    scanned = matched = unknown = errors = 0
    missing: Counter[str] = Counter()
    neither: Counter[PropertyComparison] = Counter()
    sample: list[dict[str, Any]] = []
    not_matched_sample: list[dict[str, Any]] = []
    for q in range(queues):
        hi = store.get_max_offset(topic, q)
        lo = max(store.get_min_offset(topic, q), hi - last)
        off = lo
        while off < hi:
            t = time.perf_counter()
            entries = store.read_cq_entries(topic, q, off, min(256, hi - off))
            if not entries:
                break
            raws = [store.look_message_by_offset(phy) if phy >= 0 else None for phy, _, _ in entries]
            read_s += time.perf_counter() - t
            for raw in raws:
                off += 1
                if raw is None:
                    continue
                t = time.perf_counter()
                msg, _ = decode_record(raw, read_body=False)
                props = msg.properties
                decode_s += time.perf_counter() - t
                scanned += 1
                t = time.perf_counter()
                if kind == "SQL92":
                    ok = selector.evaluate(props)
                else:
                    ok = tags.match_code(tag_code(msg.tags)) and tags.match_tag(msg.tags)
                eval_s += time.perf_counter() - t
                for name in used:
                    if name not in props:
                        missing[name] += 1
                for pair in pairs:
                    if pair.left not in props and pair.right not in props:
                        neither[pair] += 1
                row = {
                    "msgId": msg.msg_id,
                    "queueId": q,
                    "queueOffset": msg.queue_offset,
                    "tags": msg.tags,
                    "properties": {k: v for k, v in props.items() if k in used or k == "KEYS"},
                }
                if ok:
                    matched += 1
                    if len(sample) < SAMPLE_SIZE:
                        sample.append(row)
                    continue
                if kind == "SQL92":
                    try:
                        verdict = reference_evaluate(tree, props, strict=True)
                    except Exception as e:
                        errors += 1
                        row["why"] = f"evaluation error: {e}"
                    else:
                        if verdict is None:
                            unknown += 1
                            row["why"] = "NULL (a property is missing or compared with NULL)"
                        else:
                            row["why"] = "FALSE"
                if len(not_matched_sample) < SAMPLE_SIZE:
                    not_matched_sample.append(row)
    return {
        "topic": topic,
        "broker": broker_name,
        "expression": expression,
        "expressionType": kind,
        "scanned": scanned,
        "matched": matched,
        "notMatched": scanned - matched,
        "nullResults": unknown,
        "evaluationErrors": errors,
        "propertiesUsed": sorted(used),
        "messagesMissingProperty": dict(missing),
        "warnings": [
            {"code": COMPARES_TWO_PROPERTIES, "text": p.hint(), "position": p.pos, "messagesWithNeither": neither[p]}
            for p in pairs
        ],
        "sample": sample,
        "notMatchedSample": not_matched_sample,
        "seconds": {
            "compile": compile_s,
            "read": read_s,
            "decode": decode_s,
            "evaluate": eval_s,
            "total": time.perf_counter() - t0,
        },
    }
