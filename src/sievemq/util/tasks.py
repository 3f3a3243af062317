"""Background tasks, one way for every part of sievemq: keep references, log failures, cancel without swallowing our
own cancellation (``spawn``, ``cancel_and_wait``, ``Background`` for a service's one long-running task)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")


def spawn(coro: Coroutine[Any, Any, T], registry: set[asyncio.Task[Any]], name: str | None = None) -> asyncio.Task[T]:
    """Run ``coro`` in the background; ``registry`` holds the task until it ends; failures are logged."""
    task = asyncio.get_running_loop().create_task(coro, name=name)
    registry.add(task)

    def done(t: asyncio.Task[T]) -> None:
        registry.discard(t)
        if not t.cancelled() and (e := t.exception()) is not None:
            log.warning("background task %s failed: %r", t.get_name(), e)

    task.add_done_callback(done)
    return task


async def cancel_and_wait(*tasks: asyncio.Task[Any] | None) -> None:
    """Cancel ``tasks`` and wait until they end. Unlike ``await task`` in a ``suppress(CancelledError)``, a
    cancellation of the caller itself still propagates.

    A task that survives its cancellation is cancelled again: on Python 3.11 ``asyncio.wait_for`` (used under
    ``Connection.request``) returns the inner result instead of raising when a cancellation races the response.
    """
    all_tasks = [t for t in tasks if t is not None]
    live = [t for t in all_tasks if not t.done()]
    while live:
        for t in live:
            t.cancel()
        await asyncio.wait(live, timeout=0.1)
        live = [t for t in live if not t.done()]
    for t in all_tasks:
        if not t.cancelled():
            t.exception()  # retrieved: no "exception never retrieved" warning


class Background:
    """A service's background task, started and stopped in one way: ``start`` runs a coroutine (one at a time),
    ``stop`` cancels it and waits until it ended (a cancellation of the caller still propagates), a failure is
    logged with the task's name instead of being lost."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._task: asyncio.Task[Any] | None = None
        self._registry: set[asyncio.Task[Any]] = set()

    @property
    def running(self) -> bool:
        """Whether the task was started and has not ended."""
        return self._task is not None and not self._task.done()

    @property
    def task(self) -> asyncio.Task[Any] | None:
        """The task of the last ``start`` (None before it and after ``stop``)."""
        return self._task

    def start(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Run ``coro`` in the background; a second start while it runs is a programming error."""
        if self.running:
            coro.close()
            raise RuntimeError(f"background task {self.name} is already running")
        self._task = spawn(coro, self._registry, self.name)

    def cancel(self) -> None:
        """Cancel the task without waiting (for a synchronous stop; its end is still logged if it failed)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()

    async def stop(self) -> None:
        """Cancel the task and wait until it ended (nothing happens when it is not running)."""
        task, self._task = self._task, None
        await cancel_and_wait(task)
