"""The latency phases' parent side: paced sends (awaited one after the other, or each started as its own task)
and the consumer child process (``latency_consumer``)."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.system.common import child_env
from bench.system.measure import Result

READY_TIMEOUT = 60.0
"""Seconds the child may take to print ``ready`` (a Kafka group join takes a few)."""
TICK = 0.001
"""Concurrent senders: the pacer wakes at most every this many seconds and starts the sends due (about 2 per
wake-up at 2,000 msg/s)."""


async def paced(rate: int, seconds: float, send: Callable[[int], Awaitable[None]]) -> tuple[int, float]:
    """Call ``send(i)`` ``rate * seconds`` times at ``rate`` per second, each awaited; (messages, seconds)."""
    n = int(rate * seconds)
    t0 = time.perf_counter()
    sent = 0
    while sent < n:
        due = min(n, int((time.perf_counter() - t0) * rate) + 1)
        while sent < due:
            await send(sent)
            sent += 1
        wait = t0 + sent / rate - time.perf_counter()
        if wait > 0:
            await asyncio.sleep(wait)
    return n, time.perf_counter() - t0


@dataclass
class InFlight:
    """Sends started and not finished, counted each time one starts (itself included)."""

    total: int = 0
    starts: int = 0
    peak: int = 0

    def started(self, now_in_flight: int) -> None:
        """One send started; ``now_in_flight`` of them are unfinished."""
        self.total += now_in_flight
        self.starts += 1
        self.peak = max(self.peak, now_in_flight)

    def into(self, r: Result) -> None:
        """Put the mean and peak into ``r``."""
        r.inflight_mean = self.total / self.starts if self.starts else 0.0
        r.inflight_max = self.peak


async def paced_tasks(rate: int, seconds: float, send: Callable[[int], Coroutine[Any, Any, None]], r: Result) -> None:
    """Concurrent senders: ``send(i)`` ``rate * seconds`` times at ``rate`` per second, each started as a task of its
    own when due (the pacer wakes every ``TICK`` at most and does not wait for earlier sends); waits for them all.
    Sets ``r.messages``, ``r.seconds`` (to the last send's end) and the sends in flight; raises the first error."""
    n = int(rate * seconds)
    pending: set[asyncio.Task[None]] = set()
    errors: list[BaseException] = []
    flight = InFlight()

    def finished(t: asyncio.Task[None]) -> None:
        pending.discard(t)
        exc = None if t.cancelled() else t.exception()
        if exc is not None:
            errors.append(exc)

    t0 = time.perf_counter()
    sent = 0
    try:
        while sent < n and not errors:
            due = min(n, int((time.perf_counter() - t0) * rate) + 1)
            while sent < due:
                task = asyncio.create_task(send(sent))
                pending.add(task)
                task.add_done_callback(finished)
                flight.started(len(pending))
                sent += 1
            await asyncio.sleep(max(TICK, t0 + sent / rate - time.perf_counter()))
        while pending:
            await asyncio.wait(set(pending))
    finally:
        for task in pending:
            task.cancel()
    if errors:
        raise RuntimeError(f"{len(errors)} of {sent} concurrent sends failed: {errors[0]!r}") from errors[0]
    r.messages, r.seconds = n, time.perf_counter() - t0
    flight.into(r)


def paced_sync(rate: int, seconds: float, send: Callable[[int], None], tick: float = 0.0) -> tuple[int, float]:
    """``paced`` for a blocking ``send`` (run it in a thread); ``tick``: sleep at least this long between wake-ups
    (``TICK`` for a ``send`` that only starts the send, as the concurrent senders' pacer does)."""
    n = int(rate * seconds)
    t0 = time.perf_counter()
    sent = 0
    while sent < n:
        due = min(n, int((time.perf_counter() - t0) * rate) + 1)
        while sent < due:
            send(sent)
            sent += 1
        wait = max(tick, t0 + sent / rate - time.perf_counter())
        if wait > 0:
            time.sleep(wait)
    return n, time.perf_counter() - t0


def stamp() -> str:
    """The ``ts`` property / header: wall-clock nanoseconds, taken just before a send."""
    return str(time.time_ns())


class LatencyChild:
    """A ``latency_consumer`` process: started, waited for until ready, stopped, its samples read back."""

    def __init__(self, tmp: Path, system: str, addr: str, topic: str, group: str, expect: int, *extra: str) -> None:
        self.out = tmp / f"latency-{system}-{group}.txt"
        self.log_path = tmp / f"latency-{system}-{group}.log"
        self.argv = [
            sys.executable, "-m", "bench.system.latency_consumer", "--system", system, "--addr", addr,
            "--topic", topic, "--group", group, "--expect", str(expect), "--out", str(self.out), *extra,
        ]  # fmt: skip
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        """Start the child and wait for its ``ready`` line."""
        with open(self.log_path, "ab") as log:
            self.proc = await asyncio.create_subprocess_exec(
                *self.argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=log,
                env=child_env(), start_new_session=True,
            )  # fmt: skip
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(self.proc.stdout.readline(), READY_TIMEOUT)
        if line.strip() != b"ready":
            await self.proc.wait()
            raise RuntimeError(f"latency consumer did not start ({line!r}); see {self.log_path}:\n{self.tail()}")

    def tail(self) -> str:
        """The end of the child's log."""
        with contextlib.suppress(OSError):
            return self.log_path.read_text(errors="replace")[-3000:]
        return ""

    async def finish(self, r: Result, grace: float = 10.0) -> None:
        """Give the child ``grace`` seconds to receive everything, then tell it to stop; read its samples into
        ``r`` (``latencies_ms``, ``received``) and add its CPU time to ``r.client_cpu``."""
        p = self.proc
        assert p is not None and p.stdin is not None and p.stdout is not None
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(p.wait()), grace)
        if p.returncode is None:
            with contextlib.suppress(OSError):
                p.stdin.write(b"stop\n")
                await p.stdin.drain()
                p.stdin.close()
        rest = await asyncio.wait_for(p.stdout.read(), 30)
        await asyncio.wait_for(p.wait(), 30)
        done = [ln.split() for ln in rest.decode().splitlines() if ln.startswith("done ")]
        if p.returncode != 0 or not done:
            raise RuntimeError(f"latency consumer failed (exit {p.returncode}); see {self.log_path}:\n{self.tail()}")
        r.client_cpu += float(done[-1][2])
        r.latencies_ms = [float(x) for x in self.out.read_text().split()]
        r.received = len(r.latencies_ms)

    def kill(self) -> None:
        """Stop the child if it still runs (its own PID only)."""
        if self.proc is not None and self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
