"""``sievemq.util.heap.settle``: what a started role does to its garbage collector (in a process of its own)."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import gc
from sievemq.util import heap
kept = [[i] for i in range(50_000)]  # what a started role holds
before = gc.get_freeze_count()
heap.settle()
print(before, gc.get_freeze_count() >= len(kept), gc.get_threshold()[0])
"""


def test_settle_freezes_what_the_role_holds_and_collects_the_young_less_often() -> None:
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["0", "True", "10000"]
