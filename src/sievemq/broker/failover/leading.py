"""A master's duties under automatic failover besides acknowledging: keeping the SyncStateSet true, and handing the
set over when an operator asks (docs/failover.md §3, §5). Deciding is ``ha/election.py``'s; this does it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from sievemq.ha.election import Progress, sync_set_change
from sievemq.ha.etcd_set import EtcdSet, EtcdUnavailable
from sievemq.ha.fencing import LeaseClock
from sievemq.ha.master import HAServer
from sievemq.ha.set_state import SetState, SetView
from sievemq.store import MessageStore

__all__ = ["HANDOVER_S", "LINK_GRACE_S", "hand_over", "keep_sync_set"]

log = logging.getLogger(__name__)

LINK_GRACE_S = 1.0
"""A replica whose replication link closed leaves the SyncStateSet after this long."""
HANDOVER_S = 10.0
"""How long a master waits for a handover's target to hold everything before it gives up (and acknowledges again)."""


async def hand_over(
    etcd: EtcdSet,
    clock: LeaseClock,
    view: SetView,
    st: SetState,
    target: int,
    server: HAServer,
    store: MessageStore,
    name: str,
) -> str | None:
    """An operator asked for broker ``target`` as master (``mqadmin electMaster``) of set ``name``; the caller has
    stopped acknowledging. Wait until the target holds everything this master wrote, and write the next epoch naming
    it: the term's end. None: no handover (the request is cleared), and the master acknowledges again."""
    if target not in view.alive or target not in st.sync_state_set:
        return await _refuse(etcd, target, f"broker {target} is not live and in the SyncStateSet "
                                  f"{sorted(st.sync_state_set)}")  # fmt: skip
    deadline = time.monotonic() + HANDOVER_S
    while time.monotonic() < deadline and clock.valid(time.monotonic()):
        p = server.owners.get(str(target))
        end = store.max_phy_offset
        if p is None or not p.connected or p.acked < end:
            await asyncio.sleep(0.05)
            continue
        epoch = st.master_epoch + 1
        info = view.alive[target]
        new = SetState(target, info.address, info.ha_address, epoch, frozenset({target}), st.sync_state_set_epoch + 1,
                       (*st.epochs, (epoch, end)))  # fmt: skip
        try:
            if not await etcd.hand_over(new, view.revision):
                return await _refuse(etcd, target, "the set's state changed meanwhile")
        except EtcdUnavailable as e:
            return await _refuse(etcd, target, str(e))
        log.warning("handed set %s over to broker %d (epoch %d from %d), as an operator asked", name, target, epoch,
                    end)  # fmt: skip
        return f"handed over to broker {target} (epoch {epoch})"
    return await _refuse(etcd, target, f"broker {target} did not catch up within {HANDOVER_S:g}s (or this "
                              "master's lease was not surely alive)")  # fmt: skip


async def _refuse(etcd: EtcdSet, target: int, why: str) -> str | None:
    """No handover to ``target`` (logged, the request cleared): None, the term goes on."""
    log.error("no handover to broker %d: %s", target, why)
    with contextlib.suppress(EtcdUnavailable):
        await etcd.drop_handover()
    return None


async def keep_sync_set(
    etcd: EtcdSet, view: SetView, st: SetState, server: HAServer, name: str, max_not_catchup_s: float
) -> frozenset[int]:
    """Shrink or grow the SyncStateSet of set ``name`` as the replicas' copies say (the master is ``st.master_id``):
    a grown set is waited for before it is written, a shrunk one only after. The set in force."""
    progress = {int(o): Progress(p.acked, p.caught_up_at, p.connected, p.changed_at)
                for o, p in server.owners.items() if o.isdigit()}  # fmt: skip
    new = sync_set_change(st, view.alive, progress, time.monotonic(), max_not_catchup_s=max_not_catchup_s,
                          link_grace_s=LINK_GRACE_S)  # fmt: skip
    me = st.master_id
    if new is None:
        server.require(_owners(st.sync_state_set - {me}))
        return st.sync_state_set
    server.require(_owners((st.sync_state_set | new) - {me}))
    if await etcd.alter(st.with_set(new), view.revision):
        log.warning("SyncStateSet of %s: %s -> %s", name, sorted(st.sync_state_set), sorted(new))
        server.require(_owners(new - {me}))
        return new
    server.require(_owners(st.sync_state_set - {me}))
    return st.sync_state_set


def _owners(ids: frozenset[int]) -> frozenset[str]:
    return frozenset(str(i) for i in ids)
