"""The consumer-group settings the proxy acts on (docs/proxy.md §8): whether a group is FIFO
(``consumeMessageOrderly``) and its ``retryMaxTimes``, read from the brokers by GET_SUBSCRIPTIONGROUP_CONFIG and
kept ``ttl`` seconds, per (broker, group): the broker a receive goes to decides how it pops.

A FIFO group's consumers are told ``fifo`` in their Telemetry settings, receive by orderly POP, and get one
assignment per queue (as RocketMQ's proxy gives them).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import orjson

from sievemq.errors import RemotingError
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection

__all__ = ["GroupSettings", "GroupView"]

MAX_CACHED = 4096
"""(broker, group) pairs kept at most (a flood of invented groups empties the cache, it does not grow it)."""


@dataclass(frozen=True, slots=True)
class GroupView:
    """What the proxy needs of a group's SubscriptionGroupConfig."""

    orderly: bool
    retry_max_times: int

    @property
    def max_attempts(self) -> int:
        """Deliveries of a message before the broker dead-letters it (at least 1)."""
        return max(1, self.retry_max_times + 1)


NOT_ORDERLY = GroupView(False, 16)
"""What a broker that cannot answer GET_SUBSCRIPTIONGROUP_CONFIG holds: no FIFO groups."""


class GroupSettings:
    """See the module docstring. ``conn`` opens a broker connection by address."""

    def __init__(self, conn: Callable[[str], Awaitable[Connection]], timeout: float, ttl: float = 5.0) -> None:
        self._conn, self.timeout, self.ttl = conn, timeout, ttl
        self._cache: dict[tuple[str, str], tuple[float, GroupView]] = {}

    async def get(self, addr: str, group: str) -> GroupView:
        """The group's settings on the broker at ``addr`` (RemotingError SUBSCRIPTION_GROUP_NOT_EXIST when that
        broker has no such group and does not create groups)."""
        now = time.monotonic()
        cached = self._cache.get((addr, group))
        if cached is not None and now - cached[0] < self.ttl:
            return cached[1]
        conn = await self._conn(addr)
        resp = await conn.request(
            RemotingCommand.request(RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG, {"group": group}), self.timeout
        )
        if resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
            view = NOT_ORDERLY  # a broker of a version before FIFO groups (a rolling upgrade): it has none
        elif resp.code != ResponseCode.SUCCESS:
            raise RemotingError.from_response(resp.code, resp.remark, resp.ext_fields)
        else:
            view = parse_view(resp.body)
        if len(self._cache) >= MAX_CACHED:
            self._cache.clear()
        self._cache[(addr, group)] = (now, view)
        return view


def parse_view(body: bytes) -> GroupView:
    """A SubscriptionGroupConfig JSON document as a ``GroupView`` (RemotingError when it is not one)."""
    try:
        doc = orjson.loads(body)
        orderly = doc.get("consumeMessageOrderly", False)
        retries = doc.get("retryMaxTimes", 16)
        if not isinstance(orderly, bool) or not isinstance(retries, int) or isinstance(retries, bool):
            raise TypeError("consumeMessageOrderly must be a boolean and retryMaxTimes an integer")
        return GroupView(orderly, retries)
    except (orjson.JSONDecodeError, AttributeError, TypeError) as e:
        raise RemotingError(ResponseCode.SYSTEM_ERROR, f"the broker's group config is not readable: {e}") from None
