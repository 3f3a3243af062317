"""``EtcdSet`` (a broker's connection to its set's keys) against a real etcd: whatever goes wrong with etcd, and
however many tasks use the connection at once, a call fails with ``EtcdUnavailable`` only (the failover loop's one
error to handle) and the next call reconnects."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from sievemq.ha.election import bootstrap
from sievemq.ha.etcd_set import EtcdSet, EtcdUnavailable
from sievemq.ha.fencing import LeaseClock
from sievemq.ha.set_state import ReplicaInfo
from tests.support.etcd_cluster import etcd_cluster


async def test_a_stalled_etcd_fails_concurrent_calls_with_etcd_unavailable_only(tmp_path: Path) -> None:
    with etcd_cluster(tmp_path, 1) as etcd:
        s = EtcdSet(etcd.endpoints, "/t/c/b/", 1, LeaseClock(5.0, 1.0), op_timeout=1.0)
        try:
            assert await s.keep_alive() is False  # granted
            me = ReplicaInfo(1, "10.0.0.1:10911", "10.0.0.1:10912", 0, 0)
            await s.publish(me)
            assert await s.bootstrap(bootstrap(me))
            assert (await s.view()).state is not None
            etcd.pause(0)
            try:
                results = await asyncio.gather(s.keep_alive(), s.view(), s.view(), s.publish(me),
                                               return_exceptions=True)  # fmt: skip
            finally:
                etcd.resume(0)
            assert results and all(isinstance(r, EtcdUnavailable) for r in results), results
            view = None
            for _ in range(50):  # the member serves again within its own recovery
                try:
                    view = await s.view()
                    break
                except EtcdUnavailable:
                    await asyncio.sleep(0.2)
            assert view is not None and view.state is not None and view.state.master_id == 1
        finally:
            await s.close(revoke=True)


async def test_no_endpoint_answering_is_etcd_unavailable(tmp_path: Path) -> None:
    s = EtcdSet(["127.0.0.1:1"], "/t/c/b/", 1, LeaseClock(5.0, 1.0), op_timeout=1.0)
    with pytest.raises(EtcdUnavailable, match=r"127\.0\.0\.1:1"):
        await s.keep_alive()
    with pytest.raises(EtcdUnavailable):
        await s.view()
    await s.close(revoke=False)


async def test_a_call_whose_channel_another_task_closed_is_etcd_unavailable(tmp_path: Path) -> None:
    """A call in flight when another task's failed call closes the shared channel (what a failing lease renewal did
    beside the master's read of its set, ending the failover loop) fails as ``EtcdUnavailable`` too."""
    with etcd_cluster(tmp_path, 1) as etcd:
        s = EtcdSet(etcd.endpoints, "/t/c/b/", 1, LeaseClock(5.0, 1.0), op_timeout=3.0)
        try:
            await s.view()
            etcd.pause(0)
            try:
                reading = asyncio.create_task(s.view())
                await asyncio.sleep(0.3)  # the read is waiting for the stalled member
                await s._drop_client()  # as the other task's failed call does
                with pytest.raises(EtcdUnavailable):
                    await reading
            finally:
                etcd.resume(0)
        finally:
            await s.close(revoke=False)
