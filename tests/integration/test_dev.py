"""``sievemq dev``: both roles in one process, a clean stop on SIGTERM, and a restart that serves old messages."""

from __future__ import annotations

import re

from sievemq.remoting.connection import connect
from tests.integration.conftest import Cluster
from tests.integration.helpers import eventually, pull_all, route_brokers, route_or_none
from tests.support import wire


async def test_dev_serves_both_roles_stops_cleanly_and_restarts_with_its_data(cluster: Cluster) -> None:
    dev = cluster.dev()
    ns_port = int(dev.extra["namesrv_port"])  # type: ignore[call-overload]
    data = cluster.tmp / "dev-data"

    # It says where each role listens.
    log = await eventually(
        lambda: dev.log() if "Press Ctrl-C" in dev.log() else "", timeout=10, what="dev banner in the log"
    )
    assert re.search(rf"name server\s+127\.0\.0\.1:{ns_port}\b", log), log
    assert re.search(rf"broker\s+127\.0\.0\.1:{dev.port}\b", log), log
    assert str(data) in log

    # Both roles answer: the broker stores, the name server routes to it.
    broker_conn = await connect("127.0.0.1", dev.port)
    ns_conn = await connect("127.0.0.1", ns_port)
    try:
        sent = [await wire.send_message(broker_conn, "DevTopic", f"m{i}".encode(), queue_id=0) for i in range(5)]
        assert [s.queue_offset for s in sent] == list(range(5))
        route = await eventually(lambda: route_or_none(ns_conn, "DevTopic"), what="route of DevTopic")
        assert route_brokers(route) == {"broker-a": f"127.0.0.1:{dev.port}"}
    finally:
        broker_conn.close()
        ns_conn.close()

    # SIGTERM (what Ctrl-C does) stops it cleanly: exit code 0 and no abort mark left in the store folder.
    assert (data / "abort").exists(), "a running store keeps its abort mark"
    assert dev.stop() == 0, dev.log()
    assert not (data / "abort").exists(), "a clean stop must remove the abort mark"
    assert "stopped cleanly" in dev.log()
    size_before_restart = len(dev.log())

    # A restart on the same data serves the earlier messages and continues their offsets, with no recovery.
    again = cluster.restart(dev)
    conn = await connect("127.0.0.1", again.port)
    try:
        msgs = await pull_all(conn, "DevTopic", 0)
        assert [m.body for m in msgs] == [f"m{i}".encode() for i in range(5)]
        assert [m.offset_msg_id for m in msgs] == [s.msg_id for s in sent]
        nxt = await wire.send_message(conn, "DevTopic", b"after-restart", queue_id=0)
        assert nxt.queue_offset == 5
    finally:
        conn.close()
    assert "unclean" not in again.log()[size_before_restart:]
