"""A broker runs the compiled codec when it is built, the pure-Python one when told to, and says which."""

from __future__ import annotations

from sievemq import Message, Producer
from sievemq.admin.api import AdminClient
from sievemq.protocol import accel
from tests.integration.conftest import Cluster, OpenConn
from tests.integration.helpers import create_topic, pull_all
from tests.support.procs import Proc

Stored = tuple[bytes, str | None, list[str], str]


async def _round_trip(ns: Proc, broker: Proc, open_conn: OpenConn, topic: str) -> list[Stored]:
    conn = await open_conn(broker)
    await create_topic(conn, topic, queues=2)
    msgs = [Message(topic, f"m{i}".encode() * (i + 1), tags=f"T{i % 3}", keys=[f"k{i}"], properties={"p": "é ☃ x"})
            for i in range(40)]  # fmt: skip
    async with Producer(ns.addr, f"{topic}-p") as p:
        await p.send_batch(msgs[:20])
        for m in msgs[20:]:
            await p.send(m)
    got = [m for q in range(2) for m in await pull_all(conn, topic, q)]
    return sorted((m.body, m.tags, m.keys, m.properties["p"]) for m in got)


async def test_both_codecs_store_and_serve_the_same_messages(cluster: Cluster, ns: Proc, open_conn: OpenConn) -> None:
    default = cluster.broker(ns.addr, "broker-a")
    pure = cluster.broker(ns.addr, "broker-b", env={accel.PURE_ENV: "1"})
    async with AdminClient("") as admin:
        a, b = await admin.runtime_info(default.addr), await admin.runtime_info(pure.addr)
    assert a["codecImplementation"] == accel.implementation(), a  # what this install runs
    assert b["codecImplementation"] == "pure-python", b
    async with AdminClient(ns.addr) as admin:
        rows = {r["brokerName"]: r["codec"] for r in await admin.cluster_status()}
    assert rows == {"broker-a": accel.implementation(), "broker-b": "pure-python"}, rows
    want = sorted((f"m{i}".encode() * (i + 1), f"T{i % 3}", [f"k{i}"], "é ☃ x") for i in range(40))
    assert await _round_trip(ns, default, open_conn, "CodecA") == want
    assert await _round_trip(ns, pure, open_conn, "CodecB") == want
