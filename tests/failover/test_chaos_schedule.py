"""A randomised schedule of faults under a running workload, judged by the checker: a short one in every run, a
long one with ``-m soak`` (``SIEVEMQ_SOAK_MINUTES``, 30 by default). ``SIEVEMQ_CHAOS_SEED`` replays a schedule; the
seed is printed and in the failure message."""

from __future__ import annotations

import os
import random
import time

import pytest

from tests.support.chaos import History, Verdict
from tests.support.failover_faults import FAULTS, NEEDS_HOSTS, run_fault
from tests.support.failover_sets import FailoverSet
from tests.support.failover_workload import GROUP, TOPIC, Workload, acks, finish, three


async def _schedule(fset: FailoverSet, *, rounds: int, minutes: float, role: str = "SYNC_MASTER") -> Verdict:
    seed = int(os.environ.get("SIEVEMQ_CHAOS_SEED") or random.randrange(1 << 30))
    rng = random.Random(seed)
    names = [n for n in FAULTS if fset.namespaces or n not in NEEDS_HOSTS]
    await three(fset, "--broker-role", role)
    h = History()
    w = Workload(fset.namesrv, TOPIC, GROUP, h)
    done: list[str] = []
    await w.start()
    deadline = time.monotonic() + minutes * 60
    try:
        await acks(w, 0, 50, "acknowledged sends")
        while len(done) < rounds or time.monotonic() < deadline:
            name = rng.choice(names)
            print(f"seed {seed}: fault {len(done) + 1}: {name}", flush=True)
            await run_fault(name, fset, h, w, rng)
            done.append(name)
            await acks(w, time.monotonic(), 30, f"sends acknowledged after {name}")
        verdict = await finish(fset, w, h, sync=role == "SYNC_MASTER")
    except BaseException as e:
        e.add_note(f"chaos seed {seed}, faults so far: {done}")
        raise
    finally:
        await w.close()
    print(f"seed {seed}: {len(done)} faults: {done}")
    assert verdict.ok, f"seed {seed}, faults {done}\n{verdict.summary()}"
    return verdict


async def test_a_short_random_schedule_of_faults(fset: FailoverSet) -> None:
    await _schedule(fset, rounds=int(os.environ.get("SIEVEMQ_CHAOS_ROUNDS", "4")), minutes=0)


async def test_an_async_master_loses_only_what_a_failover_explains(fset: FailoverSet) -> None:
    """ASYNC_MASTER acknowledges before its replicas have a message: a failover may lose the newest ones. The
    checker counts them and fails any loss no fault explains."""
    verdict = await _schedule(fset, rounds=2, minutes=0, role="ASYNC_MASTER")
    print(f"lost under ASYNC_MASTER: {len(verdict.lost_keys)} of {verdict.acked} acknowledged")


@pytest.mark.soak
@pytest.mark.timeout(0)
async def test_a_long_random_schedule_of_faults(fset: FailoverSet) -> None:
    await _schedule(fset, rounds=1, minutes=float(os.environ.get("SIEVEMQ_SOAK_MINUTES", "30")))
