"""A broker reports how late its event loop runs (``eventLoopLag*`` in GET_BROKER_RUNTIME_INFO)."""

from __future__ import annotations

from sievemq import Message, Producer
from sievemq.admin.api import AdminClient
from tests.integration.helpers import eventually
from tests.support.procs import Proc

FIELDS = ("eventLoopLagP50Ms", "eventLoopLagP99Ms", "eventLoopLagMaxMs", "eventLoopStalls", "eventLoopStalledMs")


async def test_runtime_info_carries_the_event_loop_lag(broker: Proc, ns: Proc) -> None:
    async with Producer(ns.addr, "lag-p") as p:
        for i in range(50):
            await p.send(Message("LagT", f"m{i}".encode()))

    async def ticked() -> dict[str, float] | None:  # once the 50 ms monitor has seen a late tick
        async with AdminClient("") as admin:
            info = await admin.runtime_info(broker.addr)
        values = {k: float(info[k]) for k in FIELDS}
        return values if values["eventLoopLagMaxMs"] > 0 else None

    values = await eventually(ticked, timeout=10, interval=0.05, what="the event loop's lag reported")
    assert all(v >= 0 for v in values.values()), values
    assert values["eventLoopLagP50Ms"] <= values["eventLoopLagP99Ms"] <= values["eventLoopLagMaxMs"], values
    assert values["eventLoopLagMaxMs"] > 0, values  # a sleeping loop is never woken exactly on time
