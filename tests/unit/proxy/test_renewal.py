"""Auto-renewed leases of the proxy (docs/proxy.md §5) against a fake broker: renewed before they run out, the
client's handle translated, no more renewals after an ack, a refused renewal ends the tracking."""

from __future__ import annotations

import asyncio

from sievemq.proxy.renewal import Renewals


def test_renewals_translate_handles_and_stop_when_done_or_refused() -> None:
    calls: list[tuple[str, int]] = []

    async def change(group: str, topic: str, handle: str, invisible_ms: int) -> str:
        calls.append((handle, invisible_ms))
        if handle.startswith("gone"):
            raise RuntimeError("the lease is gone")
        return handle + "'"

    async def go() -> None:
        r = Renewals(change, tick=0.01)
        r.track("g", "t", "c1", "h1", 1000)  # renewed after 0.5 s (at least 2 s of lead: the floor of 0.5 s)
        r.track("g", "t", "c1", "gone1", 1000)
        r.track("g", "t", "c2", "h2", 600_000)
        assert await r.renew_due() == 0, "nothing is due at once"
        await asyncio.sleep(0.55)
        assert await r.renew_due() == 1
        assert r.current("h1") == "h1'" and r.current("h2") == "h2" and r.current("unknown") == "unknown"
        assert "gone1" not in r.tracked, "a refused renewal ends the tracking"
        r.done("h1")
        assert r.current("h1") == "h1"
        r.forget_client("c2")
        assert r.tracked == {}

    asyncio.run(go())
    assert [h for h, _ in calls] == ["h1", "gone1"] and all(ms == 1000 for _, ms in calls)
