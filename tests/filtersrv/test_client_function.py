"""sievemq's PushConsumer with filter functions: registration with the route's filter servers, pulls through them,
failover between them, and uploads (real name server, broker and filter server processes)."""

from __future__ import annotations

import itertools
import logging
import subprocess
import sys
from typing import Any

import orjson
import pytest

from sievemq import (
    ConsumeResult,
    MessageExt,
    MessageValidationError,
    PullConsumer,
    PushConsumer,
    Selector,
    SubscriptionError,
)
from sievemq.cli.filtersrv import fetch_status
from sievemq.client import api
from sievemq.client.subscription import SubscriptionEntry
from sievemq.protocol.reasons import Reason
from sievemq.protocol.upload_signing import (
    ACCESS_KEY_FIELD,
    NONCE_FIELD,
    SIGNATURE_FIELD,
    TIMESTAMP_FIELD,
    Upload,
    filter_class_crc,
    verify_upload,
)
from sievemq.remoting.codes import ResponseCode
from sievemq.remoting.connection import Connection
from tests.filtersrv.conftest import ACCOUNT, SECRET, FilterCluster, open_conn
from tests.filtersrv.helpers import BIG_EU_SOURCE as SOURCE
from tests.filtersrv.helpers import is_big_eu, send_orders, until
from tests.support import wire
from tests.support.quiet import quiet_period

NAMED = "shop.filters:big_eu_orders"
_instances = itertools.count(1)


class Received:
    """A push listener recording the order ids it got."""

    def __init__(self) -> None:
        self.ids: list[int] = []

    async def __call__(self, msgs: list[MessageExt]) -> ConsumeResult:
        self.ids.extend(orjson.loads(m.body)["id"] for m in msgs)
        return ConsumeResult.SUCCESS

    async def has_all(self, ids: range) -> bool:
        """Every matching order of ``ids`` arrived (at least once)."""
        return {i for i in ids if is_big_eu(i)} <= set(self.ids)


def consumer(namesrv: str, group: str, topic: str, selector: Selector, **kw: Any) -> tuple[PushConsumer, Received]:
    """A started-from-the-first-offset consumer of ``topic`` with ``selector`` and a ``Received`` listener."""
    c = PushConsumer(namesrv, group, consume_from="first", instance_name=f"fn-{next(_instances)}", **kw)
    c.subscribe(topic, selector)
    got = Received()
    c.listener(got)
    return c, got


async def route_servers(ns_conn: Connection, topic: str) -> list[str]:
    """Every filter server in ``topic``'s route."""
    try:
        route = await wire.get_route(ns_conn, topic)
    except Exception:
        return []
    return sorted(s for servers in route.filter_server_table.values() for s in servers)


# ---------------------------------------------------------------------------------------------- pure parts
def test_selector_function_is_class_filter_mode() -> None:
    sel = Selector.function(NAMED)
    assert sel.is_function and not sel.is_tag and sel.filter_function is not None
    assert sel.filter_function.crc == filter_class_crc(NAMED) and sel.filter_function.body == b""
    sub = SubscriptionEntry.create("Orders", sel).to_subscription().to_json()
    assert sub["classFilterMode"] is True and sub["subString"] == NAMED and sub["expressionType"] == "TAG"
    assert sub["tagsSet"] == [] and sub["codeSet"] == []
    for bad in ("big_eu_orders", "shop.filters:", ":f", "shop filters:f", "shop.filters:_private", "m:class"):
        with pytest.raises(ValueError):
            Selector.function(bad)

    up = Selector.function_source(SOURCE, name="BigEuOrders", access_key=ACCOUNT, secret=SECRET)
    fn = up.filter_function
    assert fn is not None and fn.kind == "source" and fn.crc == filter_class_crc(SOURCE.encode())
    assert SECRET not in repr(up)
    fields = fn.register_fields("g", "Orders", "127.0.0.1:4001")
    assert fields["className"] == "BigEuOrders" and fields["classCRC"] == fn.crc
    assert fields[ACCESS_KEY_FIELD] == ACCOUNT
    upload = Upload(ACCOUNT, "g", "Orders", "BigEuOrders", "127.0.0.1:4001", int(fields[TIMESTAMP_FIELD]),
                    fields[NONCE_FIELD], fn.body)  # fmt: skip
    assert verify_upload(SECRET, upload, fields[SIGNATURE_FIELD])
    assert fn.register_fields("g", "Orders", "127.0.0.1:4001")[NONCE_FIELD] != fields[NONCE_FIELD]  # fresh each time
    with pytest.raises(ValueError):
        Selector.function_source(SOURCE, name="shop:BigEuOrders", access_key=ACCOUNT, secret=SECRET)
    with pytest.raises(ValueError):
        Selector.function_source(SOURCE, name="BigEuOrders", access_key=ACCOUNT, secret="")
    with pytest.raises(MessageValidationError, match="PushConsumer only"):
        PullConsumer("127.0.0.1:9876", "g").subscribe("Orders", sel)


def test_client_imports_no_server_code() -> None:
    code = (
        "import sys, sievemq, sievemq.sync, sievemq.client.filter_functions\n"
        "print('\\n'.join(m for m in sys.modules if m.startswith('sievemq.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    server = [m for m in out if m.split(".")[1] in ("broker", "namesrv", "store")]
    assert not server, server
    assert [m for m in out if m.startswith("sievemq.filtersrv.")] == []  # upload signing is in sievemq.protocol


# ---------------------------------------------------------------------------------------------- with processes
async def test_named_function_survives_filter_server_loss(
    fc: FilterCluster, conns: list[Connection], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="sievemq.client")
    topic, group = "FnOrders", "fn-eu-big"
    ns = fc.namesrv()
    broker = fc.broker(ns.addr)
    bconn = await open_conn(conns, broker)
    nconn = await open_conn(conns, ns)
    await send_orders(bconn, topic, range(0, 60))
    fs1 = fc.filtersrv(broker, name="fs1")
    fs2 = fc.filtersrv(broker, name="fs2")
    both = sorted([fs1.addr, fs2.addr])

    async def both_routed() -> bool:
        return await route_servers(nconn, topic) == both

    await until(both_routed, timeout=10.0, what="both filter servers in the route")

    c, got = consumer(ns.addr, group, topic, Selector.function(NAMED))
    await c.start()
    try:
        # Registered with both filter servers at start, and the matching messages only arrive.
        assert c.function_status()[topic].filter_servers == both
        for fs in (fs1, fs2):
            regs = (await fetch_status(fs.addr))["functions"]
            assert [(r["topic"], r["consumerGroup"], r["className"]) for r in regs] == [(topic, group, NAMED)]
        await until(lambda: got.has_all(range(0, 60)), timeout=15.0, what="the matches of orders 0-59")
        assert all(is_big_eu(i) for i in got.ids), got.ids

        # One filter server killed: consumption continues through the other.
        fs1.kill9()
        await send_orders(bconn, topic, range(60, 120))
        await until(lambda: got.has_all(range(0, 120)), timeout=15.0, what="the matches of orders 60-119")

        # Both killed: the consumer reports it (log and status), and nothing arrives.
        fs2.kill9()
        await send_orders(bconn, topic, range(120, 180))

        async def reported() -> bool:
            err = c.function_status()[topic].last_error or ""
            return topic in err and NAMED in err and "no filter server could run" in err

        await until(reported, timeout=15.0, what="the consumer's error")
        errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
        assert any("no filter server could run" in m and NAMED in m and topic in m for m in errors), errors
        assert not [i for i in got.ids if i >= 120]

        # A filter server returns: the consumer registers with it and resumes, losing nothing.
        fs3 = fc.filtersrv(broker, name="fs3")
        await until(lambda: got.has_all(range(0, 180)), timeout=20.0, what="the matches of orders 120-179")
        assert all(is_big_eu(i) for i in got.ids), got.ids
        status = c.function_status()[topic]
        assert fs3.addr in status.filter_servers
        regs = (await fetch_status(fs3.addr))["functions"]
        assert [(r["consumerGroup"], r["className"], r["enabled"]) for r in regs] == [(group, NAMED, True)]
    finally:
        await c.close()
    # Offsets were committed to the broker as usual (every order 0-179 consumed or filtered out).
    assert [await api.query_offset(bconn, group, topic, q) for q in (0, 1)] == [90, 90]


async def test_failing_function_skips_nothing(
    fc: FilterCluster, conns: list[Connection], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="sievemq.client")
    topic, group = "FnFailing", "fn-failing"
    ns = fc.namesrv()
    broker = fc.broker(ns.addr)
    bconn = await open_conn(conns, broker)
    nconn = await open_conn(conns, ns)
    await send_orders(bconn, topic, range(0, 10))
    fs = fc.filtersrv(broker)

    async def routed() -> bool:
        return await route_servers(nconn, topic) == [fs.addr]

    await until(routed, timeout=10.0, what="the filter server in the route")

    def logged(*parts: str) -> bool:
        return any(all(p in r.getMessage() for p in parts) for r in caplog.records)

    async def logged_async(*parts: str) -> bool:
        return logged(*parts)

    c, got = consumer(ns.addr, group, topic, Selector.function("shop.filters:raises"), heartbeat_interval=2.0)
    await c.start()
    try:
        # The filter server's remark is logged: it names the function and says nothing was skipped.
        await until(lambda: logged_async("'shop.filters:raises'", "KeyError", "not skipped"), what="the remark")
        # Failing 3 times disables the function there; the next heartbeat round registers it again (re-enabling).
        await until(lambda: logged_async("is disabled on filter server", fs.addr), timeout=15.0, what="disabled")
        await until(lambda: logged_async("re-enabled function 'shop.filters:raises'"), timeout=10.0, what="re-enabled")
        status = c.function_status()[topic]
        assert status.last_error is not None and "shop.filters:raises" in status.last_error
        assert got.ids == []
    finally:
        await c.close()
    # Nothing was consumed, so nothing was committed past the first message.
    assert [await api.query_offset(bconn, group, topic, q) for q in (0, 1)] in ([0, 0], [-1, -1])


async def test_uploaded_function(fc: FilterCluster, conns: list[Connection]) -> None:
    topic, group = "FnUploads", "fn-uploaders"
    ns = fc.namesrv()
    broker = fc.broker(ns.addr)
    bconn = await open_conn(conns, broker)
    nconn = await open_conn(conns, ns)
    await send_orders(bconn, topic, range(0, 40))
    on = fc.filtersrv(
        broker,
        "--client-upload-filter-enable", "true",
        "--upload-secret", SECRET,
        "--upload-accounts", ACCOUNT,
        name="fs-on",
    )  # fmt: skip

    async def routed(addr: str) -> bool:
        return await route_servers(nconn, topic) == [addr]

    await until(lambda: routed(on.addr), timeout=10.0, what="the filter server in the route")

    # Signed with the shared secret: accepted, and exactly the matches arrive.
    signed = Selector.function_source(SOURCE, name="BigEuOrders", access_key=ACCOUNT, secret=SECRET)
    c, got = consumer(ns.addr, group, topic, signed)
    await c.start()
    try:
        await until(lambda: got.has_all(range(0, 40)), timeout=15.0, what="the matches of the uploaded function")
        await quiet_period(0.5, "a message the function does not match", unchanged=lambda: len(got.ids))
        assert sorted(got.ids) == [i for i in range(40) if is_big_eu(i)]
    finally:
        await c.close()

    # A wrong secret: start() fails with the filter server's reason.
    forged = Selector.function_source(SOURCE, name="BigEuOrders", access_key=ACCOUNT, secret="guess")
    c, _ = consumer(ns.addr, "fn-forger", topic, forged)
    with pytest.raises(SubscriptionError) as e:
        await c.start()
    assert (e.value.code, e.value.reason) == (ResponseCode.NO_PERMISSION, Reason.FILTER_NOT_ALLOWED), e.value

    # Uploads off (the default): start() fails and says so.
    on.kill9()
    off = fc.filtersrv(broker, name="fs-off")
    await until(lambda: routed(off.addr), timeout=10.0, what="the upload-less filter server in the route")
    c, _ = consumer(ns.addr, "fn-uploaders-2", topic, signed)
    with pytest.raises(SubscriptionError, match="clientUploadFilterEnable=false") as e:
        await c.start()
    assert "BigEuOrders" in str(e.value) and topic in str(e.value)
    assert e.value.reason == Reason.FILTER_NOT_ALLOWED


async def test_a_function_of_a_topic_that_does_not_exist_yet_waits_without_an_error(
    fc: FilterCluster, conns: list[Connection], caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 33 item 8 (the docs' example on a first run): the consumer starts before the topic exists. That is no
    error of the function (no route yet, not "no filter server listed"): once the first send creates the topic, the
    function is registered and the matches arrive, and the status counts no error."""
    caplog.set_level(logging.INFO, logger="sievemq.client")
    topic, group = "FnNewTopic", "fn-new-topic"
    ns = fc.namesrv()
    broker = fc.broker(ns.addr)
    bconn = await open_conn(conns, broker)
    fc.filtersrv(broker)
    c, got = consumer(ns.addr, group, topic, Selector.function(NAMED))
    await c.start()
    try:
        await send_orders(bconn, topic, range(0, 20))
        await until(lambda: got.has_all(range(0, 20)), timeout=60.0, what="the matches of orders 0-19")
        status = c.function_status()[topic]
        assert (status.errors, status.last_error) == (0, None), status
    finally:
        await c.close()
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, errors
