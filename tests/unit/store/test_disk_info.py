"""What GET_BROKER_RUNTIME_INFO says of the store's disk (``DiskGuard.runtime_info``, docs/dashboard.md §1)."""

from __future__ import annotations

import os
from pathlib import Path

from sievemq.store.disk import DiskGuard


def test_sizes_and_states(tmp_path: Path) -> None:
    free = [1 << 40]
    guard = DiskGuard(tmp_path, 1000, free_fn=lambda _: free[0])
    st = os.statvfs(tmp_path)
    info = guard.runtime_info()
    assert info["storeDiskState"] == "writable"
    assert int(info["storeDiskTotalBytes"]) == st.f_blocks * st.f_frsize
    assert 0 <= float(info["commitLogDiskRatio"]) <= 1
    assert 0 < int(info["storeDiskFreeBytes"]) <= int(info["storeDiskTotalBytes"])
    free[0] = 10
    assert guard.check(4096) is not None
    assert guard.runtime_info()["storeDiskState"] == "full"
    guard.enter_read_only("the checkpoint could not be written")
    assert guard.runtime_info()["storeDiskState"] == "read-only"


def test_a_gone_folder_says_only_its_state(tmp_path: Path) -> None:
    guard = DiskGuard(tmp_path / "missing", 0, free_fn=lambda _: 1 << 30)
    assert guard.runtime_info() == {"storeDiskState": "writable"}
