"""Worker pools by tenant: named functions share one pool; each uploaded function has a pool of its own.

Named functions (the operator's ``filterModules``) run in the shared pool of ``workerCount`` workers. An uploaded
function runs only in the pool of its tenant (``tenants.TenantKey``: upload account, group, topic, content id),
started when the tenant first needs it (its registration, or a pull after its workers stopped) and stopped when its
registration is replaced, when its load fails, or after ``uploadIdleSeconds`` without a batch. A tenant's workers
(and their replacements) never serve anyone else, so one tenant's code never shares an interpreter with another's.
``tenants.TenantBook`` decides who may hold workers; a new tenant past ``maxUploadWorkers`` is refused with
``TenantsFull``. See docs/protocol/filter-server.md §8.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from sievemq.filtersrv.layers import LayerReport
from sievemq.filtersrv.registry import FunctionSpec
from sievemq.filtersrv.tenants import TenantBook, TenantKey, TenantLimits
from sievemq.filtersrv.workers import FilterFailure, PoolSettings, WorkerPool
from sievemq.util.tasks import Background, spawn

log = logging.getLogger(__name__)
T = TypeVar("T")


class TenantsFull(Exception):
    """No room for another uploaded function's workers (``maxUploadWorkers``); the text says so."""


class WorkerPools:
    """The shared pool for named functions and one ``WorkerPool`` per upload tenant."""

    def __init__(
        self, settings: PoolSettings, limits: TenantLimits, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.settings = settings
        self.limits = limits
        self.shared = WorkerPool(dataclasses.replace(settings, tenant=""))
        self.book = TenantBook(limits)
        self._clock = clock
        self._pools: dict[TenantKey, WorkerPool] = {}
        self._starting: dict[TenantKey, asyncio.Future[WorkerPool]] = {}
        self._stopping: set[asyncio.Task[None]] = set()
        """Retired tenants' pools being stopped (``stop`` waits for them)."""
        self._reaper = Background("filtersrv-idle-tenants")
        self._closing = False
        self._past: dict[str, int] = {}
        """Replacements in tenant pools that have stopped (the totals never shrink)."""
        self._past_spawned = 0
        self.refused = 0
        """New tenants refused for want of room."""
        self.retired: dict[str, int] = {}
        """Tenant pools stopped, by reason (``idle``, ``replaced``, ``failed``)."""

    @property
    def sandbox(self) -> LayerReport | None:
        """The sandbox layers every worker has (the shared pool's, which every tenant's workers must match)."""
        return self.shared.sandbox

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Start the shared pool (its workers fix the sandbox baseline) and the idle-tenant reaper."""
        await self.shared.start()
        self._reaper.start(self._reap_idle_loop())

    async def stop(self) -> None:
        """Stop every pool."""
        self._closing = True
        await self._reaper.stop()
        starting = list(self._starting.values())
        for fut in starting:
            fut.cancel()
        await asyncio.gather(*starting, return_exceptions=True)
        pools = list(self._pools.values())
        self._pools.clear()
        await asyncio.gather(*(p.stop() for p in pools), *list(self._stopping), return_exceptions=True)
        await self.shared.stop()

    # ------------------------------------------------------------------ requests
    async def load(self, spec: FunctionSpec, tenant: TenantKey | None, replacing: TenantKey | None = None) -> None:
        """Load ``spec`` in its pool (FilterFailure as ``WorkerPool.load``; TenantsFull when a new tenant gets no
        room, unless the tenant it is ``replacing`` for its (topic, group) gives up its workers first). A tenant whose
        load fails is retired: no registration holds it."""
        if tenant is None:
            self._check(spec, tenant)
            await self.shared.load(spec)
            return
        try:
            await self._in_tenant(spec, tenant, lambda pool: pool.load(spec), replacing)
        except FilterFailure:
            self.drop(tenant, "failed")
            raise

    async def run(self, spec: FunctionSpec, tenant: TenantKey | None, blob: bytes, count: int) -> list[int]:
        """Indexes of the ``count`` records in ``blob`` that ``spec`` accepts, run in its own pool."""
        if tenant is None:
            self._check(spec, tenant)
            return await self.shared.run(spec, blob, count)
        return await self._in_tenant(spec, tenant, lambda pool: pool.run(spec, blob, count))

    def drop(self, tenant: TenantKey, reason: str = "replaced") -> None:
        """``tenant`` is no longer registered: stop its workers (once its batch in progress, if any, ends)."""
        if self.book.retire(tenant, reason):
            self._stop_tenant(tenant, reason)

    @staticmethod
    def _check(spec: FunctionSpec, tenant: TenantKey | None) -> None:
        """An uploaded function only with its tenant, a named one only without: never the wrong pool."""
        if (spec.kind == "source") != (tenant is not None) or (tenant is not None and tenant.fid != spec.fid):
            raise ValueError(f"function {spec.fid} ({spec.kind}) sent to the pool of {tenant}")

    async def _in_tenant(
        self,
        spec: FunctionSpec,
        tenant: TenantKey,
        work: Callable[[WorkerPool], Awaitable[T]],
        replacing: TenantKey | None = None,
    ) -> T:
        """``work`` on ``tenant``'s pool, started first when it has none; TenantsFull when a new tenant gets no room
        (``replacing``, the tenant it is to replace, is retired first to make room; it restarts at its next pull
        should the replacement fail)."""
        self._check(spec, tenant)
        if self._closing:
            raise FilterFailure("closing", "the filter server is stopping")
        self._reap_idle()
        refusal = self.book.enter(tenant, self._clock())
        if refusal is not None and replacing is not None and replacing != tenant and replacing in self.book:
            self.drop(replacing)
            refusal = self.book.enter(tenant, self._clock())
        if refusal is not None:
            self.refused += 1
            raise TenantsFull(refusal)
        try:
            pool = self._pools.get(tenant)
            if pool is None:
                pool = await asyncio.shield(self._start_of(tenant))
            return await work(pool)
        finally:
            reason = self.book.leave(tenant, self._clock())
            if reason is not None:
                self._stop_tenant(tenant, reason)

    def _start_of(self, tenant: TenantKey) -> asyncio.Future[WorkerPool]:
        """The start of ``tenant``'s pool, shared by everyone waiting for it."""
        fut = self._starting.get(tenant)
        if fut is None:
            fut = asyncio.ensure_future(self._start_pool(tenant))
            self._starting[tenant] = fut
            fut.add_done_callback(lambda f: self._starting.pop(tenant, None) if self._starting.get(tenant) is f
                                  else None)  # fmt: skip
            fut.add_done_callback(lambda f: f.cancelled() or f.exception())
        return fut

    async def _start_pool(self, tenant: TenantKey) -> WorkerPool:
        settings = dataclasses.replace(self.settings, size=self.limits.workers_per_tenant, tenant=tenant.fid)
        pool = WorkerPool(settings, baseline=self.shared.sandbox)
        try:
            await pool.start()
        except Exception as e:
            self.book.retire(tenant, "failed")  # its slot is freed when the last waiter leaves
            log.error("cannot start the workers of %s: %s", tenant.label, e)
            raise FilterFailure("spawn", f"the workers of this uploaded function could not start ({e})") from None
        if self._closing or tenant not in self.book:  # stopping, or retired while its workers started
            await pool.stop()
            raise FilterFailure("closing", "the uploaded function's workers were stopped as they started")
        self._pools[tenant] = pool
        log.info("started %d worker(s) for %s (pids %s)", len(pool.pids()), tenant.label, pool.pids())
        return pool

    # ------------------------------------------------------------------ retiring
    def _stop_tenant(self, tenant: TenantKey, reason: str) -> None:
        """Kill ``tenant``'s workers (its slot is already free) in the background."""
        self.retired[reason] = self.retired.get(reason, 0) + 1
        pool = self._pools.pop(tenant, None)
        if pool is None:
            return
        log.info("stopping the workers of %s (%s)", tenant.label, reason)
        for why, n in pool.replaced.items():
            self._past[why] = self._past.get(why, 0) + n
        self._past_spawned += pool.spawned
        spawn(pool.stop(), self._stopping, "filtersrv-stop-tenant")

    def _reap_idle(self) -> None:
        for tenant in self.book.idle(self._clock()):
            self._stop_tenant(tenant, "idle")

    async def _reap_idle_loop(self) -> None:
        every = min(max(self.limits.idle_seconds / 4, 0.05), 5.0)
        while True:
            await asyncio.sleep(every)
            with contextlib.suppress(Exception):
                self._reap_idle()

    # ------------------------------------------------------------------ status
    @property
    def replaced(self) -> dict[str, int]:
        """Workers killed and replaced, by reason, over every pool that ever ran."""
        total = dict(self.shared.replaced)
        for counts in (self._past, *(p.replaced for p in self._pools.values())):
            for why, n in counts.items():
                total[why] = total.get(why, 0) + n
        return total

    def pids(self) -> list[int]:
        """Process ids of the shared pool's live workers (named functions)."""
        return self.shared.pids()

    def upload_pids(self) -> list[int]:
        """Process ids of every tenant's live workers."""
        return sorted(pid for p in self._pools.values() for pid in p.pids())

    def tenants(self) -> list[dict[str, Any]]:
        """Each tenant holding workers: who it is, its workers' pids, batches in progress, seconds idle."""
        now = self._clock()
        out = []
        for tenant, st in self.book.items():
            pool = self._pools.get(tenant)
            out.append({
                **tenant.to_json(),
                "state": "running" if pool is not None else "starting",
                "pids": pool.pids() if pool is not None else [],
                "busy": st.busy,
                "idleSeconds": round(max(0.0, now - st.last_used), 3),
                "replaced": dict(pool.replaced) if pool is not None else {},
            })  # fmt: skip
        return out

    def status(self) -> dict[str, Any]:
        """The shared pool's status, replacements over all pools, and the upload tenants with their workers."""
        st = self.shared.status()
        st["replaced"] = self.replaced
        st["spawned"] = self.shared.spawned + self._past_spawned + sum(p.spawned for p in self._pools.values())
        lim = self.limits
        st["uploads"] = {
            "workersPerTenant": lim.workers_per_tenant,
            "maxWorkers": lim.max_workers,
            "idleSeconds": lim.idle_seconds,
            "workers": len(self.upload_pids()),
            "refused": self.refused,
            "retired": dict(self.retired),
            "tenants": self.tenants(),
        }
        return st
