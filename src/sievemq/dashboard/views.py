"""The dashboard API's answers put together from the admin API's results (docs/dashboard.md §3). Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sievemq.admin.api import BrokerInfo
from sievemq.admin.message_view import MessageView
from sievemq.admin.topic_stats import TopicStats
from sievemq.protocol.route import TopicRouteData

__all__ = [
    "LIST_PREVIEW_BYTES",
    "cluster_view",
    "consistency",
    "explain_totals",
    "message_rows",
    "topic_detail",
    "topic_row",
    "trace_view",
    "with_content",
]

LIST_PREVIEW_BYTES = 256
"""Body bytes each message of a search result shows (the message view shows ``BODY_PREVIEW_BYTES``)."""


def cluster_view(
    rows: Sequence[Mapping[str, Any]], brokers: Iterable[BrokerInfo], namesrv: list[str]
) -> dict[str, Any]:
    """``/api/cluster``: the name servers asked, each cluster's broker sets, and every broker's row
    (``AdminClient.cluster_status``)."""
    clusters: dict[str, list[str]] = {}
    for b in brokers:
        clusters.setdefault(b.cluster, []).append(b.name)
    return {
        "namesrv": namesrv,
        "clusters": {c: sorted(names) for c, names in sorted(clusters.items())},
        "brokers": [dict(r) for r in rows],
    }


def _route_sets(route: TopicRouteData | None) -> list[dict[str, Any]]:
    if route is None:
        return []
    addrs = {bd.broker_name: bd.broker_addrs for bd in route.broker_datas}
    return [{"brokerName": qd.broker_name, "readQueueNums": qd.read_queue_nums, "writeQueueNums": qd.write_queue_nums,
             "perm": qd.perm, "addrs": {str(k): v for k, v in sorted(addrs.get(qd.broker_name, {}).items())}}
            for qd in sorted(route.queue_datas, key=lambda q: q.broker_name)]  # fmt: skip


def topic_row(stats: TopicStats, route: TopicRouteData | None, consumed: Mapping[str, int]) -> dict[str, Any]:
    """One topic of ``/api/topics``: messages stored, the counters whose rates are in and out (``putTotal``: sum of
    max offsets; ``consumedTotal``: committed offsets of every group summed), queues per broker set, the groups."""
    per_set: dict[str, int] = {}
    for q in stats.queues:
        per_set[q.broker] = per_set.get(q.broker, 0) + q.messages
    sets = [{**s, "messages": per_set.get(s["brokerName"], 0)} for s in _route_sets(route)]
    return {
        "topic": stats.topic,
        "messages": stats.messages,
        "putTotal": stats.put_total,
        "consumedTotal": sum(consumed.values()),
        "queues": len(stats.queues),
        "lastStoreTimestamp": stats.last_store_timestamp,
        "brokers": sets,
        "groups": sorted(consumed),
        "errors": dict(stats.errors),
    }


def topic_detail(stats: TopicStats, route: TopicRouteData | None, consumed: Mapping[str, int]) -> dict[str, Any]:
    """``/api/topic``: ``topic_row`` with every queue's offsets and store time, and each group's committed total."""
    return {**topic_row(stats, route, consumed), "queueStats": [q.to_json() for q in stats.queues],
            "consumers": dict(consumed)}  # fmt: skip


def consistency(statuses: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A group's subscription consistency over the brokers' GET_GROUP_STATUS answers: ``state`` is ``consistent``
    (every live client subscribes as the group does), ``inconsistent`` (some client differs: it gets no queues of
    that topic), or ``no clients``; with the clients that differ and the inconsistencies the brokers saw."""
    clients: dict[str, bool] = {}
    differing: dict[str, dict[str, str]] = {}
    seen = 0
    for st in statuses:
        seen += int(st.get("inconsistenciesSeen") or 0)
        for c in st.get("clients") or []:
            cid = str(c.get("clientId", ""))
            ok = bool(c.get("consistent", True))
            clients[cid] = clients.get(cid, True) and ok
            for topic, sub in (c.get("subscriptions") or {}).items():
                if not sub.get("consistent", True):
                    differing.setdefault(cid, {})[str(topic)] = str(sub.get("expression", ""))
    state = "no clients" if not clients else "consistent" if all(clients.values()) else "inconsistent"
    return {"state": state, "clients": len(clients), "inconsistentClients": differing, "inconsistenciesSeen": seen}


def explain_totals(reports: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """The counts of ``explain`` over every broker's report."""
    keys = ("scanned", "matched", "notMatched", "nullResults", "evaluationErrors")
    return {k: sum(int(r.get(k) or 0) for r in reports) for k in keys}


def message_rows(views: Iterable[MessageView], preview: int = LIST_PREVIEW_BYTES) -> list[dict[str, Any]]:
    """Messages of a search result, each with a short body preview."""
    return [v.to_json(preview) for v in views]


CONTENT_FIELDS = ("body", "bodyEncoding", "properties", "userProperties")
"""A message's fields a user who may not read contents gets as null (keys, tags and sizes stay)."""


def _message(m: Mapping[str, Any], readable: bool) -> dict[str, Any]:
    shown = {k: (None if k in CONTENT_FIELDS and not readable else v) for k, v in m.items()}
    shown["contentHidden"] = not readable
    return shown


def with_content(answer: Mapping[str, Any], readable: bool) -> dict[str, Any]:
    """A messages answer (``messages``, ``records``: lists; ``message``: one) with ``contentHidden`` on each
    message; without ``readable``, its ``CONTENT_FIELDS`` are null (docs/dashboard.md §5)."""
    out = dict(answer)
    for key in ("messages", "records"):
        if key in out:
            out[key] = [_message(m, readable) for m in out[key]]
    if "message" in out:
        out["message"] = _message(out["message"], readable)
    return out


_HIDDEN_REASON = "hidden: this user may not read message property values, which decide this verdict"


def trace_view(doc: Mapping[str, Any], readable: bool) -> dict[str, Any]:
    """``/api/trace``: ``message trace --json`` with ``contentHidden``; without ``readable``, each filter verdict's
    ``details`` (the message's property values) are null, and so is the ``reason`` of one whose SQL92 evaluation
    failed (its error may quote a value)."""
    out = dict(doc)
    out["contentHidden"] = not readable
    if readable:
        return out
    groups = []
    for g in doc.get("groups") or []:
        row = dict(g)
        f = row.get("filter")
        if isinstance(f, Mapping):
            failed = (f.get("details") or {}).get("result") == "ERROR"
            row["filter"] = {**f, "details": None, "reason": _HIDDEN_REASON if failed else f.get("reason")}
        groups.append(row)
    out["groups"] = groups
    return out

