"""A topic created through the admin API has its queues' first files ready before its first message."""

from __future__ import annotations

from sievemq import Message, Producer
from sievemq.store.mapped_file_queue import SPARE_SUFFIX
from tests.integration.conftest import Cluster, OpenConn
from tests.integration.helpers import create_topic, pull_all
from tests.support.procs import Proc


async def test_created_topics_have_their_queue_files_ready(cluster: Cluster, ns: Proc, broker: Proc,
                                                           open_conn: OpenConn) -> None:  # fmt: skip
    conn = await open_conn(broker)
    await create_topic(conn, "ReadyT", queues=3)
    cq = cluster.store_dir(broker) / "consumequeue" / "ReadyT"
    assert sorted(p.name for p in cq.iterdir()) == ["0", "1", "2"], list(cq.iterdir())
    for q in range(3):
        assert [p.name for p in (cq / str(q)).iterdir()] == ["0" * 20 + SPARE_SUFFIX], q
    async with Producer(ns.addr, "ready-p") as p:
        for i in range(6):
            await p.send(Message("ReadyT", f"m{i}".encode()))
    got = [m.body for q in range(3) for m in await pull_all(conn, "ReadyT", q)]
    assert sorted(got) == [f"m{i}".encode() for i in range(6)], got
    for q in range(3):
        assert [p.name for p in (cq / str(q)).iterdir()] == ["0" * 20], "each queue took its spare"
