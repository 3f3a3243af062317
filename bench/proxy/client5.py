"""A ``bench/proxy_driver.py`` process under the 5.x client's interpreter, and its JSON lines."""

from __future__ import annotations

import asyncio
import json
import os
import queue
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

DRIVER = Path(__file__).resolve().parent.parent / "proxy_driver.py"


class BenchError(RuntimeError):
    """A row did not do what it must (a failed send, a wrong count, a driver that died): the bench stops."""


class Driver:
    """One driver process; ``expect`` waits for its next line of an event, ``go`` starts its timed part."""

    def __init__(self, python: Path, args: list[str], log: Path, home: Path) -> None:
        home.mkdir(parents=True, exist_ok=True)
        self.log = log
        self.name = log.stem.removeprefix("driver-")
        self.launched = time.perf_counter()
        env = {**os.environ, "HOME": str(home)}  # the client logs to ~/logs/rocketmq_python/: keep that in tmp
        with open(log, "ab") as err:
            self.popen = subprocess.Popen([str(python), str(DRIVER), *args], stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, stderr=err, text=True, env=env)  # fmt: skip
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, name=f"read {self.name}", daemon=True).start()

    def _read(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def expect(self, event: str, timeout: float = 300.0) -> dict[str, Any]:
        """The next line of ``event``; an ``error`` line, the driver's exit or ``timeout`` s raise BenchError."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise BenchError(f"5.x driver {self.name} sent no {event!r} line in {timeout:.0f} s") from None
            if line is None:
                code = self.popen.wait()
                raise BenchError(f"5.x driver {self.name} exited with {code} before {event!r}:\n{self.tail()}")
            try:
                got = json.loads(line)
            except ValueError:
                continue  # not one of ours
            if got.get("event") == "error":
                raise BenchError(f"5.x driver {self.name}: {got.get('error')}\n{self.tail()}")
            if got.get("event") == event:
                return dict(got)

    async def aexpect(self, event: str, timeout: float = 300.0) -> dict[str, Any]:
        """``expect`` without blocking the event loop."""
        return await asyncio.to_thread(self.expect, event, timeout)

    def go(self) -> None:
        """Start the timed part."""
        assert self.popen.stdin is not None
        self.popen.stdin.write("go\n")
        self.popen.stdin.flush()

    def tail(self) -> str:
        """The end of what the driver wrote on stderr."""
        return self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""

    def stop(self) -> None:
        """Kill it if it still runs (after an error), by its PID."""
        if self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait()
