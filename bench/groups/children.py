"""The parent's side of the consumer children (``bench.groups.consumers``): start, wait ready, rounds, stop."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

from bench.system.common import child_env

READY_TIMEOUT = 180.0


@dataclass
class RoundResult:
    """One round of every child: when the last group was complete, messages delivered, consumers' CPU (or, as a
    child's ``total``, those since its start)."""

    t_last: float = 0.0
    delivered: int = 0
    cpu: float = 0.0
    wrong: int = 0
    dups: int = 0


class Child:
    """One consumer process of ``count`` groups from index ``first``."""

    def __init__(self, tmp: Path, namesrv: str, first: int, count: int, extra: list[str]) -> None:
        self.first, self.count = first, count
        self.log_path = tmp / f"consumers-{first}.log"
        self.argv = [sys.executable, "-m", "bench.groups.consumers", "--namesrv", namesrv, "--first", str(first),
                     "--count", str(count), *extra]  # fmt: skip
        self.proc: asyncio.subprocess.Process | None = None
        self.total = RoundResult()

    @property
    def pid(self) -> int:
        """The child's PID (0 before it starts)."""
        return self.proc.pid if self.proc else 0

    async def start(self) -> None:
        """Start the process (``ready`` is awaited by ``ready``)."""
        with open(self.log_path, "ab") as log:
            self.proc = await asyncio.create_subprocess_exec(
                *self.argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=log,
                env=child_env(), start_new_session=True,
            )  # fmt: skip

    async def _line(self, want: str, timeout: float) -> list[str]:
        assert self.proc is not None and self.proc.stdout is not None
        line = await asyncio.wait_for(self.proc.stdout.readline(), timeout)
        words = line.decode().split()
        if not words or words[0] != want:
            raise RuntimeError(f"consumer child {self.first} said {line!r}, not {want!r}; see {self.log_path}:\n"
                               f"{self.tail()}")  # fmt: skip
        return words[1:]

    async def ready(self) -> None:
        """Wait until every consumer of the child owns every queue."""
        self.total.cpu = float((await self._line("ready", READY_TIMEOUT))[0])

    def send(self, line: str) -> None:
        """Write a command line to the child."""
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(f"{line}\n".encode())

    async def done(self, timeout: float) -> RoundResult:
        """The child's ``done`` line of a round, its counts less the previous round's."""
        t_last, delivered, cpu, wrong, dups = await self._line("done", timeout)
        now = RoundResult(float(t_last), int(delivered), float(cpu), int(wrong), int(dups))
        was, self.total = self.total, now
        return RoundResult(now.t_last, now.delivered - was.delivered, now.cpu - was.cpu, now.wrong - was.wrong,
                           now.dups - was.dups)  # fmt: skip

    async def stop(self, timeout: float = 20.0) -> None:
        """``stop``, wait for the exit; SIGKILL the child's process group (its own session) if it hangs."""
        if self.proc is None or self.proc.returncode is not None:
            return
        with contextlib.suppress(OSError, RuntimeError, ConnectionError):
            self.send("stop")
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        try:
            await asyncio.wait_for(self.proc.wait(), timeout)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            await self.proc.wait()

    def tail(self, limit: int = 3000) -> str:
        """The end of the child's stderr log."""
        try:
            return self.log_path.read_text(errors="replace")[-limit:]
        except FileNotFoundError:
            return ""


class Children:
    """The consumer processes of one row: ``per_child`` groups each."""

    def __init__(self, tmp: Path, namesrv: str, groups: int, per_child: int, extra: list[str]) -> None:
        self.kids = [Child(tmp, namesrv, first, min(per_child, groups - first), extra)
                     for first in range(0, groups, per_child)]  # fmt: skip

    async def start(self) -> None:
        """Start every child and wait until all are ready."""
        for k in self.kids:
            await k.start()
        await asyncio.gather(*(k.ready() for k in self.kids))

    def expect(self, end: int) -> None:
        """Start a round: messages ``0 .. end-1`` will have been sent."""
        for k in self.kids:
            k.send(f"expect {end}")

    async def done(self, timeout: float) -> RoundResult:
        """Wait for every child's round; the last completion, sums of the rest."""
        rs = await asyncio.gather(*(k.done(timeout) for k in self.kids))
        return RoundResult(max(r.t_last for r in rs), sum(r.delivered for r in rs), sum(r.cpu for r in rs),
                           sum(r.wrong for r in rs), sum(r.dups for r in rs))  # fmt: skip

    async def stop(self) -> None:
        """Stop every child (by its PID / process group)."""
        await asyncio.gather(*(k.stop() for k in self.kids))

    @property
    def pids(self) -> list[int]:
        """The children's PIDs."""
        return [k.pid for k in self.kids]
