"""Filter functions, client side: registering them with the filter servers and pulling through those servers.

A subscription with ``Selector.function("module:function")`` or ``Selector.function_source(...)`` is RocketMQ's
class-filter mode (docs/protocol/filter-server.md). Heartbeats carry it as expression type TAG with
``classFilterMode`` true and the function's name as ``subString``, so the broker delivers the group every message
of the topic; the function itself runs on the filter servers that the route lists for each broker
(``filterServerTable``):

* Registration: REGISTER_MESSAGE_FILTER_CLASS (302) to every filter server of the topic's route, at start and
  subscribe and on every heartbeat round (``heartbeat_interval``), but re-sent only to a filter server that does
  not hold the current ``classCRC`` yet (new in the route, changed function), or after one of its pull answers
  said that it has no registration (a restarted filter server: registered again at once) or that the function is
  disabled there (after repeated failures: registered again, which re-enables it, at the next round).
* Pulls: PULL_MESSAGE with FLAG_CLASS_FILTER (and no FLAG_SUBSCRIPTION) to a filter server of the queue's broker,
  chosen at random; on a transport error or timeout the next one is tried. When none is listed or all fail, a
  ``FilterFunctionError`` names the topic, the function and each server's problem; the consumer logs it and
  retries the same offset later. Offsets are committed to the broker as usual.

Only ``sievemq.protocol.upload_signing`` (pure standard library) is used from the filter server package.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable, Iterable

from sievemq.client import api
from sievemq.client.errors import FilterFunctionError
from sievemq.client.function_status import ERROR_LOG_INTERVAL, FunctionStatus, StatusBoard, function_of
from sievemq.client.instance import ClientInstance
from sievemq.client.message import MessageQueue
from sievemq.client.subscription import SubscriptionEntry
from sievemq.errors import ConnectionClosedError, RemotingError, RequestTimeoutError
from sievemq.protocol.reasons import Reason
from sievemq.remoting.codes import ResponseCode
from sievemq.util.tasks import Background

__all__ = ["ERROR_LOG_INTERVAL", "REGISTER_TIMEOUT", "ROUTE_REFRESH_INTERVAL", "TRANSPORT_ERRORS", "FunctionFilters",
           "FunctionStatus"]  # fmt: skip

log = logging.getLogger(__name__)

REGISTER_TIMEOUT = 15.0
"""Timeout of a 302: the filter server loads the function in a worker first (``loadTimeoutSeconds``, 10 s)."""
ROUTE_REFRESH_INTERVAL = 1.0
"""Pulls that find no usable filter server refresh the topic's route at most this often."""
TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (ConnectionClosedError, RequestTimeoutError, OSError, TimeoutError)
_OK_PULL_CODES = frozenset(
    {
        ResponseCode.SUCCESS,
        ResponseCode.PULL_NOT_FOUND,
        ResponseCode.PULL_RETRY_IMMEDIATELY,
        ResponseCode.PULL_OFFSET_MOVED,
    }
)

Key = tuple[str, str]
"""(topic, filter server address)."""


class _Refused(Exception):
    """A filter server refused the registration (the text names server, function, group, topic and reason)."""

    def __init__(self, code: int, text: str, reason: str | None = None) -> None:
        super().__init__(text)
        self.code = code
        self.text = text
        self.reason = reason


class FunctionFilters:
    """The filter-function side of one consumer group: 302 registrations and pulls through filter servers."""

    def __init__(self, inst: ClientInstance, group: str, register_timeout: float = REGISTER_TIMEOUT) -> None:
        self.inst = inst
        self.group = group
        self.register_timeout = register_timeout
        self._accepted: dict[Key, int] = {}
        """classCRC each filter server accepted."""
        self._refused: dict[Key, tuple[int, int, str, str | None]] = {}
        """classCRC, response code and refusal text of each filter server that refused (re-sent at the next round
        only)."""
        self._disabled: set[Key] = set()
        """Filter servers whose pulls said the function is disabled (re-registered at the next round)."""
        self._locks: dict[Key, asyncio.Lock] = {}
        self._board = StatusBoard()
        """What ``status()`` reports (``client/function_status.py``)."""
        self._route_refreshed: dict[str, float] = {}
        self._rounds = Background(f"filter functions of {group}")

    # ------------------------------------------------------------------------------------------ lifecycle
    def start(self, entries: Callable[[], Iterable[SubscriptionEntry]], interval: float) -> None:
        """Run a registration round every ``interval`` seconds (the heartbeat interval) over ``entries()``."""
        if not self._rounds.running:
            self._rounds.start(self._every(entries, interval))

    async def close(self) -> None:
        """Stop the registration rounds."""
        await self._rounds.stop()

    async def _every(self, entries: Callable[[], Iterable[SubscriptionEntry]], interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                await self.register_all(entries(), complete=True)
            except Exception:
                log.exception("registering the filter functions of group %s failed", self.group)

    # ------------------------------------------------------------------------------------------ routes, status
    def servers(self, topic: str, broker_addr: str | None = None) -> list[str]:
        """Filter servers of ``broker_addr`` in ``topic``'s cached route (of all its brokers when None)."""
        route = self.inst.route(topic)
        if route is None:
            return []
        table = route.filter_server_table
        if broker_addr is not None:
            return list(dict.fromkeys(table.get(broker_addr, [])))
        return list(dict.fromkeys(s for addr in sorted(table) for s in table[addr]))

    def status(self) -> dict[str, FunctionStatus]:
        """Topic -> the state of its filter function (copies)."""
        return self._board.report(self._accepted)

    async def _refresh_route(self, topic: str) -> None:
        now = time.monotonic()
        if now - self._route_refreshed.get(topic, float("-inf")) < ROUTE_REFRESH_INTERVAL:
            return
        self._route_refreshed[topic] = now
        await self.inst.update_route(topic)

    # ------------------------------------------------------------------------------------------ registration
    async def ensure(self, entry: SubscriptionEntry, server: str, *, fresh: bool = False) -> None:
        """Register ``entry``'s function with ``server`` (302) unless it holds the current classCRC.

        Without ``fresh`` (before a pull) a refusal is not re-sent until the next round, and a function a pull found
        disabled is left alone; with ``fresh`` (a round) both are sent again. Raises ``_Refused`` for a refusal;
        transport errors propagate.
        """
        fn = function_of(entry)
        key = (entry.topic, server)
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            if self._accepted.get(key) == fn.crc and not (fresh and key in self._disabled):
                return
            refused = self._refused.get(key)
            if refused is not None and refused[0] == fn.crc and not fresh:
                raise _Refused(refused[1], refused[2], refused[3])
            conn = await self.inst.pool.get(server)
            try:
                await api.register_filter_class(
                    conn, fn.register_fields(self.group, entry.topic, server), fn.body, self.register_timeout
                )
            except RemotingError as refusal:
                self._accepted.pop(key, None)
                e = _Refused(
                    refusal.code,
                    f"filter server {server} refused {fn.describe()} of group {self.group} on topic {entry.topic}: "
                    f"[{refusal.code}] {refusal.remark or 'no reason given'}",
                    refusal.reason,
                )
                self._refused[key] = (fn.crc, e.code, e.text, e.reason)
                log.error("%s", e.text)
                self._board.error(entry, e.text)
                raise e from None
            self._accepted[key] = fn.crc
            self._refused.pop(key, None)
            was_disabled = key in self._disabled
            self._disabled.discard(key)
            log.info(
                "filter server %s %s %s of group %s on topic %s (classCRC %d)",
                server,
                "re-enabled" if was_disabled else "registered",
                fn.describe(),
                self.group,
                entry.topic,
                fn.crc,
            )

    async def register_all(self, entries: Iterable[SubscriptionEntry], *, complete: bool = False) -> list[_Refused]:
        """One registration round over the function subscriptions among ``entries``: each with every filter server
        of its topic's route where needed. ``complete``: ``entries`` are all the group's subscriptions, so state of
        other topics is dropped. Returns the refusals (transport problems are logged and retried later)."""
        funcs = [e for e in entries if e.selector.is_function]
        topics = {e.topic for e in funcs}
        if complete:
            self._board.keep_only(topics)
        jobs: list[tuple[SubscriptionEntry, str]] = []
        for entry in funcs:
            self._board.of(entry)
            servers = self.servers(entry.topic)
            self._forget_except(entry.topic, set(servers))
            if not servers and self.inst.route(entry.topic) is None:
                # No route yet (the topic does not exist, or its broker has not registered it yet): the consumer
                # waits for the topic as for any other; the function is registered once it is routed.
                log.info("topic %s has no route yet: %s of group %s is registered with its filter servers once it "
                         "has", entry.topic, function_of(entry).describe(), self.group)  # fmt: skip
            elif not servers:
                text = (
                    f"no filter server is listed in the route of topic {entry.topic} (filterServerTable) to run "
                    f"{function_of(entry).describe()} of group {self.group}; its queues wait (nothing is skipped) "
                    "until a filter server registers with the broker"
                )
                log.error("%s", text)
                self._board.error(entry, text)
            jobs.extend((entry, s) for s in servers)
        if complete:
            for key in [k for k in (*self._accepted, *self._refused, *self._disabled) if k[0] not in topics]:
                self._forget(key)
        results = await asyncio.gather(*(self._round_one(e, s) for e, s in jobs))
        return [r for r in results if r is not None]

    async def _round_one(self, entry: SubscriptionEntry, server: str) -> _Refused | None:
        try:
            await self.ensure(entry, server, fresh=True)
        except _Refused as e:
            return e
        except TRANSPORT_ERRORS as e:
            text = (
                f"cannot register {function_of(entry).describe()} of group {self.group} on topic {entry.topic} with "
                f"filter server {server}: {e or type(e).__name__}; trying again before pulling through it"
            )
            log.warning("%s", text)
            self._board.error(entry, text)
        return None

    def _forget(self, key: Key) -> None:
        self._accepted.pop(key, None)
        self._refused.pop(key, None)
        self._disabled.discard(key)

    def _forget_except(self, topic: str, servers: set[str]) -> None:
        """Filter servers gone from the route are forgotten: if they come back they are registered anew."""
        for key in [k for k in (*self._accepted, *self._refused, *self._disabled) if k[0] == topic]:
            if key[1] not in servers:
                self._forget(key)

    # ------------------------------------------------------------------------------------------ pulls
    async def pull(
        self,
        mq: MessageQueue,
        broker_addr: str,
        entry: SubscriptionEntry,
        offset: int,
        *,
        max_nums: int,
        suspend_ms: int,
        commit_offset: int | None,
        timeout: float,
    ) -> api.PullResult:
        """PULL_MESSAGE (FLAG_CLASS_FILTER) of ``mq`` at ``offset`` through a random filter server of
        ``broker_addr``, trying the others on transport errors; ``FilterFunctionError`` when none can serve it."""
        servers = self.servers(mq.topic, broker_addr)
        if not servers:
            await self._refresh_route(mq.topic)
            servers = self.servers(mq.topic, broker_addr)
        if not servers:
            raise self._unavailable(entry, mq, offset, f"the route lists no filter server for broker {broker_addr}")
        random.shuffle(servers)
        problems: list[str] = []
        for server in servers:
            try:
                r = await self._pull_one(server, mq, entry, offset, max_nums, suspend_ms, commit_offset, timeout)
            except _Refused as e:
                problems.append(e.text)
                continue
            except TRANSPORT_ERRORS as e:
                problems.append(f"filter server {server}: {e or type(e).__name__}")
                log.info("pull of %s through filter server %s failed (%s); trying another", mq, server, e)
                continue
            if problems:  # a filter server failed: the route may have dropped it already
                await self._refresh_route(mq.topic)
            return r
        await self._refresh_route(mq.topic)  # the next try uses the servers the route lists then
        raise self._unavailable(entry, mq, offset, "; ".join(problems))

    async def _pull_one(
        self,
        server: str,
        mq: MessageQueue,
        entry: SubscriptionEntry,
        offset: int,
        max_nums: int,
        suspend_ms: int,
        commit_offset: int | None,
        timeout: float,
    ) -> api.PullResult:
        async def once() -> api.PullResult:
            await self.ensure(entry, server)
            conn = await self.inst.pool.get(server)
            return await api.pull_message(
                conn,
                self.group,
                mq.topic,
                mq.queue_id,
                offset,
                max_nums=max_nums,
                subscription=None,
                class_filter=True,
                suspend_ms=suspend_ms,
                commit_offset=commit_offset,
                sub_version=entry.sub_version,
                timeout=timeout,
            )

        r = await once()
        key = (mq.topic, server)
        if r.reason == Reason.FILTER_NOT_REGISTERED:
            # A restarted filter server (or one that missed our 302): register again and pull at once.
            log.info(
                "filter server %s has no registration of %s for group %s on topic %s; registering it again",
                server,
                function_of(entry).describe(),
                self.group,
                mq.topic,
            )
            self._forget(key)
            r = await once()
        if r.code in _OK_PULL_CODES:
            if self._board.cleared(entry):
                log.info("%s of group %s on topic %s runs again (filter server %s)", function_of(entry).describe(),
                         self.group, mq.topic, server)  # fmt: skip
            return r
        text = f"pull of {mq} at offset {offset} through filter server {server}: [{r.code}] {r.remark or ''}"
        self._board.error(entry, text)
        if r.reason == Reason.FILTER_DISABLED and key not in self._disabled:
            self._disabled.add(key)
            log.warning(
                "%s is disabled on filter server %s for group %s; it is registered again (re-enabling it) at the "
                "next heartbeat round",
                function_of(entry).describe(),
                server,
                self.group,
            )
        return r

    def _unavailable(self, entry: SubscriptionEntry, mq: MessageQueue, offset: int, detail: str) -> FilterFunctionError:
        text = (
            f"no filter server could run {function_of(entry).describe()} of group {self.group} on topic {mq.topic} "
            f"(queue {mq}, offset {offset}): {detail}. Nothing is skipped: the pull is retried"
        )
        self._board.unavailable(entry, text)
        return FilterFunctionError(text)
