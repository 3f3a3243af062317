"""The dashboard in a real browser (Debian's chromium, headless) over a set under automatic failover: the cluster
page shows each broker's epoch and brokerId and the master's SyncStateSet, and the next epoch after a failover."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver

from tests.support.browser import chrome, open_view
from tests.support.failover_sets import FailoverSet
from tests.support.failover_workload import three
from tests.support.procs import Proc, free_port


@pytest.fixture
def driver(tmp_path: Path) -> Iterator[webdriver.Chrome]:
    d = chrome(tmp_path / "chromium-profile")
    try:
        yield d
    finally:
        d.quit()


async def test_the_cluster_page_shows_epochs_and_the_sync_state_set(
    fset: FailoverSet, driver: webdriver.Chrome, tmp_path: Path
) -> None:
    master = await three(fset)
    port = free_port()
    board = Proc(["dashboard", "--namesrv-addr", fset.namesrv, "--http-listen-host", "127.0.0.1",
                  "--http-listen-port", str(port)], port, tmp_path / "dashboard.log")  # fmt: skip
    board.start()
    try:
        url = f"http://127.0.0.1:{port}/#/cluster"
        text = await asyncio.to_thread(open_view, driver, url, f"epoch 1 · brokerId {master} · SyncStateSet [1, 2, 3]")
        assert text.count("epoch 1 · brokerId") == 3, text
        st = await fset.state()
        assert st is not None
        fset.procs[master].kill9()
        new = await fset.wait_state(lambda s: s.master_epoch > st.master_epoch, "a new master elected")
        fset.broker(master).start()
        await fset.wait_in_sync(1, 2, 3)
        await asyncio.to_thread(open_view, driver, url,
                                f"epoch {new.master_epoch} · brokerId {new.master_id} · SyncStateSet [1, 2, 3]",
                                timeout=60.0)  # fmt: skip
    finally:
        board.stop()
