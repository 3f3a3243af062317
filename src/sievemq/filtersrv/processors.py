"""The filter server's request processors.

* 302 REGISTER_MESSAGE_FILTER_CLASS: check the request against the operator's policy (allowed modules, signed
  uploads), load the function in a worker to prove it works (an upload in workers of its own tenant, ``pools``),
  and key it by (topic, group); the tenant of a function it replaces loses its workers.
* 11 PULL_MESSAGE (normally with FLAG_CLASS_FILTER 0x8): pull the same queue/offset from the broker as group
  ``FILTERSRV_CONSUMER`` with subscription ``*`` (suspend flag and time forwarded, so long polling works), run the
  function over the batch in a worker and answer with the matching records exactly as stored. Nothing matched:
  PULL_RETRY_IMMEDIATELY (20) with the advanced offset. A failing function: SYSTEM_ERROR and the offset does not
  move. Any other broker answer (19, 21, ...) is passed through with its header.
* 30001 FILTERSRV_STATUS (private): JSON status with the per-function counts.

Each processor gets only what it uses (the registry, the workers, the policy, the connections to the broker, its
settings); the controller builds them and puts them into its table.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from sievemq.errors import RemotingError
from sievemq.filtersrv.pools import TenantsFull, WorkerPools
from sievemq.filtersrv.registry import FilterRegistry, Registration, RegistrationPolicy
from sievemq.filtersrv.tenants import tenant_of
from sievemq.filtersrv.workers import FilterFailure
from sievemq.protocol.names import FILTERSRV_CONSUMER_GROUP
from sievemq.protocol.pull_header import PullMessageHeader, pull_sys_flag
from sievemq.protocol.reasons import REASON_FIELD, Reason
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection, ConnectionPool
from sievemq.remoting.headers import int_or, require_str
from sievemq.remoting.server import ProcessorTable

log = logging.getLogger(__name__)

_PULL_HEADER_KEYS = ("suggestWhichBrokerId", "nextBeginOffset", "minOffset", "maxOffset")
_QUEUE_OFFSET = struct.Struct(">q")


def split_records(blob: bytes) -> list[tuple[int, int]]:
    """(start, end) of each stored record in a pull body, by TOTALSIZE; ValueError if the sizes do not add up."""
    spans: list[tuple[int, int]] = []
    pos, n = 0, len(blob)
    while pos < n:
        if pos + 4 > n:
            raise ValueError(f"pull body ends inside a record header at {pos}")
        total = int.from_bytes(blob[pos : pos + 4], "big", signed=True)
        if total <= 8 or pos + total > n:
            raise ValueError(f"record at {pos} has TOTALSIZE {total} beyond the {n}-byte body")
        spans.append((pos, pos + total))
        pos += total
    return spans


def retire_replaced(workers: WorkerPools, old: Registration | None, new: Registration | None) -> None:
    """``old``'s uploaded function no longer serves (topic, group): its tenant's workers stop (docs §8)."""
    if old is None:
        return
    before = tenant_of(old.topic, old.group, old.spec)
    after = tenant_of(new.topic, new.group, new.spec) if new is not None else None
    if before is not None and before != after:
        workers.drop(before)


@dataclass
class RegisterFilterProcessor:
    """302: checks a function against ``policy``, loads it in its workers and keys it by (topic, group).

    ``policy`` is replaced by the controller before it serves when the workers' sandbox keeps uploads off;
    ``addr`` is this server's advertised ``ip:port`` (known once it listens), which a signed upload names."""

    registry: FilterRegistry
    workers: WorkerPools
    policy: RegistrationPolicy
    addr: Callable[[], str]
    _locks: dict[tuple[str, str], asyncio.Lock] = field(default_factory=dict, init=False, repr=False)

    def register(self, table: ProcessorTable) -> None:
        """Put REGISTER_MESSAGE_FILTER_CLASS into ``table``."""
        table.register(RequestCode.REGISTER_MESSAGE_FILTER_CLASS, self.register_filter)

    # ------------------------------------------------------------------ 302
    async def register_filter(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """302 REGISTER_MESSAGE_FILTER_CLASS."""
        f = cmd.ext_fields
        group = require_str(f, "consumerGroup")
        topic = require_str(f, "topic")
        class_name = require_str(f, "className")
        crc = int_or(f, "classCRC", 0)
        try:
            spec = self.policy.spec_for(group, topic, class_name, crc, cmd.body, f, self.addr())
        except RemotingError as e:
            log.warning("refused filter %r for %s@%s from %s: %s", class_name, topic, group, conn.peer[0], e.remark)
            raise
        lock = self._locks.setdefault((topic, group), asyncio.Lock())
        async with lock:
            reg = self.registry.unchanged(topic, group, spec)
            if reg is not None:
                if not reg.enabled:
                    log.info("filter %s re-enabled by a new registration", reg.label)
                self.registry.reenable(reg)
                return cmd.response(ResponseCode.SUCCESS)
            tenant = tenant_of(topic, group, spec)
            current = self.registry.get(topic, group)
            replacing = tenant_of(topic, group, current.spec) if current is not None else None
            try:
                await self.workers.load(spec, tenant, replacing)
            except TenantsFull as e:
                log.warning("filter %r for %s@%s gets no workers: %s", class_name, topic, group, e)
                return cmd.response(
                    ResponseCode.SYSTEM_BUSY,
                    f"filter function '{class_name}' was not registered: {e}",
                    {REASON_FIELD: Reason.FILTER_WORKERS_FULL},
                )
            except FilterFailure as e:
                log.warning("filter %r for %s@%s cannot be loaded: %s", class_name, topic, group, e.detail)
                return cmd.response(
                    ResponseCode.SYSTEM_ERROR,
                    f"filter function '{class_name}' cannot be loaded: {e.detail}",
                    {REASON_FIELD: Reason.FILTER_LOAD_FAILED},
                )
            reg = self.registry.put(topic, group, spec)
            retire_replaced(self.workers, current, reg)
        log.info("registered filter %s (classCRC %d)", reg.label, crc)
        return cmd.response(ResponseCode.SUCCESS)


@dataclass(frozen=True)
class PullSettings:
    """The pull's configuration values."""

    broker_addr: str
    """The one broker this filter server pulls from (``brokerAddr``)."""
    broker_timeout: float
    """Seconds a request to the broker may take, plus any suspend time (``brokerTimeoutSeconds``)."""
    read_ahead_batches: int
    """Broker batches one pull may read to find ``maxMsgNums`` matches (``readAheadBatches``; 1: off)."""


@dataclass
class FilterPullProcessor:
    """11: pulls from the broker and answers the records the (topic, group)'s function accepts.

    ``broker_conns``: the connections to the broker; ``addr``: this server's advertised ``ip:port``, for remarks."""

    registry: FilterRegistry
    workers: WorkerPools
    broker_conns: ConnectionPool
    settings: PullSettings
    addr: Callable[[], str]

    def register(self, table: ProcessorTable) -> None:
        """Put PULL_MESSAGE into ``table``."""
        table.register(RequestCode.PULL_MESSAGE, self.pull)

    # ------------------------------------------------------------------ 11
    async def pull(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """11 PULL_MESSAGE through the (topic, group)'s filter function."""
        h = PullMessageHeader.parse(cmd.ext_fields)
        group, topic, queue_id, offset, max_nums = h.consumer_group, h.topic, h.queue_id, h.queue_offset, h.max_msg_nums
        suspend_ms = max(0, h.suspend_timeout_millis) if h.suspend else 0

        reg = self.registry.get(topic, group)
        if reg is None:
            raise RemotingError(
                ResponseCode.SYSTEM_ERROR,
                f"Find Filter class failed: no filter function is registered for group {group} on topic {topic} "
                f"at filter server {self.addr()}; register one (302) first",
                Reason.FILTER_NOT_REGISTERED,
            )
        if not reg.enabled:
            raise RemotingError(
                ResponseCode.SYSTEM_ERROR,
                f"filter function {reg.label} is {reg.disabled_reason}",
                Reason.FILTER_DISABLED,
            )

        if h.commits_offset and h.commit_offset >= 0:
            await self._forward_commit(group, topic, queue_id, h.commit_offset)

        resp = await self._broker_pull(topic, queue_id, offset, max_nums, suspend_ms)
        header = {k: resp.ext_fields[k] for k in _PULL_HEADER_KEYS if k in resp.ext_fields}
        header["suggestWhichBrokerId"] = "0"
        if resp.code != ResponseCode.SUCCESS:
            return cmd.response(resp.code, resp.remark, header)
        try:
            spans = split_records(resp.body)
            blob = await self._read_ahead(reg, topic, queue_id, max_nums, resp.body, spans, header)
        except ValueError as e:
            raise RemotingError(
                ResponseCode.SYSTEM_ERROR, f"the broker's pull body is malformed: {e}", Reason.BROKER_UNREACHABLE
            ) from None
        return await self._filter(cmd, reg, blob, spans, header, offset, max_nums)

    async def _read_ahead(
        self,
        reg: Registration,
        topic: str,
        queue_id: int,
        max_nums: int,
        first: bytes,
        spans: list[tuple[int, int]],
        header: dict[str, Any],
    ) -> bytes:
        """Pull more batches at once when the function is selective, so a pull answers up to ``max_nums`` matches
        instead of a trickle (or a 20). Extends ``spans``/``header`` in place; returns the whole body."""
        limit = self.settings.read_ahead_batches
        if limit <= 1 or not spans:
            return first
        s = reg.stats
        selectivity = (s.matched + 1) / (s.seen + 1) if s.seen >= 64 else 1.0
        target = min(max_nums / max(selectivity, 1e-9), limit * len(spans))
        blobs = [first]
        size = len(first)
        while len(spans) < target and len(blobs) < limit:
            next_offset = int(header.get("nextBeginOffset", "0"))
            if next_offset >= int(header.get("maxOffset", "0")):
                break
            try:
                resp = await self._broker_pull(topic, queue_id, next_offset, 32, 0)
            except RemotingError:
                break  # answer with what we have
            if resp.code != ResponseCode.SUCCESS or not resp.body:
                break
            more = split_records(resp.body)
            spans.extend((a + size, b + size) for a, b in more)
            blobs.append(resp.body)
            size += len(resp.body)
            for k in _PULL_HEADER_KEYS[1:]:
                if k in resp.ext_fields:
                    header[k] = resp.ext_fields[k]
        return b"".join(blobs) if len(blobs) > 1 else first

    async def _filter(
        self,
        cmd: RemotingCommand,
        reg: Registration,
        blob: bytes,
        spans: list[tuple[int, int]],
        header: dict[str, Any],
        offset: int,
        max_nums: int,
    ) -> RemotingCommand:
        if not spans:
            return cmd.response(ResponseCode.PULL_RETRY_IMMEDIATELY, "the broker returned no records", header)
        started = time.perf_counter()
        try:
            matched = await self._run(reg, blob, len(spans))
        except TenantsFull as e:
            header["nextBeginOffset"] = str(offset)
            header[REASON_FIELD] = Reason.FILTER_WORKERS_FULL
            return cmd.response(
                ResponseCode.SYSTEM_BUSY,
                f"filter function {reg.label} has no workers now: {e}. The {len(spans)} messages from queue offset "
                f"{offset} were not skipped (retry the same offset)",
                header,
            )
        except FilterFailure as e:
            elapsed = time.perf_counter() - started
            disabled = self.registry.record_failure(reg, e.detail, elapsed)
            if disabled:
                log.warning("filter %s %s", reg.label, reg.disabled_reason)
            else:
                log.warning("filter %s failed on offset %d: %s", reg.label, offset, e.detail)
            state = f"; it is now {reg.disabled_reason}" if disabled else ""
            header["nextBeginOffset"] = str(offset)  # nothing is skipped: the consumer pulls this offset again
            header[REASON_FIELD] = Reason.FILTER_DISABLED if disabled else Reason.FILTER_FAILED
            return cmd.response(
                ResponseCode.SYSTEM_ERROR,
                f"filter function {reg.label} failed: {e.detail}. The {len(spans)} messages from queue offset "
                f"{offset} were not skipped (retry the same offset){state}",
                header,
            )
        seen = len(spans)
        if len(matched) > max_nums:  # read ahead found more than asked for: stop after the max_nums-th match
            matched = matched[:max_nums]
            last = spans[matched[-1]][0]
            header["nextBeginOffset"] = str(_QUEUE_OFFSET.unpack_from(blob, last + 20)[0] + 1)
            seen = matched[-1] + 1
        self.registry.record_batch(reg, seen, len(matched), time.perf_counter() - started)
        if not matched:
            return cmd.response(ResponseCode.PULL_RETRY_IMMEDIATELY, "no message matched the filter function", header)
        body = b"".join(blob[spans[i][0] : spans[i][1]] for i in matched)
        return cmd.response(ResponseCode.SUCCESS, None, header, body)

    async def _run(self, reg: Registration, blob: bytes, count: int) -> list[int]:
        """``reg``'s function over ``blob`` in its workers; should ``reg`` have been replaced meanwhile, workers its
        tenant got for this batch stop."""
        try:
            return await self.workers.run(reg.spec, tenant_of(reg.topic, reg.group, reg.spec), blob, count)
        finally:
            current = self.registry.get(reg.topic, reg.group)
            if current is not reg:
                retire_replaced(self.workers, reg, current)

    async def _broker_pull(
        self, topic: str, queue_id: int, offset: int, max_nums: int, suspend_ms: int
    ) -> RemotingCommand:
        header = PullMessageHeader(
            consumer_group=FILTERSRV_CONSUMER_GROUP,
            topic=topic,
            queue_id=queue_id,
            queue_offset=offset,
            max_msg_nums=max_nums,
            sys_flag=pull_sys_flag(commit_offset=False, suspend=suspend_ms > 0, subscription=True, class_filter=False),
            suspend_timeout_millis=suspend_ms,
            subscription="*",
            expression_type="TAG",
        )
        timeout = self.settings.broker_timeout + suspend_ms / 1000.0
        request = RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_fields())
        try:
            return await self.broker_conns.request(self.settings.broker_addr, request, timeout)
        except Exception as e:
            raise RemotingError(
                ResponseCode.SYSTEM_ERROR,
                f"filter server {self.addr()} cannot pull from its broker {self.settings.broker_addr}: {e}",
                Reason.BROKER_UNREACHABLE,
            ) from None

    async def _forward_commit(self, group: str, topic: str, queue_id: int, commit: int) -> None:
        """The piggybacked commit of the consumer's offset, sent on to the broker under the consumer's group."""
        request = RemotingCommand.request(
            RequestCode.UPDATE_CONSUMER_OFFSET,
            {"consumerGroup": group, "topic": topic, "queueId": queue_id, "commitOffset": commit},
        )
        try:
            await self.broker_conns.send_oneway(self.settings.broker_addr, request)
        except Exception as e:
            log.debug("forwarding commit offset to %s failed: %s", self.settings.broker_addr, e)


@dataclass
class StatusProcessor:
    """30001: the filter server's status, as ``report`` makes it (``FiltersrvController.status``)."""

    report: Callable[[], dict[str, Any]]

    def register(self, table: ProcessorTable) -> None:
        """Put FILTERSRV_STATUS into ``table``."""
        table.register(RequestCode.FILTERSRV_STATUS, self.status)

    async def status(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """30001: status JSON."""
        return cmd.response(ResponseCode.SUCCESS, body=orjson.dumps(self.report()))
