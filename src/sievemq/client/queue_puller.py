"""The pull loop of one message queue, shared by PushConsumer and PullConsumer.

Each queue a consumer owns has one loop. A round pauses while the consumer holds too much (flow control), finds
the queue's broker (refreshing the route when no address is known), pulls one batch (long polling) and acts on
the answer (docs/protocol/requests.md §6): SUCCESS hands the messages that pass the subscription's client-side
check to the consumer; PULL_NOT_FOUND and PULL_RETRY_IMMEDIATELY move the next offset on; PULL_OFFSET_MOVED moves
it too, with a warning; any other code, and any error, waits ``PULL_RETRY_DELAY`` and pulls the same offset
again. What differs between the consumers (where the next offset lives, when to pause and to stop, what the
answers do, which offset a pull commits) is a ``PullTarget``; how a batch is fetched is a ``Fetch``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol, TypedDict

from sievemq.client.api import PullResult
from sievemq.client.errors import FilterFunctionError
from sievemq.client.instance import ClientInstance
from sievemq.client.message import MessageQueue
from sievemq.client.subscription import SubscriptionEntry
from sievemq.protocol.message import MessageExt
from sievemq.remoting.codes import ResponseCode

if TYPE_CHECKING:
    from sievemq.client.filter_functions import FunctionFilters

log = logging.getLogger(__name__)

PULL_RETRY_DELAY = 3.0
"""Seconds before a failed pull (an error, or an answer with an unexpected code) is tried again."""
FLOW_CONTROL_DELAY = 0.05
"""Seconds between checks while a consumer holds too many messages to pull more."""

Fetch = Callable[[str, SubscriptionEntry, int, int | None], Awaitable[PullResult]]
"""``(broker address, subscription, offset, commit offset or None) -> the answer``: one PULL_MESSAGE."""
Sleep = Callable[[float], Awaitable[None]]


class Brokers(Protocol):
    """Where a queue's broker is (``ClientInstance`` is one)."""

    def broker_addr(self, broker_name: str, master_only: bool = False, prefer: int = 0) -> str | None:
        """Broker ``prefer``'s address when listed, else the master's, else (unless ``master_only``) a slave's; None
        when the routes know none."""
        ...

    async def update_route(self, topic: str) -> object:
        """Fetch the topic's route again."""
        ...


class PullTarget(Protocol):
    """What one consumer does with one queue's pulls."""

    def running(self) -> bool:
        """False once the consumer closes."""
        ...

    def dropped(self) -> bool:
        """True once this loop's pulls are no longer wanted (queue rebalanced away, seek); an answer arriving then
        is ignored."""
        ...

    def subscription(self) -> SubscriptionEntry | None:
        """The subscription to pull with now (None: the topic is no longer subscribed, the loop ends)."""
        ...

    def next_offset(self) -> int:
        """The offset the next pull asks for."""
        ...

    def flow_controlled(self) -> bool:
        """True while the consumer holds too much to pull more."""
        ...

    def commit_offset(self) -> int | None:
        """The consumed offset a pull may carry to the broker (sent to a master only); None for none."""
        ...

    def on_messages(self, kept: list[MessageExt], next_offset: int) -> None:
        """A SUCCESS answer: the messages that passed the subscription's check, and where to pull next."""
        ...

    def on_advance(self, next_offset: int) -> None:
        """PULL_NOT_FOUND or PULL_RETRY_IMMEDIATELY: nothing (more) to hand out; pull from ``next_offset`` next."""
        ...

    async def on_offset_moved(self, next_offset: int) -> None:
        """PULL_OFFSET_MOVED: the asked offset is outside the queue; the broker says to go on at ``next_offset``."""
        ...


class PullSettings(Protocol):
    """How a consumer pulls (a ``PullConsumer``, a ``ConsumeOptions``); read at every pull, so that changes apply to
    the next."""

    @property
    def pull_batch_size(self) -> int:
        """Messages per pull, at most."""
        ...

    @property
    def pull_suspend(self) -> float:
        """Long-polling time, seconds."""
        ...

    @property
    def pull_timeout(self) -> float:
        """Seconds to wait for the answer."""
        ...


class _PullArgs(TypedDict):
    max_nums: int
    suspend_ms: int
    commit_offset: int | None
    timeout: float


def fetch_for(
    inst: ClientInstance,
    mq: MessageQueue,
    group: str,
    settings: PullSettings,
    filter_servers: Callable[[], FunctionFilters | None] = lambda: None,
) -> Fetch:
    """The ``Fetch`` of ``mq`` for consumer group ``group``: from its broker with the subscription in the request, or,
    for a filter-function subscription, through ``filter_servers()`` (docs/protocol/filter-server.md §6)."""

    async def fetch(addr: str, entry: SubscriptionEntry, offset: int, commit_offset: int | None) -> PullResult:
        args: _PullArgs = {
            "max_nums": settings.pull_batch_size,
            "suspend_ms": int(settings.pull_suspend * 1000),
            "commit_offset": commit_offset,
            "timeout": settings.pull_timeout,
        }
        if entry.selector.is_function:
            servers = filter_servers()
            assert servers is not None
            return await servers.pull(mq, addr, entry, offset, **args)
        conn = await inst.conn(addr)
        return await entry.pull(conn, group, mq, offset, **args)

    return fetch


class QueuePuller:
    """Pulls one queue for a ``PullTarget`` until it stops; ``logger`` is the consumer's (its records keep its name)."""

    def __init__(
        self,
        brokers: Brokers,
        mq: MessageQueue,
        target: PullTarget,
        fetch: Fetch,
        *,
        logger: logging.Logger | None = None,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self.brokers = brokers
        self.mq = mq
        self.target = target
        self.fetch = fetch
        self.log = logger or log
        self._sleep = sleep
        self.suggested = 0
        """The broker id the last answer suggested for the next pull (0: the master; back to 0 after a failure)."""

    async def run(self) -> None:
        """Pull until the consumer closes, the queue is dropped or its topic is no longer subscribed."""
        while self.target.running() and not self.target.dropped():
            if not await self.step():
                return

    async def step(self) -> bool:
        """One round: a flow-control pause, or one pull and what its answer says; False when the loop must end."""
        t, mq = self.target, self.mq
        entry = t.subscription()
        if entry is None:
            return False
        if t.flow_controlled():
            await self._sleep(FLOW_CONTROL_DELAY)
            return True
        addr = self.brokers.broker_addr(mq.broker_name, prefer=self.suggested)
        try:
            if addr is None:
                await self.brokers.update_route(mq.topic)
                raise ConnectionError(f"no address known for broker {mq.broker_name}")
            commit = t.commit_offset()
            is_master = self.brokers.broker_addr(mq.broker_name, master_only=True) == addr
            r = await self.fetch(addr, entry, t.next_offset(), commit if is_master else None)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            if t.dropped() or not t.running():
                return False
            self.suggested = 0
            if not isinstance(e, FilterFunctionError):  # those are logged (rate-limited) where they arise
                self.log.warning("pull %s@%d failed: %s; retrying in %.0fs", mq, t.next_offset(), e, PULL_RETRY_DELAY)
            await self._sleep(PULL_RETRY_DELAY)
            return True
        if t.dropped():
            return False
        self.suggested = r.suggest_broker_id  # where the broker says to pull next (RocketMQ's pullFromWhichNode)
        await self.handle(entry, r)
        return True

    async def handle(self, entry: SubscriptionEntry, r: PullResult) -> None:
        """Act on one pull answer (a code other than the four pull outcomes backs off ``PULL_RETRY_DELAY``)."""
        t = self.target
        if r.code == ResponseCode.SUCCESS:
            t.on_messages(entry.accept(r.messages, r.min_offset, r.max_offset), r.next_begin_offset)
        elif r.code in (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY):
            t.on_advance(r.next_begin_offset)
        elif r.code == ResponseCode.PULL_OFFSET_MOVED:
            self.log.warning("offset of %s moved from %d to %d", self.mq, t.next_offset(), r.next_begin_offset)
            await t.on_offset_moved(r.next_begin_offset)
        else:
            self.log.warning("pull %s@%d: [%d] %s", self.mq, t.next_offset(), r.code, r.remark)
            await self._sleep(PULL_RETRY_DELAY)
