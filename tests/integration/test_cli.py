"""The ``sievemq`` command as a user runs it (subprocesses): topic create/list/delete and ``broker --help``."""

from __future__ import annotations

import asyncio
import dataclasses
import re
import sys

import orjson

from sievemq.broker.config import BrokerConfig
from sievemq.remoting.codes import RequestCode
from tests.integration.conftest import Cluster, OpenConn
from tests.integration.helpers import call, eventually, route_brokers, route_or_none
from tests.support import wire
from tests.support.procs import free_port

TOPIC = "CliTopic"


async def run_cli(*args: str, timeout: float = 30.0) -> tuple[int, str, str]:
    """``python -m sievemq.cli ARGS`` -> (exit code, stdout, stderr)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "sievemq.cli", *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_topic_create_list_delete_show_in_routes(cluster: Cluster, open_conn: OpenConn) -> None:
    ns = cluster.namesrv()
    br_a = cluster.broker(ns.addr, "broker-a")
    br_b = cluster.broker(ns.addr, "broker-b")
    nsc = await open_conn(ns)

    async def brokers_known() -> bool:
        info = orjson.loads((await call(nsc, RequestCode.GET_BROKER_CLUSTER_INFO)).body)
        return sorted(info["brokerAddrTable"]) == ["broker-a", "broker-b"]

    await eventually(brokers_known, what="both brokers registered")

    # create: on every master, with 3 queues.
    rc, out, err = await run_cli("topic", "create", TOPIC, "--namesrv", ns.addr, "-q", "3")
    assert rc == 0, err
    assert br_a.addr in out and br_b.addr in out, out
    route = await eventually(lambda: route_or_none(nsc, TOPIC), what="route of the created topic")
    assert route_brokers(route) == {"broker-a": br_a.addr, "broker-b": br_b.addr}
    assert {(q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm) for q in route.queue_datas} == {
        ("broker-a", 3, 3, 6),
        ("broker-b", 3, 3, 6),
    }

    # list: the topic with its queues and message count; system topics only with --all.
    conn_a = await open_conn(br_a)
    for i in range(2):
        await wire.send_message(conn_a, TOPIC, f"c{i}".encode(), queue_id=i)
    rc, out, err = await run_cli("topic", "list", "--namesrv", ns.addr)
    assert rc == 0, err
    (line,) = [ln for ln in out.splitlines() if ln.split() and ln.split()[0] == TOPIC]
    assert "broker-a:3q" in line and "broker-b:3q" in line and re.search(r"\b2 messages\b", line), line
    assert "TBW102" not in out
    rc, out_all, err = await run_cli("topic", "list", "--all", "--namesrv", ns.addr)
    assert rc == 0, err
    assert "TBW102" in out_all and TOPIC in out_all

    # delete: gone from the route, from the name server's topic list and from the brokers.
    rc, out, err = await run_cli("topic", "delete", TOPIC, "--namesrv", ns.addr)
    assert rc == 0, err
    assert TOPIC in out
    await eventually(lambda: _is_none(route_or_none(nsc, TOPIC)), what="route gone after delete")
    topics = orjson.loads((await call(nsc, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)).body)["topicList"]
    assert TOPIC not in topics
    for proc in (br_a, br_b):
        conn = await open_conn(proc)
        table = orjson.loads((await call(conn, RequestCode.GET_ALL_TOPIC_CONFIG)).body)["topicConfigTable"]
        assert TOPIC not in table, proc.addr
    rc, out, err = await run_cli("topic", "list", "--namesrv", ns.addr)
    assert rc == 0 and TOPIC not in out


async def test_cli_reports_an_unreachable_name_server_without_a_traceback() -> None:
    rc, _out, err = await run_cli("topic", "create", "Nowhere", "--namesrv", f"127.0.0.1:{free_port()}")
    assert rc != 0
    assert "Error" in err and "Traceback" not in err, err


async def test_broker_help_explains_each_option() -> None:
    rc, out, err = await run_cli("broker", "--help")
    assert rc == 0, err
    flat = " ".join(out.split()).replace("- ", "-")  # click wraps lines after a hyphen too
    for f in dataclasses.fields(BrokerConfig):
        opt = "--" + f.name.replace("_", "-")
        assert opt in out, f"{opt} missing from `sievemq broker --help`"
        doc = str(f.metadata.get("doc", ""))
        assert doc, f"{f.name} has no doc"
        assert " ".join(doc.split()).replace("- ", "-") in flat, f"{opt}: help does not explain it ({doc!r})"
    assert "--config" in out


async def _is_none(aw) -> bool:  # type: ignore[no-untyped-def]
    return (await aw) is None


async def test_cli_with_two_name_servers_falls_back_and_deletes_everywhere(
    cluster: Cluster, open_conn: OpenConn
) -> None:
    ns1, ns2 = cluster.namesrv("ns-1"), cluster.namesrv("ns-2")
    broker = cluster.broker(f"{ns1.addr};{ns2.addr}", "broker-a")
    nscs = [await open_conn(ns1), await open_conn(ns2)]
    for nsc in nscs:
        await eventually(lambda nsc=nsc: _has_broker(nsc), what="broker registered")

    # The first listed name server is down: the CLI uses the next one.
    dead = f"127.0.0.1:{free_port()}"
    rc, out, err = await run_cli("topic", "create", "TwoNs", "--namesrv", f"{dead};{ns1.addr}", "-q", "2")
    assert rc == 0, err
    assert broker.addr in out
    for nsc in nscs:
        route = await eventually(lambda nsc=nsc: route_or_none(nsc, "TwoNs"), what="route on every name server")
        assert route_brokers(route) == {"broker-a": broker.addr}

    rc, out, err = await run_cli("topic", "delete", "TwoNs", "--namesrv", f"{ns1.addr};{ns2.addr}")
    assert rc == 0, err
    for nsc in nscs:
        await eventually(lambda nsc=nsc: _is_none(route_or_none(nsc, "TwoNs")), what="route gone everywhere")


async def _has_broker(nsc) -> bool:  # type: ignore[no-untyped-def]
    info = orjson.loads((await call(nsc, RequestCode.GET_BROKER_CLUSTER_INFO)).body)
    return "broker-a" in info["brokerAddrTable"]
