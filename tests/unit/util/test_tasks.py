"""``sievemq.util.tasks.Background``: one way to run and stop a service's background task."""

from __future__ import annotations

import asyncio
import logging

import pytest

from sievemq.util.tasks import Background


async def test_start_then_stop_cancels_and_waits_for_the_task() -> None:
    ended = asyncio.Event()
    started = asyncio.Event()

    async def loop() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            ended.set()

    bg = Background("test-loop")
    bg.start(loop())
    await started.wait()
    assert bg.running
    await bg.stop()
    assert ended.is_set() and not bg.running and bg.task is None
    await bg.stop()  # a second stop does nothing


async def test_a_second_start_while_running_is_refused() -> None:
    bg = Background("test-once")
    bg.start(asyncio.Event().wait())
    second = asyncio.Event().wait()
    with pytest.raises(RuntimeError, match="test-once"):
        bg.start(second)
    await bg.stop()


async def test_a_failure_is_logged_with_the_tasks_name(caplog: pytest.LogCaptureFixture) -> None:
    async def fail() -> None:
        raise ValueError("boom")

    bg = Background("test-failing")
    with caplog.at_level(logging.WARNING, logger="sievemq.util.tasks"):
        bg.start(fail())
        task = bg.task
        assert task is not None
        await asyncio.wait([task])
    assert any("test-failing" in r.getMessage() and "boom" in r.getMessage() for r in caplog.records)
    assert not bg.running
    await bg.stop()  # the failure was logged, not raised


async def test_stop_does_not_swallow_the_callers_own_cancellation() -> None:
    stubborn_started = asyncio.Event()

    async def stubborn() -> None:
        stubborn_started.set()
        while True:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                await asyncio.sleep(0.01)  # takes a while to end, keeps the stopper waiting
                raise

    bg = Background("test-stubborn")
    bg.start(stubborn())
    await stubborn_started.wait()
    stopper = asyncio.create_task(bg.stop())
    await asyncio.sleep(0)
    stopper.cancel()
    with pytest.raises(asyncio.CancelledError):
        await stopper


async def test_cancel_without_waiting() -> None:
    bg = Background("test-cancel")
    bg.start(asyncio.Event().wait())
    task = bg.task
    assert task is not None
    bg.cancel()
    assert bg.task is None
    with pytest.raises(asyncio.CancelledError):
        await task
