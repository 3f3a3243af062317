"""What each dashboard endpoint asks the cluster, through the operator's admin API (docs/dashboard.md §3).

``DashboardData`` holds one ``AdminClient`` (its connections are kept between requests) and answers each endpoint
with a JSON-ready dict; parameters arrive checked (``params.py``) and answers are shaped by ``views.py``.
"""

from __future__ import annotations

import asyncio
from bisect import bisect_right
from typing import Any

from sievemq.admin.api import AdminClient, BrokerInfo, describe_failure
from sievemq.admin.message_view import BODY_PREVIEW_BYTES
from sievemq.admin.messages import FIND_MAX, consumption, find_by_key, show
from sievemq.admin.progress import SYSTEM_GROUPS, aggregate, broker_views, group_progress, known_groups
from sievemq.admin.time_search import TIME_SEARCH_MAX, find_by_time
from sievemq.admin.topic_stats import TopicStats, topic_consumers, topic_stats
from sievemq.dashboard import views
from sievemq.dashboard.access import access_view, write
from sievemq.dashboard.errors import error_of
from sievemq.errors import RemotingError, SieveError
from sievemq.protocol.names import is_system_topic, reply_topic
from sievemq.protocol.route import TopicRouteData
from sievemq.version import __version__

__all__ = ["LIST_MAX", "DashboardData"]

LIST_MAX = 2000
"""Most topics or groups one list answers (``truncated`` says when there were more)."""
_AT_ONCE = 8
"""Topics or groups asked about at once by one list."""


def _page(names: list[str], after: str | None) -> list[str]:
    """The sorted ``names`` after ``after`` (all of them when None)."""
    return names if after is None else names[bisect_right(names, after):]


class DashboardData:
    """The dashboard's answers over one ``AdminClient``."""

    def __init__(self, admin: AdminClient, refresh_seconds: int = 5) -> None:
        self.admin = admin
        self.refresh_seconds = refresh_seconds

    def info(self) -> dict[str, Any]:
        """``/api/info``: version, the name servers, the page's refresh and the API's limits."""
        limits = {"list": LIST_MAX, "findByKey": FIND_MAX, "findByTime": TIME_SEARCH_MAX,
                  "bodyPreviewBytes": BODY_PREVIEW_BYTES, "listPreviewBytes": views.LIST_PREVIEW_BYTES}  # fmt: skip
        return {"version": __version__, "namesrv": self.admin.namesrv, "refreshSeconds": self.refresh_seconds,
                "limits": limits}  # fmt: skip

    async def cluster(self) -> dict[str, Any]:
        """``/api/cluster``."""
        brokers = await self.admin.brokers()
        return views.cluster_view(await self.admin.cluster_status(), brokers, self.admin.namesrv)

    async def _route(self, topic: str) -> TopicRouteData | None:
        try:
            return await self.admin.route(topic)
        except RemotingError:
            return None

    async def _topic(self, topic: str, brokers: list[BrokerInfo]) -> tuple[TopicStats, TopicRouteData | None,
                                                                           dict[str, int]]:  # fmt: skip
        stats = await topic_stats(self.admin, topic, brokers)
        consumed, errors = await topic_consumers(self.admin, topic, brokers)
        stats.errors.update(errors)
        return stats, await self._route(topic), consumed

    async def topics(self, include_system: bool, limit: int, after: str | None = None) -> dict[str, Any]:
        """``/api/topics``: the topics (not the system ones unless asked) in name order, at most ``limit``, those
        after ``after`` when given (a page; ``next`` is the ``after`` of the next one, None on the last)."""
        brokers = await self.admin.brokers()
        system = {b.name for b in brokers} | {b.cluster for b in brokers} | {reply_topic(b.cluster) for b in brokers}
        every = sorted(t for t in await self.admin.topic_list()
                       if include_system or not (is_system_topic(t) or t in system))  # fmt: skip
        names = _page(every, after)
        gate = asyncio.Semaphore(_AT_ONCE)
        errors: dict[str, str] = {}

        async def one(t: str) -> dict[str, Any] | None:
            async with gate:
                try:
                    return views.topic_row(*await self._topic(t, brokers))
                except Exception as e:  # one topic's failure (gone meanwhile, a broker down) is listed
                    err = error_of(e)
                    if err is None:
                        raise
                    errors[t] = err.message
                    return None

        rows = await asyncio.gather(*(one(t) for t in names[:limit]))
        return {"topics": [r for r in rows if r is not None], "truncated": len(names) > limit, "errors": errors,
                "total": len(every), "next": names[limit - 1] if len(names) > limit else None}  # fmt: skip

    async def topic(self, topic: str) -> dict[str, Any]:
        """``/api/topic``: one topic's queues and consumers (TopicNotFound when there is no such topic)."""
        return views.topic_detail(*await self._topic(topic, await self.admin.brokers()))

    async def groups(self, include_system: bool, limit: int, after: str | None = None) -> dict[str, Any]:
        """``/api/groups``: the consumer groups with members, subscriptions, consistency and total lag, in name
        order, at most ``limit``, those after ``after`` when given (``next``: as for topics)."""
        brokers = await self.admin.brokers()
        every = sorted(g for g in await known_groups(self.admin, brokers) if include_system or g not in SYSTEM_GROUPS)
        names = _page(every, after)
        gate = asyncio.Semaphore(_AT_ONCE)

        async def one(g: str) -> dict[str, Any]:
            async with gate:
                progress = aggregate(g, *await broker_views(self.admin, brokers, g))
                try:
                    state = views.consistency(await self.admin.group_status(g))
                except (SieveError, OSError, ValueError) as e:
                    state = {"state": "unknown", "error": describe_failure(e)}
            return {"group": g, "members": [m.to_json() for m in progress.members],
                    "consumeType": progress.consume_type,
                    "messageModel": progress.message_model, "subscriptions": progress.subscriptions,
                    "lag": progress.lag, "inflight": progress.inflight, "lastTimestamp": progress.last_timestamp,
                    "topics": progress.topics, "consistency": state, "errors": progress.errors}  # fmt: skip

        rows = await asyncio.gather(*(one(g) for g in names[:limit]))
        return {"groups": list(rows), "truncated": len(names) > limit, "total": len(every),
                "next": names[limit - 1] if len(names) > limit else None}  # fmt: skip

    async def group(self, group: str) -> dict[str, Any]:
        """``/api/group``: lag per queue, members and their subscriptions, consistency, filter counts."""
        progress = await group_progress(self.admin, group)
        statuses = await self.admin.group_status(group)
        filters = await self.admin.group_filters(group)
        doc = progress.to_json()
        queues = doc.get("queues") or []
        if len(queues) > LIST_MAX:  # a group consuming thousands of topics: the most lagging queues, in order
            keep = set(sorted(range(len(queues)), key=lambda i: -int(queues[i].get("lag") or 0))[:LIST_MAX])
            doc["queues"] = [q for i, q in enumerate(queues) if i in keep]
        return {**doc, "queuesTotal": len(queues), "consistency": views.consistency(statuses), "status": statuses,
                "filters": filters}  # fmt: skip

    async def by_id(self, msg_id: str, topic: str | None) -> dict[str, Any]:
        """``/api/messages/by-id``: every record the id names (MessageNotFound when none)."""
        found = await show(self.admin, msg_id, topic)
        return {"messages": views.message_rows(found.messages), "errors": found.errors}

    async def by_key(self, topic: str, key: str, begin: int, end: int | None, limit: int) -> dict[str, Any]:
        """``/api/messages/by-key``: messages of ``topic`` with ``key``, newest first."""
        found = await find_by_key(self.admin, topic, key, begin, end, limit)
        return {"messages": views.message_rows(found.messages), "errors": found.errors}

    async def by_time(self, topic: str, begin: int, end: int, limit: int) -> dict[str, Any]:
        """``/api/messages/by-time``: messages of ``topic`` stored in ``[begin, end]``, oldest first."""
        found = await find_by_time(self.admin, topic, begin, end, limit)
        return {"messages": views.message_rows(found.messages), "errors": found.errors, "notes": found.notes}

    async def message(self, msg_id: str, topic: str | None) -> dict[str, Any]:
        """``/api/message``: one message in full (the record an offsetMsgId names, else the first the id names),
        with which groups consumed it."""
        found = await show(self.admin, msg_id, topic)
        view = next((v for v in found.messages if v.msg.offset_msg_id == msg_id), found.messages[0])
        tracks = await consumption(self.admin, view)
        return {"message": view.to_json(BODY_PREVIEW_BYTES), "records": views.message_rows(found.messages, 0),
                "consumption": [t.to_json() for t in tracks], "errors": found.errors}  # fmt: skip

    async def explain(self, topic: str, kind: str, expression: str, last: int) -> dict[str, Any]:
        """``/api/explain``: the selector over the last ``last`` messages of each queue, per broker and in all."""
        reports = await self.admin.explain(topic, expression, kind, last)
        return {"topic": topic, "expressionType": kind, "expression": expression, "last": last,
                "totals": views.explain_totals(reports), "reports": reports}  # fmt: skip

    async def access(self) -> dict[str, Any]:
        """``/api/access``: every master's ACL 2.0 users (no passwords) and policy entries, merged."""
        auth = self.admin.auth()
        targets = await auth.targets(None, None)
        return access_view(targets, await auth.each(targets, auth.access))

    async def access_write(self, action: str, args: dict[str, Any], who: str) -> dict[str, Any]:
        """``POST /api/access``: a checked write (``access.parse_write``) on every master, by dashboard user
        ``who`` (logged)."""
        return await write(self.admin.auth(), action, args, who)

    async def trace(self, msg_id: str, topic: str | None, trace_topic: str, group: str | None) -> dict[str, Any]:
        """``/api/trace``: ``AdminClient.message_trace`` (docs/traces.md §3)."""
        return await self.admin.message_trace(msg_id, topic, trace_topic, group)

