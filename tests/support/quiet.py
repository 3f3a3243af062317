"""The one way a test shows that something does *not* happen: a bounded quiet period.

A test waits for states, never for time: it probes until what it expects is there. Absence has no such state: no
probe can tell "nothing more arrives" from "it has not arrived yet". So a test that must show that nothing more
comes (no extra message, no redelivery, no duplicate, no second registration) watches for a bounded time after the
state it waits for, and that time is the only fixed wait it may use. Every such wait goes through this module, so
that it is named, says what it watches for, and fails as soon as something shows up, with what changed.

Give ``unchanged`` (a callable returning what is observed so far, e.g. ``lambda: len(got)``) when the test can see
arrivals as they happen: the period then ends with an AssertionError at the first change. Without it, the period
only passes time, and the test checks afterwards what a request shows.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable
from typing import Any

POLL = 0.05
"""How often ``unchanged`` is looked at during a quiet period (seconds)."""


def _changed(what: str, before: Any, now: Any, seconds: float, elapsed: float) -> AssertionError:
    return AssertionError(
        f"{what}: expected nothing more during a quiet period of {seconds}s, but after {elapsed:.2f}s "
        f"{before!r} became {now!r}"
    )


async def _look(unchanged: Callable[[], Any] | None) -> Any:
    if unchanged is None:
        return None
    value = unchanged()
    return await value if inspect.isawaitable(value) else value


async def quiet_period(seconds: float, what: str, unchanged: Callable[[], Any] | None = None) -> None:
    """Let ``seconds`` pass while showing that ``what`` does not happen (module docstring: why this is the only
    fixed wait a test may use). With ``unchanged`` (sync or async), fail as soon as its value differs from the one
    it had at the start."""
    start = time.monotonic()
    before = await _look(unchanged)
    while (elapsed := time.monotonic() - start) < seconds:
        await asyncio.sleep(min(POLL, seconds - elapsed))
        if unchanged is not None and (now := await _look(unchanged)) != before:
            raise _changed(what, before, now, seconds, time.monotonic() - start)


def quiet_period_blocking(seconds: float, what: str, unchanged: Callable[[], Any] | None = None) -> None:
    """``quiet_period`` for code outside an event loop (tests driving real client processes from threads)."""
    start = time.monotonic()
    before = unchanged() if unchanged is not None else None
    while (elapsed := time.monotonic() - start) < seconds:
        time.sleep(min(POLL, seconds - elapsed))
        if unchanged is not None and (now := unchanged()) != before:
            raise _changed(what, before, now, seconds, time.monotonic() - start)
