"""Functions that loop, hog memory or raise are stopped within their limits; nothing is lost; others keep going."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import orjson

from sievemq.cli.filtersrv import fetch_status
from sievemq.protocol.reasons import Reason
from sievemq.remoting.codes import ResponseCode
from sievemq.remoting.connection import Connection
from tests.filtersrv.conftest import FilterCluster, open_conn
from tests.filtersrv.helpers import class_pull, drain, is_big_eu, register, send_orders, until

TOPIC = "Risky"
LIMIT = 1.0


async def test_bad_functions_are_contained(fc: FilterCluster, conns: list[Connection]) -> None:
    ns = fc.namesrv()
    broker = fc.broker(ns.addr)
    fs = fc.filtersrv(broker, "--batch-timeout-seconds", str(LIMIT), "--worker-count", "2")
    bconn = await open_conn(conns, broker)
    fconn = await open_conn(conns, fs)
    await send_orders(bconn, TOPIC, range(40), queues=1)
    expected = [i for i in range(40) if is_big_eu(i)]
    for group, fn in (
        ("good", "big_eu_orders"),
        ("looper", "loop_forever"),
        ("hog", "hog_memory"),
        ("raiser", "raises"),
    ):
        resp = await register(fconn, group, TOPIC, f"shop.filters:{fn}")
        assert resp.code == ResponseCode.SUCCESS, (group, resp.remark)
    pids_before = set((await fetch_status(fs.addr))["workers"]["pids"])

    # A function that loops forever: stopped at the batch time limit; meanwhile another group is served.
    started = time.monotonic()
    looping = asyncio.create_task(class_pull(fconn, "looper", TOPIC, 0, 0))
    await asyncio.sleep(0.1)
    good, _ = await drain(fconn, "good", TOPIC, 0)
    assert not looping.done(), "the good group waited for the looping one"
    assert [orjson.loads(m.body)["id"] for m in good] == expected
    p = await looping
    elapsed = time.monotonic() - started
    assert (p.code, p.reason) == (ResponseCode.SYSTEM_ERROR, Reason.FILTER_FAILED), p
    assert p.next_begin_offset == 0, "nothing is skipped: the same offset again"
    # the remark names the function and the limit that stopped it (for people; no reason tells them apart)
    assert "shop.filters:loop_forever" in (p.remark or "") and f"{LIMIT:g} s time limit" in (p.remark or "")
    assert LIMIT <= elapsed < LIMIT + 2.0

    # A function that allocates without bound: stopped by the worker's memory limit (RLIMIT_AS).
    p = await class_pull(fconn, "hog", TOPIC, 0, 0)
    assert (p.code, p.reason, p.next_begin_offset) == (ResponseCode.SYSTEM_ERROR, Reason.FILTER_FAILED, 0), p
    assert "shop.filters:hog_memory" in (p.remark or "") and "memory limit" in (p.remark or ""), p.remark

    # A function that raises: an error naming it and the exception; after 3 in a row it is disabled.
    for attempt in (1, 2, 3):
        p = await class_pull(fconn, "raiser", TOPIC, 0, 0)
        # the third failure in a row disables the function: that answer says so in its reason
        assert (p.code, p.reason) == (ResponseCode.SYSTEM_ERROR, Reason.FILTER_DISABLED if attempt == 3
                                      else Reason.FILTER_FAILED), (attempt, p)  # fmt: skip
        assert p.next_begin_offset == 0
        assert "KeyError: 'region'" in (p.remark or ""), p.remark  # the remark names the exception
    t0 = time.monotonic()
    p = await class_pull(fconn, "raiser", TOPIC, 0, 0)
    assert (p.code, p.reason) == (ResponseCode.SYSTEM_ERROR, Reason.FILTER_DISABLED), p
    assert time.monotonic() - t0 < 0.5

    # The filter server still serves, on fresh workers (the looping and hogging ones were replaced).
    async def two_fresh_workers() -> dict[str, Any] | None:
        workers: dict[str, Any] = (await fetch_status(fs.addr))["workers"]
        return workers if len(workers["pids"]) == 2 else None

    workers = await until(two_fresh_workers, what="two workers again")
    assert workers is not None
    assert workers["replaced"].get("timeout") == 1 and workers["replaced"].get("memory") == 1
    assert len(pids_before & set(workers["pids"])) == 0
    again, _ = await drain(fconn, "good", TOPIC, 0)
    assert len(again) == len(expected)

    # Registering the same function again re-enables it (and it fails again, honestly).
    assert (await register(fconn, "raiser", TOPIC, "shop.filters:raises")).code == ResponseCode.SUCCESS
    p = await class_pull(fconn, "raiser", TOPIC, 0, 0)
    assert (p.code, p.reason) == (ResponseCode.SYSTEM_ERROR, Reason.FILTER_FAILED), p

    # Nothing was lost: after registering a good function, the same messages are delivered from offset 0.
    for group in ("looper", "hog", "raiser"):
        assert (await register(fconn, group, TOPIC, "shop.filters:big_eu_orders")).code == ResponseCode.SUCCESS
        msgs, end = await drain(fconn, group, TOPIC, 0)
        assert [orjson.loads(m.body)["id"] for m in msgs] == expected and end == 40

    counts = {f["consumerGroup"]: f for f in (await fetch_status(fs.addr))["functions"]}
    assert counts["good"]["seen"] == 80 and counts["good"]["matched"] == 2 * len(expected)
    assert counts["good"]["filteredOut"] == 80 - 2 * len(expected) and counts["good"]["errors"] == 0
    assert counts["raiser"]["errors"] == 0 and counts["raiser"]["matched"] == len(expected)  # the new function
