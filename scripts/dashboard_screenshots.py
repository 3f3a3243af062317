#!/usr/bin/env python3
"""Screenshots of the dashboard for the docs: starts ``sievemq dev`` on free ports in a temporary folder, loads the
sample data of the tests (tests/dashboard/sample.py: topics, messages, a running and a stopped consumer group, and
a group whose members subscribe differently), sends messages all along (payments throughout, orders until the
topic's page is taken, so the rates are not all zero), opens each page in headless chromium (the tests' browser:
tests/support/browser.py) and writes docs/dashboard/<page>.png: the 8 pages docs/dashboard.md and docs/monitoring.md show
(tests/unit/dashboard/test_screenshots.py checks they are there and referenced).

    .venv/bin/python scripts/dashboard_screenshots.py [--out docs/dashboard]

Needs Debian's chromium and chromium-driver (scripts/test.sh installs them) and the test extra (selenium).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.dashboard import sample  # noqa: E402
from tests.dashboard.conftest import Loop  # noqa: E402
from tests.support.browser import chrome, open_view, screenshot, wait_text  # noqa: E402
from tests.support.procs import dev_proc  # noqa: E402


def pages(ids: dict[str, str]) -> list[tuple[str, str, tuple[str, ...]]]:
    """(file name, page, texts to wait for) of each screenshot."""
    now = int(time.time() * 1000)
    by_time = urllib.parse.urlencode({"mode": "time", "topic": "orders", "begin": now - 3_600_000, "end": now + 60_000,
                                      "limit": 12})  # fmt: skip
    explain = urllib.parse.urlencode({"topic": "orders", "type": "SQL92", "group": "shipping",
                                      "expression": "region = 'eu' AND amount > 100"})  # fmt: skip
    return [
        ("cluster", "#/cluster", ("broker-a", "ASYNC_MASTER")),
        ("topics", "#/topics", ("orders", "payments", "audit-log", "/s")),
        ("topic", "#/topic?topic=orders", ("Queues", "billing")),
        ("groups", "#/groups", ("billing", "shipping", sample.STOCK_GROUP, "inconsistent")),
        ("group", "#/group?group=shipping", ("Lag per queue", "Filter counts", "SQL92")),
        ("messages", f"#/messages?{by_time}", ("order-3", "message(s)")),
        ("message", f"#/message?id={ids['order-7']}", ("Properties", "region")),
        ("filters", f"#/filters?{explain}", ("Matching (sample)", "Filter counts of shipping")),
    ]


REFRESHED = ("cluster", "topics", "topic")
"""Pages whose rates need two samples: their screenshot waits for the page's own refresh."""


async def trickle(namesrv: str, stop: asyncio.Event, orders_stop: asyncio.Event) -> None:
    """Payments arriving all along and orders (the sample's, numbered on) until ``orders_stop``: the pages' rates
    are not all zero, and billing consumes the orders (Out)."""
    from sievemq import Message, Producer

    producer = Producer(namesrv, "screenshot-trickle")
    await producer.start()
    try:
        i = 0
        while not stop.is_set():
            await producer.send(Message("payments", f"payment {i}".encode(), tags="Card", keys=[f"live-{i}"]))
            if not orders_stop.is_set() and i % 8 == 0:
                await producer.send(sample.order(sample.ORDERS + sample.LATE_ORDERS + i // 8))
            i += 1
            await asyncio.sleep(0.04)
    finally:
        await producer.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "dashboard", help="folder of the PNG files")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="sievemq-shots-") as tmp:
        dev = dev_proc(Path(tmp)).start()
        loop = Loop()
        driver = None
        data = None
        stock = None
        try:
            namesrv, url = str(dev.extra["namesrv"]), str(dev.extra["http"])
            data = loop.run(sample.load(namesrv))
            stock = loop.run(sample.inconsistent_group(namesrv))
            from sievemq.admin.api import AdminClient
            from sievemq.admin.messages import show

            async def offset_id(msg_id: str) -> str:
                async with AdminClient(namesrv) as admin:
                    return (await show(admin, msg_id)).messages[0].msg.offset_msg_id

            ids = {"order-7": loop.run(offset_id(data.order_ids["order-7"]))}
            stop, orders_stop = asyncio.Event(), asyncio.Event()
            sending = asyncio.run_coroutine_threadsafe(trickle(namesrv, stop, orders_stop), loop.loop)
            driver = chrome(Path(tmp) / "profile")
            for name, page, texts in pages(ids):
                open_view(driver, f"{url}/{page}", *texts)
                if name in REFRESHED:
                    before = driver.execute_script("return document.body.dataset.ready")
                    deadline = time.monotonic() + 15
                    while driver.execute_script("return document.body.dataset.ready") == before:
                        if time.monotonic() > deadline:
                            break
                        time.sleep(0.2)
                    wait_text(driver, *texts)
                path = screenshot(driver, args.out / f"{name}.png")
                driver.set_window_size(1440, 900)
                if name == "topic":
                    loop.loop.call_soon_threadsafe(orders_stop.set)  # the group's and the messages' pages stay put
                print(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
            loop.loop.call_soon_threadsafe(stop.set)
            sending.result(30)
        finally:
            if driver is not None:
                driver.quit()
            if stock is not None:
                loop.run(stock.close())
            if data is not None:
                loop.run(data.close())
            loop.close()
            dev.stop()


if __name__ == "__main__":
    main()
