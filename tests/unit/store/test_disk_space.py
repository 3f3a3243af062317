"""The space decisions as pure functions, and the disk guard's states with an injected free-space function and clock."""

from __future__ import annotations

import errno
import logging
from pathlib import Path

import pytest

from sievemq.store.disk import DiskGuard, decide, is_no_space

MIB = 1 << 20


@pytest.mark.parametrize(
    ("free", "need", "reserve", "allowed"),
    [
        (0, 0, 64 * MIB, True),  # needs nothing: goes to blocks the store holds, even on a full disk
        (10 * MIB, 0, 64 * MIB, True),
        (200 * MIB, 128 * MIB, 64 * MIB, True),  # 72 MiB stay free
        (192 * MIB, 128 * MIB, 64 * MIB, True),  # exactly the reserve stays free
        (192 * MIB - 1, 128 * MIB, 64 * MIB, False),
        (100 * MIB, 128 * MIB, 0, False),  # never weaker than "the file fits"
        (128 * MIB, 128 * MIB, 0, True),
        (0, 1, 0, False),
    ],
)
def test_decide(free: int, need: int, reserve: int, allowed: bool) -> None:
    assert decide(free, need, reserve) is allowed


def test_no_space_errors() -> None:
    assert is_no_space(OSError(errno.ENOSPC, "full")) and is_no_space(OSError(errno.EDQUOT, "quota"))
    assert not is_no_space(OSError(errno.EIO, "io")) and not is_no_space(ValueError())


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


class Free:
    """An injected free-space measure that counts its calls."""

    def __init__(self, value: int) -> None:
        self.value = value
        self.calls = 0

    def __call__(self, root: Path) -> int:
        self.calls += 1
        return self.value


def guard(tmp_path: Path, free: Free, clock: Clock, reserve: int = 10 * MIB) -> DiskGuard:
    return DiskGuard(tmp_path, reserve, free_fn=free, clock=clock, recheck_s=1.0)


def test_a_put_that_needs_nothing_costs_no_measure(tmp_path: Path) -> None:
    free, clock = Free(0), Clock()
    g = guard(tmp_path, free, clock)
    for _ in range(1000):
        assert g.check(0) is None
    assert free.calls == 0


def test_refusal_then_cheap_rechecks_then_space_is_back(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    free, clock = Free(15 * MIB), Clock()
    g = guard(tmp_path, free, clock)
    assert g.check(4 * MIB) is None  # 11 MiB stay free >= 10
    assert free.calls == 1  # a put that needs space measures afresh
    with caplog.at_level(logging.ERROR, "sievemq.store"):
        refusal = g.check(8 * MIB)
    assert refusal is not None and g.full is refusal
    assert (refusal.free_bytes, refusal.need_bytes, refusal.reserve_bytes, refusal.read_only) == (
        15 * MIB, 8 * MIB, 10 * MIB, False)  # fmt: skip
    assert str(tmp_path) in refusal.remark() and "bytes free" in refusal.remark()
    assert "store disk full" in caplog.text
    calls = free.calls
    for _ in range(100):  # while full: at most one measure per recheck_s, no log line per refusal
        assert g.check(8 * MIB) is not None
    assert free.calls == calls
    assert g.check(0) is None  # what needs no new space still goes through
    free.value = 100 * MIB  # space came back (retention, the operator)
    assert g.check(8 * MIB) is not None  # not measured yet: within the second
    clock.t += 1.01
    assert g.check(8 * MIB) is None
    g.allocated()
    assert g.full is None


def test_allocation_failing_after_the_decision_refuses(tmp_path: Path) -> None:
    g = guard(tmp_path, Free(100 * MIB), Clock())
    info = g.allocation_failed(4 * MIB, OSError(errno.ENOSPC, "No space left on device"))
    assert g.full is info and "No space left" in info.detail


def test_read_only_refuses_everything_until_left(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    free, clock = Free(0), Clock()
    g = guard(tmp_path, free, clock)
    with caplog.at_level(logging.ERROR, "sievemq.store"):
        g.enter_read_only("start-up could not finish allocating the files written next: No space left on device")
    assert "READ-ONLY" in caplog.text and "allocating the files" in caplog.text
    refusal = g.check(0)
    assert refusal is not None and refusal.read_only and "read-only" in refusal.remark()
    assert not g.fits(1) and g.full is None  # read-only is not the "full" state
    g.enter_read_only("again")  # a failed retry: no second ERROR within the minute
    assert caplog.text.count("READ-ONLY") == 1
    g.leave_read_only()
    assert g.read_only is None and g.check(0) is None


def test_fits_does_not_change_state(tmp_path: Path) -> None:
    g = guard(tmp_path, Free(12 * MIB), Clock())
    assert g.fits(2 * MIB) and not g.fits(3 * MIB)
    assert g.full is None


