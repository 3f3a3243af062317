"""Which workers an uploaded filter function may run in: its own tenant's, never another's.

An uploaded function's *tenant* is its registration's (upload account, consumer group, topic, content id). Its code
runs only in worker processes started for that tenant; they are never handed to another tenant, nor to a named
function (the operator's modules share one pool of their own). This module decides, without I/O, which tenants may
have workers: at most ``max_workers`` upload workers over all tenants (``workers_per_tenant`` each, so
``max_tenants`` tenants), a tenant without a batch for ``idle_seconds`` gives its workers back (they start again at
its next pull), and a tenant whose registration went away is retired once its last batch ends. ``pools.WorkerPools``
does what it decides. See docs/protocol/filter-server.md §8 (workers and tenants).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sievemq.filtersrv.registry import FunctionSpec


@dataclass(frozen=True, slots=True)
class TenantKey:
    """Whose code a worker runs: one uploaded function of one account for one (group, topic)."""

    account: str
    group: str
    topic: str
    fid: str
    """The function's content id (``FunctionSpec.fid``): a changed source is another tenant."""
    name: str = ""
    """The function's name (for people; the content id already tells functions apart)."""

    @property
    def label(self) -> str:
        """How remarks and logs name the tenant."""
        return f"'{self.name}' uploaded by {self.account} for group {self.group} on topic {self.topic}"

    def to_json(self) -> dict[str, Any]:
        """The tenant as the status shows it."""
        return {"account": self.account, "consumerGroup": self.group, "topic": self.topic, "className": self.name,
                "fid": self.fid}  # fmt: skip


def tenant_of(topic: str, group: str, spec: FunctionSpec) -> TenantKey | None:
    """The tenant of ``spec`` registered for (topic, group); None for a named function (the shared pool)."""
    if spec.kind != "source":
        return None
    return TenantKey(spec.account, group, topic, spec.fid, spec.name)


@dataclass(frozen=True)
class TenantLimits:
    """The settings that bound upload workers (``uploadWorkerCount``, ``maxUploadWorkers``, ``uploadIdleSeconds``)."""

    workers_per_tenant: int = 1
    max_workers: int = 8
    idle_seconds: float = 300.0

    @property
    def max_tenants(self) -> int:
        """Tenants that may have workers at once."""
        return max(0, self.max_workers // max(1, self.workers_per_tenant))


@dataclass
class TenantState:
    """What the book knows of one tenant with workers (or being given them)."""

    since: float
    last_used: float
    busy: int = 0
    """Loads and batches in progress."""
    retiring: str = ""
    """Why it is to be retired when its last batch ends (its registration went away while one ran)."""


class TenantBook:
    """The tenants that hold worker slots; every decision takes ``now`` (monotonic seconds) from the caller."""

    def __init__(self, limits: TenantLimits) -> None:
        self.limits = limits
        self._tenants: dict[TenantKey, TenantState] = {}

    def __len__(self) -> int:
        return len(self._tenants)

    def __contains__(self, key: object) -> bool:
        return key in self._tenants

    def state(self, key: TenantKey) -> TenantState | None:
        """The state of ``key``, if it holds a slot."""
        return self._tenants.get(key)

    def items(self) -> list[tuple[TenantKey, TenantState]]:
        """Every tenant holding a slot, oldest first."""
        return list(self._tenants.items())

    def refusal(self) -> str:
        """Why a new tenant gets no workers now (the remark of the refusal)."""
        lim = self.limits
        return (
            f"the filter server already runs the workers of {len(self._tenants)} uploaded functions, as many as "
            f"maxUploadWorkers {lim.max_workers} allows ({lim.workers_per_tenant} each); retry later (a function's "
            f"workers stop after uploadIdleSeconds {lim.idle_seconds:g} s without a batch) or ask the operator to "
            "raise maxUploadWorkers"
        )

    def enter(self, key: TenantKey, now: float) -> str | None:
        """A load or batch of ``key`` begins: None when it may run (a new tenant takes a slot), else the refusal."""
        st = self._tenants.get(key)
        if st is None:
            if len(self._tenants) >= self.limits.max_tenants:
                return self.refusal()
            st = self._tenants[key] = TenantState(now, now)
        st.busy += 1
        st.retiring = ""
        st.last_used = now
        return None

    def leave(self, key: TenantKey, now: float) -> str | None:
        """A load or batch of ``key`` ended; the reason when the tenant must be retired now (its slot is freed)."""
        st = self._tenants.get(key)
        if st is None:
            return None
        st.busy = max(0, st.busy - 1)
        st.last_used = now
        if st.retiring and st.busy == 0:
            del self._tenants[key]
            return st.retiring
        return None

    def retire(self, key: TenantKey, reason: str) -> bool:
        """``key`` is no longer wanted (``reason``: registration replaced, load failed): True when it must be retired
        now; while a batch runs it is retired when that ends (``leave``)."""
        st = self._tenants.get(key)
        if st is None:
            return False
        if st.busy:
            st.retiring = reason
            return False
        del self._tenants[key]
        return True

    def idle(self, now: float) -> list[TenantKey]:
        """Tenants without a batch for ``idle_seconds``: their slots are freed, their workers must stop."""
        limit = self.limits.idle_seconds
        gone = [k for k, st in self._tenants.items() if st.busy == 0 and now - st.last_used >= limit]
        for k in gone:
            del self._tenants[k]
        return gone
