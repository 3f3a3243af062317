"""A consumer's subscription of one topic, and what consumers do with pulled messages (start offsets:
``start_position.py``).

After the broker's filter (tag hash codes or SQL92), a TAG subscription re-checks each message's tag by exact
string: hash codes collide ("Aa" and "BB" share one), so the broker may send a message the expression does not
name. Such messages are dropped here and their offsets still advance. Messages of a filter-function subscription
were selected by the filter server's run of the function and are all kept.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from sievemq.client import api
from sievemq.client.errors import SubscriptionError
from sievemq.client.message import MessageQueue, Selector, decompress_body
from sievemq.errors import RemotingError
from sievemq.filter.tags import TagExpression
from sievemq.protocol.heartbeat import Subscription
from sievemq.protocol.message import MessageExt, PropertyKey
from sievemq.protocol.names import retry_topic
from sievemq.protocol.reasons import RefusedSubscription
from sievemq.remoting.connection import Connection

if TYPE_CHECKING:
    from sievemq.client.instance import ClientInstance

PULL_FLAG_COMMIT_OFFSET = 0x1


@dataclass(frozen=True)
class SubscriptionEntry:
    """One topic's selector, as sent in heartbeats and pulls."""

    topic: str
    selector: Selector
    sub_version: int
    tags: TagExpression | None

    @classmethod
    def create(cls, topic: str, selector: Selector | str | None) -> SubscriptionEntry:
        """Parse the selector (raises ValueError for a malformed tag expression)."""
        sel = Selector.of(selector)
        if sel.is_function:
            return cls(topic, sel, int(time.time() * 1000), None)
        tags = TagExpression.parse(sel.expression) if sel.is_tag else None
        expression = tags.sub_string if tags is not None else sel.expression
        return cls(topic, Selector(expression, sel.expression_type), int(time.time() * 1000), tags)

    async def pull(
        self,
        conn: Connection,
        group: str,
        mq: MessageQueue,
        offset: int,
        *,
        max_nums: int,
        suspend_ms: int,
        timeout: float,
        commit_offset: int | None = None,
    ) -> api.PullResult:
        """PULL_MESSAGE of ``mq`` from ``offset`` carrying this subscription (FLAG_SUBSCRIPTION)."""
        return await api.pull_message(
            conn,
            group,
            mq.topic,
            mq.queue_id,
            offset,
            max_nums=max_nums,
            subscription=self.selector.expression,
            expression_type=self.selector.expression_type,
            sub_version=self.sub_version,
            suspend_ms=suspend_ms,
            commit_offset=commit_offset,
            timeout=timeout,
        )

    def to_subscription(self) -> Subscription:
        """The heartbeat's SubscriptionData. A filter function is RocketMQ's class-filter mode: expression type TAG,
        ``classFilterMode`` true and ``subString`` the function's name (its source never travels in heartbeats)."""
        fn = self.selector.filter_function
        return Subscription(
            topic=self.topic,
            sub_string=fn.name if fn is not None else self.selector.expression,
            expression_type="TAG" if fn is not None else self.selector.expression_type,
            sub_version=self.sub_version,
            class_filter_mode=fn is not None,
            tags=self.tags.tags if self.tags is not None else frozenset(),
        )

    def accept(self, msgs: Iterable[MessageExt], min_offset: int, max_offset: int) -> list[MessageExt]:
        """Inflate bodies, stamp MIN_OFFSET/MAX_OFFSET, and keep the messages whose tag really matches."""
        out = []
        tags = self.tags if self.tags is not None and not self.tags.sub_all else None
        lo, hi = str(min_offset), str(max_offset)
        for m in msgs:
            if tags is not None and not tags.match_tag(m.tags):
                continue
            if m.sys_flag & 0x1:
                decompress_body(m)
            props = m.properties
            props[PropertyKey.MIN_OFFSET] = lo
            props[PropertyKey.MAX_OFFSET] = hi
            out.append(m)
        return out


def refusals_for(group: str, refused: Iterable[RefusedSubscription]) -> list[str]:
    """The remarks of the refused subscriptions of ``group`` (a sievemq broker refuses a client whose
    subscription of a topic differs from the group's, and lists it in the heartbeat answer)."""
    return [r.remark for r in refused if r.group == group]


async def check_client_config(inst: ClientInstance, group: str, entries: Iterable[SubscriptionEntry]) -> None:
    """CHECK_CLIENT_CONFIG of the SQL92 subscriptions among ``entries`` with every broker (slaves too); the first
    refusal raises SubscriptionError with the broker's code."""
    for entry in entries:
        if entry.selector.is_tag or entry.selector.is_function:
            continue
        for addr in inst.all_broker_addrs(include_slaves=True):
            conn = await inst.conn(addr)
            try:
                await api.check_client_config(
                    conn, inst.client_id, group, entry.to_subscription(), inst.config.request_timeout
                )
            except RemotingError as e:
                raise SubscriptionError(
                    e.code,
                    f"broker {addr} refused the {entry.selector.expression_type} subscription of {entry.topic!r} "
                    f"({entry.selector.expression!r}): {e.remark or 'no reason given'}",
                    e.reason,
                ) from None


def to_millis(value: int | float | datetime | None, default_ago: float = 1800.0) -> int:
    """A timestamp in ms from ms, a datetime, or None (``default_ago`` seconds ago, Java's half hour)."""
    if value is None:
        return int((time.time() - default_ago) * 1000)
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    return int(value)


def retry_subscription(group: str) -> SubscriptionEntry:
    """The ``%RETRY%<group>`` subscription of every clustering push consumer (``*``)."""
    return SubscriptionEntry.create(retry_topic(group), "*")
