"""A consumer with a named function (operator's module) receives exactly the matching messages."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time

import orjson

from sievemq.client import api
from sievemq.protocol.reasons import REASON_FIELD, Reason
from sievemq.remoting.codes import ResponseCode
from sievemq.remoting.connection import Connection
from tests.filtersrv.conftest import FilterCluster, open_conn
from tests.filtersrv.helpers import class_pull, drain, is_big_eu, order, register, send_orders, until
from tests.integration.helpers import create_group
from tests.support import wire
from tests.support.quiet import quiet_period

TOPIC = "Orders"
GROUP = "eu-big"


async def test_named_function_delivers_exactly_the_matches(fc: FilterCluster, conns: list[Connection]) -> None:
    ns = fc.namesrv()
    broker = fc.broker(ns.addr)
    fs = fc.filtersrv(broker)
    bconn = await open_conn(conns, broker)
    fconn = await open_conn(conns, fs)
    await send_orders(bconn, TOPIC, range(120))

    resp = await register(fconn, GROUP, TOPIC, "shop.filters:big_eu_orders")
    assert resp.code == ResponseCode.SUCCESS, resp.remark

    got: list[int] = []
    for qid in (0, 1):
        msgs, end = await drain(fconn, GROUP, TOPIC, qid)
        assert end == 60
        for m in msgs:
            assert m.queue_id == qid and m.topic == TOPIC
            assert m.keys == [f"order-{orjson.loads(m.body)['id']}"]
            got.append(orjson.loads(m.body)["id"])
    assert sorted(got) == [i for i in range(120) if is_big_eu(i)]

    # The records are the broker's own bytes: the same as a direct pull of those offsets.
    direct = [await api.pull_message(bconn, "direct", TOPIC, 0, o, max_nums=32) for o in (0, 32)]
    through = await class_pull(fconn, GROUP, TOPIC, 0, 0)
    by_offset = {m.queue_offset: m for d in direct for m in d.messages}
    assert len(by_offset) == 60 and len(through.messages) == 6
    for m in through.messages:
        assert m == by_offset[m.queue_offset]

    # Nothing matched: 20 with the advanced offset (offsets 58, 59 of queue 1 are orders 117, 119: no).
    p = await class_pull(fconn, GROUP, TOPIC, 1, 58)
    assert p.code == ResponseCode.PULL_RETRY_IMMEDIATELY and p.next_begin_offset == 60 and p.max_offset == 60
    # The function is selective (10%), so a pull reads ahead for maxMsgNums matches and stops right after the last
    # one it answers (queue 1 holds orders 1, 3, 5...; the matches 15, 35, 55 sit at offsets 7, 17, 27).
    p = await class_pull(fconn, GROUP, TOPIC, 1, 0, max_nums=2)
    assert p.code == ResponseCode.SUCCESS and [m.queue_offset for m in p.messages] == [7, 17]
    assert p.next_begin_offset == 18
    # At the end: 19; past it: 21 (passed through from the broker).
    assert (await class_pull(fconn, GROUP, TOPIC, 0, 60)).code == ResponseCode.PULL_NOT_FOUND
    moved = await class_pull(fconn, GROUP, TOPIC, 0, 75)
    assert moved.code == ResponseCode.PULL_OFFSET_MOVED and moved.next_begin_offset == 60

    # Long polling: a held class-filter pull wakes on a new matching message.
    started = time.monotonic()
    held = asyncio.create_task(class_pull(fconn, GROUP, TOPIC, 0, 60, suspend_ms=5000))
    await quiet_period(0.5, "the held pull answered before a matching message came", unchanged=held.done)
    assert not held.done()
    await wire.send_message(bconn, TOPIC, order(130), queue_id=0)  # 130: eu, amount 160
    p = await asyncio.wait_for(held, 10)
    assert p.code == ResponseCode.SUCCESS and [orjson.loads(m.body)["id"] for m in p.messages] == [130]
    assert time.monotonic() - started < 4.5

    # The consumer's piggybacked commit offset reaches the broker under the consumer's own group (which its
    # heartbeat made there: the broker takes commits of the groups it has).
    await create_group(bconn, GROUP)
    await class_pull(fconn, GROUP, TOPIC, 1, 60, commit_offset=42)
    assert await until(lambda: _committed(bconn), what="the forwarded commit offset") == 42

    # A group without a registration is told so.
    p = await class_pull(fconn, "nobody", TOPIC, 0, 0)
    assert (p.code, p.reason) == (ResponseCode.SYSTEM_ERROR, Reason.FILTER_NOT_REGISTERED), p

    # Counts, over the private status request and the CLI.
    out = subprocess.run(
        [sys.executable, "-m", "sievemq.cli", "filtersrv", "status", "--addr", fs.addr, "--json"],
        capture_output=True, text=True, timeout=20, check=True,
    )  # fmt: skip
    st = orjson.loads(out.stdout)
    (fn,) = st["functions"]
    assert fn["className"] == "shop.filters:big_eu_orders" and fn["consumerGroup"] == GROUP
    assert fn["matched"] == len(got) + 1 + len(through.messages) + 2
    assert fn["seen"] == fn["matched"] + fn["filteredOut"] and fn["errors"] == 0 and fn["timeSpentMs"] > 0
    table = subprocess.run(
        [sys.executable, "-m", "sievemq.cli", "filtersrv", "status", "--addr", fs.addr],
        capture_output=True, text=True, timeout=20, check=True,
    ).stdout  # fmt: skip
    assert "shop.filters:big_eu_orders (named)" in table and "enabled" in table


async def _committed(conn: Connection) -> int | None:
    offset = await api.query_offset(conn, GROUP, TOPIC, 1)
    return offset if offset == 42 else None


async def test_named_function_policy(fc: FilterCluster, conns: list[Connection]) -> None:
    ns = fc.namesrv()
    broker = fc.broker(ns.addr)
    fs = fc.filtersrv(broker)
    fconn = await open_conn(conns, fs)
    # each refusal has its code and reason; its remark names what to change (the setting, the form, the name)
    cases = {
        "os:system": (ResponseCode.NO_PERMISSION, Reason.FILTER_NOT_ALLOWED, "filterModules"),
        "shop.filters:_private": (ResponseCode.SYSTEM_ERROR, Reason.FILTER_INVALID, "module:function"),
        "shop.filters": (ResponseCode.SYSTEM_ERROR, Reason.FILTER_INVALID, "module:function"),
        "shop.filters:missing": (ResponseCode.SYSTEM_ERROR, Reason.FILTER_LOAD_FAILED, "'missing'"),
        "shop.filters.nope:f": (ResponseCode.SYSTEM_ERROR, Reason.FILTER_LOAD_FAILED, "'shop.filters.nope'"),
    }
    for name, (code, reason, named) in cases.items():
        resp = await register(fconn, "g", TOPIC, name)
        assert (resp.code, resp.ext_fields.get(REASON_FIELD)) == (code, reason), (name, resp.code, resp.ext_fields)
        assert named in (resp.remark or ""), (name, resp.remark)
    resp = await register(fconn, "g", TOPIC, "shop.filters:shows_everything")
    assert resp.code == ResponseCode.SUCCESS, resp.remark
