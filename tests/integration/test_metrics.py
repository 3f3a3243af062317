"""``/metrics`` of ``sievemq dev`` (name server, broker and proxy in one process) scraped over HTTP while real
clients produce, pull, filter and POP over TCP: counters move by exactly what was done (docs/metrics.md)."""

from __future__ import annotations

import re

import grpc
import orjson

from sievemq.client import api, pop_api
from sievemq.errors import RemotingError
from sievemq.protocol.batch import BatchEntry
from sievemq.protocol.message import MessageExt, PropertyKey
from sievemq.proxy.v2 import definition_pb2 as pb
from sievemq.proxy.v2 import service_pb2 as svc
from sievemq.proxy.v2 import service_pb2_grpc as rpc
from sievemq.remoting.codes import ResponseCode
from sievemq.remoting.connection import Connection, connect
from tests.integration.conftest import Cluster
from tests.integration.helpers import create_group, create_topic, eventually
from tests.integration.test_sql92 import EXPR, fill, hb, matches, pull_bodies
from tests.support import wire
from tests.support.metrics import Scrape, fetch, scrape
from tests.support.procs import Proc


async def _dev(cluster: Cluster) -> tuple[Proc, str, Connection]:
    dev = cluster.dev()
    return dev, str(dev.extra["http"]), await connect("127.0.0.1", dev.port)


async def _pull_everything(conn: Connection, topic: str, queue_id: int) -> tuple[list[MessageExt], int]:
    """Every message of a queue, and the number of PULL_MESSAGE requests it took."""
    got: list[MessageExt] = []
    offset = pulls = 0
    while True:
        r = await api.pull_message(conn, "metrics-reader", topic, queue_id, offset, max_nums=8)
        pulls += 1
        if r.code != ResponseCode.SUCCESS:
            return got, pulls
        got += r.messages
        offset = r.next_begin_offset


def _latency_count(s: Scrape, name: str) -> float:
    return s.value(f"{name}_count")


async def test_messages_bytes_latency_and_store_size_move_by_what_was_done(cluster: Cluster) -> None:
    dev, http, conn = await _dev(cluster)
    try:
        assert re.search(rf"metrics\s+{re.escape(http)}/metrics", dev.log()), dev.log()
        before = await scrape(http)
        assert len(before.families) == len(set(before.families)), "a metric family exposed twice"
        for family in before.families:
            if family.startswith("sievemq_"):
                assert f"# HELP {family}" in before.text, f"{family} has no HELP text"

        for i in range(12):
            await wire.send_message(conn, "MetricsT", f"body-{i}".encode() * (i + 1), queue_id=0)
        batch = [BatchEntry(body=f"batched-{i}".encode()) for i in range(5)]
        await wire.send_batch(conn, "MetricsT", batch, queue_id=0)
        sent = await scrape(http)
        assert sent.value("sievemq_messages_in_total", topic="MetricsT") == 17
        assert _latency_count(sent, "sievemq_send_latency_seconds") - _latency_count(
            before, "sievemq_send_latency_seconds"
        ) == 13, "one latency sample per send request (a batch is one)"

        got, pulls = await _pull_everything(conn, "MetricsT", 0)
        assert len(got) == 17
        record_bytes = sum(m.store_size for m in got)
        after = await scrape(http)
        assert after.value("sievemq_messages_in_bytes_total", topic="MetricsT") == record_bytes
        assert after.value("sievemq_messages_out_total", topic="MetricsT") == 17
        assert after.value("sievemq_messages_out_bytes_total", topic="MetricsT") == record_bytes
        assert _latency_count(after, "sievemq_pull_latency_seconds") - _latency_count(
            before, "sievemq_pull_latency_seconds"
        ) == pulls
        grown = after.value("sievemq_store_commitlog_bytes") - before.value("sievemq_store_commitlog_bytes")
        assert grown == record_bytes, "the commit log grew by the records stored, nothing else was written"
        held = after.value("sievemq_store_commitlog_bytes")
        assert after.value("sievemq_store_files_bytes", kind="commitlog") >= held
        assert after.value("sievemq_store_files_bytes", kind="consumequeue") > 0
        assert after.value("sievemq_store_consume_queues") >= 1
        total = after.value("sievemq_store_disk_total_bytes")
        assert 0 < after.value("sievemq_store_disk_used_bytes") <= total
        assert 0 < after.value("sievemq_store_disk_free_bytes") <= total
        assert after.value("sievemq_store_disk_full") == 0 and after.value("sievemq_store_read_only") == 0
        assert after.value("sievemq_connections", role="broker") >= 1
        assert after.value("sievemq_build_info", version=after.find("sievemq_build_info")[0].labels["version"],
                           codec=after.find("sievemq_build_info")[0].labels["codec"],
                           roles="namesrv,broker,proxy") == 1  # fmt: skip
        assert after.value("sievemq_event_loop_lag_seconds_count") > 0, "the loop is measured"
        assert after.value("process_cpu_seconds_total") > 0
    finally:
        conn.close()


async def test_pull_latency_leaves_out_the_time_a_pull_was_held(cluster: Cluster) -> None:
    _, http, conn = await _dev(cluster)
    try:
        await create_topic(conn, "Held", 1)
        before = await scrape(http)
        r = await api.pull_message(conn, "held-reader", "Held", 0, 0, suspend_ms=3000)
        assert r.code == ResponseCode.PULL_NOT_FOUND, "nothing arrived: the pull was held its whole suspend time"
        after = await scrape(http)
        fast = "sievemq_pull_latency_seconds_bucket"
        assert after.value(fast, le="+Inf") - before.value(fast, le="+Inf") == 1
        assert after.value(fast, le="2.5") - before.value(fast, le="2.5") == 1, (
            "the 3 s the pull was held are not its latency"
        )
    finally:
        conn.close()


async def test_filter_counts_by_kind_and_outcome(cluster: Cluster) -> None:
    _, http, conn = await _dev(cluster)
    try:
        await create_topic(conn, "Tagged", 1)
        for i in range(10):
            await wire.send_message(conn, "Tagged", b"x", tags="TagA" if i < 3 else "TagB", queue_id=0)
        got, _ = await pull_bodies(conn, "g-tag", "Tagged", "TagA", kind="TAG")
        assert len(got) == 3

        await create_topic(conn, "Orders", 1)
        await fill(conn, "Orders")
        got, _ = await pull_bodies(conn, "g-sql", "Orders", EXPR)
        want = sum(1 for i in range(40) if matches(i))
        assert len(got) == want

        await create_topic(conn, "Bitmapped", 1)
        await api.heartbeat(conn, hb("c1", "g-bm", "Bitmapped", EXPR))
        await fill(conn, "Bitmapped")  # stored after the filter registered: their Bloom bits are set at dispatch
        got, _ = await pull_bodies(conn, "g-bm", "Bitmapped", None)
        assert len(got) == want

        s = await scrape(http)
        name = "sievemq_filter_messages_total"
        assert s.value(name, kind="tag", outcome="matched", group="g-tag", topic="Tagged") == 3
        assert s.value(name, kind="tag", outcome="filtered_out", group="g-tag", topic="Tagged") == 7
        assert s.value(name, kind="sql", outcome="matched", group="g-sql", topic="Orders") == want
        assert s.value(name, kind="sql", outcome="filtered_out", group="g-sql", topic="Orders") == 40 - want
        assert s.get(name, kind="bitmap", outcome="filtered_out", group="g-sql", topic="Orders") == 0, (
            "a pull carrying its own expression has no Bloom bits to test"
        )
        skipped = s.value(name, kind="bitmap", outcome="filtered_out", group="g-bm", topic="Bitmapped")
        evaluated_out = s.get(name, kind="sql", outcome="filtered_out", group="g-bm", topic="Bitmapped")
        assert skipped > 0, "the Bloom bits spared reading some messages"
        assert skipped + evaluated_out == 40 - want
        assert s.value(name, kind="sql", outcome="matched", group="g-bm", topic="Bitmapped") == want
        assert s.total(name, outcome="error") == 0
    finally:
        conn.close()


async def test_consumer_lag_per_queue_and_pop_leases_in_flight(cluster: Cluster) -> None:
    _, http, conn = await _dev(cluster)
    try:
        await create_topic(conn, "Lagging", 2)
        for _ in range(10):
            await wire.send_message(conn, "Lagging", b"a", queue_id=0)
        for _ in range(4):
            await wire.send_message(conn, "Lagging", b"b", queue_id=1)
        await create_group(conn, "g-lag")
        await api.update_offset(conn, "g-lag", "Lagging", 0, 3)
        await api.update_offset(conn, "g-lag", "Lagging", 1, 4)
        s = await scrape(http)
        lag = "sievemq_consumer_lag_messages"
        assert s.value(lag, group="g-lag", topic="Lagging", queue="0") == 7
        assert s.value(lag, group="g-lag", topic="Lagging", queue="1") == 0
        assert s.value("sievemq_consumer_group_lag_messages", group="g-lag", topic="Lagging") == 7
        await api.update_offset(conn, "g-lag", "Lagging", 0, 10)
        assert (await scrape(http)).value(lag, group="g-lag", topic="Lagging", queue="0") == 0

        await create_topic(conn, "Popped", 1)
        first = await pop_api.pop_message(conn, "g-pop", "Popped", 0, invisible_ms=60_000)
        assert first.messages == [], "a new POP group starts at the queue's end"
        for i in range(6):
            await wire.send_message(conn, "Popped", f"p{i}".encode(), queue_id=0)
        r = await pop_api.pop_message(conn, "g-pop", "Popped", 0, max_nums=4, invisible_ms=60_000)
        assert len(r.messages) == 4
        s = await scrape(http)
        assert s.value("sievemq_pop_inflight_messages", group="g-pop", topic="Popped") == 4
        assert s.value(lag, group="g-pop", topic="Popped", queue="0") == 6, "leased is not consumed"
        assert s.value("sievemq_messages_out_total", topic="Popped") == 4
        await pop_api.ack_message(conn, "g-pop", r.messages[0].handle)
        await pop_api.ack_message(conn, "g-pop", r.messages[1].handle)
        s = await scrape(http)
        assert s.value("sievemq_pop_inflight_messages", group="g-pop", topic="Popped") == 2
        assert s.value(lag, group="g-pop", topic="Popped", queue="0") == 4, "the group's floor moved past the acks"
    finally:
        conn.close()


async def test_open_transactions_and_pending_timers(cluster: Cluster) -> None:
    _, http, conn = await _dev(cluster)
    try:
        await wire.send_message(conn, "TxT", b"half", queue_id=0,
                                properties={PropertyKey.TRAN_MSG: "true", PropertyKey.PGROUP: "pg"})  # fmt: skip
        await wire.send_message(conn, "TimerT", b"later", queue_id=0,
                                properties={PropertyKey.TIMER_DELAY_SEC: "3600"})  # fmt: skip
        s = await eventually(lambda: _with_timer(http), what="the timer message counted as pending")
        assert s.value("sievemq_transactions_open") == 1
        assert s.value("sievemq_messages_in_total", topic="TxT") == 1
        assert s.value("sievemq_messages_in_total", topic="TimerT") == 1
        assert s.get("sievemq_messages_out_total", topic="TimerT") == 0
    finally:
        conn.close()


async def _with_timer(http: str) -> Scrape | None:
    s = await scrape(http)
    return s if s.value("sievemq_timer_messages_pending") == 1 else None


async def test_name_server_route_requests_and_proxy_calls(cluster: Cluster) -> None:
    dev, http, conn = await _dev(cluster)
    ns = await connect("127.0.0.1", int(dev.extra["namesrv_port"]))  # type: ignore[call-overload]
    channel = grpc.aio.insecure_channel(str(dev.extra["grpc"]))
    try:
        await wire.send_message(conn, "Routed", b"x", queue_id=0)
        await eventually(lambda: _routed(ns), what="a route of Routed")
        before = await scrape(http)
        await wire.get_route(ns, "Routed")
        for _ in range(2):
            try:
                await wire.get_route(ns, "NoSuchTopic")
                raise AssertionError("a route of a topic nobody has")
            except RemotingError as e:
                assert e.code == ResponseCode.TOPIC_NOT_EXIST, e
        after = await scrape(http)
        requests = "sievemq_namesrv_route_requests_total"
        assert after.value(requests, result="found") - before.value(requests, result="found") == 1
        assert after.value(requests, result="not_found") - before.value(requests, result="not_found") == 2
        assert after.value("sievemq_namesrv_brokers") == 1 and after.value("sievemq_namesrv_clusters") == 1
        assert after.value("sievemq_namesrv_topics") >= 1
        assert after.value("sievemq_namesrv_registrations_total") >= 1
        assert after.value("sievemq_connections", role="namesrv") >= 1

        stub = rpc.MessagingServiceStub(channel)
        ok = await stub.QueryRoute(svc.QueryRouteRequest(topic=pb.Resource(name="Routed")))
        missing = await stub.QueryRoute(svc.QueryRouteRequest(topic=pb.Resource(name="NoSuchTopic")))
        assert ok.status.code == pb.OK and missing.status.code == pb.TOPIC_NOT_FOUND
        bogus = channel.unary_unary("/evil.Service/Anything", request_serializer=lambda b: b,
                                    response_deserializer=lambda b: b)  # fmt: skip
        try:
            await bogus(b"")
            raise AssertionError("an unknown method answered")
        except grpc.aio.AioRpcError as e:
            assert e.code() == grpc.StatusCode.UNIMPLEMENTED
        s = await scrape(http)
        calls = "sievemq_proxy_grpc_requests_total"
        assert s.value(calls, method="QueryRoute", code="OK") == 1
        assert s.value(calls, method="QueryRoute", code="TOPIC_NOT_FOUND") == 1
        assert s.value(calls, method="(other)", code="GRPC_UNIMPLEMENTED") == 1, "hostile paths add no series"
        assert s.value("sievemq_proxy_grpc_latency_seconds_count", method="QueryRoute") == 2
    finally:
        await channel.close()
        ns.close()
        conn.close()


async def _routed(ns: Connection) -> bool:
    try:
        await wire.get_route(ns, "Routed")
    except Exception:
        return False
    return True


async def test_healthz_answers_with_the_roles(cluster: Cluster) -> None:
    _, http, conn = await _dev(cluster)
    conn.close()
    status, ctype, text = fetch(http + "/healthz")
    assert status == 200 and ctype.startswith("application/json"), (status, ctype, text)
    assert orjson.loads(text) == {"status": "ok", "roles": ["namesrv", "broker", "proxy"]}
    status, _, _ = fetch(http + "/no-such-page")
    assert status == 404


def test_a_taken_http_port_is_a_warning_in_dev(cluster: Cluster) -> None:
    import socket

    from tests.support.procs import free_port

    port = free_port()
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", port))
        holder.listen()
        dev = cluster.dev("--http-port", str(port))  # started: the broker serves although the HTTP port is taken
        log = dev.log()
        assert "warning: cannot listen for HTTP (/metrics, /healthz) on 127.0.0.1:" in log, log
        assert f"{port}: the port is taken; set --http-port to a free port, or 0 to turn the HTTP port off" in log
        assert "  metrics " not in log, "no metrics URL in the banner when there is none"
        with socket.create_connection(("127.0.0.1", dev.port), timeout=5):
            pass
