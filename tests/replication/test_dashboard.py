"""The dashboard's cluster and topic views of a master/slave set (docs/dashboard.md §3): roles, the slave's link
state and lag, the master's slaves, and a slave gone."""

from __future__ import annotations

from sievemq import Message, Producer
from tests.dashboard.conftest import get
from tests.support.procs import Proc, free_port
from tests.support.replica_sets import ReplicaSets, in_step, until


async def test_cluster_view_of_a_master_and_its_slave(rsets: ReplicaSets) -> None:
    master = rsets.broker("master", "SYNC_MASTER").start()
    slave = rsets.broker("slave", "SLAVE", 1).start()
    await in_step(rsets.namesrv)
    async with Producer(rsets.namesrv, "dash-p") as p:
        for i in range(6):
            await p.send(Message("DashT", f"m{i}".encode()))
    await in_step(rsets.namesrv)
    port = free_port()
    board = Proc(["dashboard", "--namesrv-addr", rsets.namesrv, "--http-port", str(port)], port,
                 rsets.tmp / "dashboard.log", ready_text="sievemq dashboard on")  # fmt: skip
    rsets.procs.append(board.start())
    api = f"http://127.0.0.1:{port}/api"

    rows = {b["brokerId"]: b for b in get(f"{api}/cluster").json()["brokers"]}
    assert (rows[0]["role"], rows[0]["addr"], rows[0]["slaves"], rows[0]["state"]) == (
        "SYNC_MASTER", master.addr, 1, "serving")
    assert (rows[1]["role"], rows[1]["addr"], rows[1]["state"], rows[1]["lagBytes"]) == (
        "SLAVE", slave.addr, "following", 0)
    assert rows[0]["commitLogMaxOffset"] == rows[1]["commitLogMaxOffset"] > 0
    assert rows[1]["disk"]["state"] == "writable"
    topic = get(f"{api}/topic?topic=DashT").json()
    assert topic["messages"] == 6 and topic["brokers"][0]["addrs"] == {"0": master.addr, "1": slave.addr}

    slave.kill9()

    async def slave_gone() -> bool:
        brokers = get(f"{api}/cluster").json()["brokers"]
        return [(b["brokerId"], b["slaves"]) for b in brokers] == [(0, 0)]

    await until(slave_gone, 20.0, "the dashboard shows the master without its slave")
