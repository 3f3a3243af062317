"""The parent's side of the load children (``bench.topics.worker``): start them on slices of the topics, start
them together, gather what they did."""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from bench.system.common import child_env

READY_TIMEOUT = 60.0


@dataclass
class LoadResult:
    """One phase of every child: messages, requests, seconds from the first child's start to the last one's end."""

    messages: int = 0
    requests: int = 0
    seconds: float = 0.0
    errors: int = 0
    samples: list[str] = field(default_factory=list)

    @property
    def rate(self) -> float:
        """Messages per second."""
        return self.messages / self.seconds if self.seconds > 0 else 0.0

    @property
    def request_rate(self) -> float:
        """Requests per second."""
        return self.requests / self.seconds if self.seconds > 0 else 0.0


def slices(n: int, parts: int) -> list[tuple[int, int]]:
    """``(first, count)`` of ``parts`` near-equal slices of ``range(n)``, empty ones left out."""
    out = []
    for i in range(parts):
        first, end = n * i // parts, n * (i + 1) // parts
        if end > first:
            out.append((first, end - first))
    return out


async def run_load(mode: str, addr: str, n: int, tmp: Path, procs: int, extra: list[str],
                   timeout: float) -> LoadResult:  # fmt: skip
    """``mode`` (produce / consume) over topics ``0 .. n-1`` from ``procs`` children, started together once every
    one is connected."""
    kids: list[asyncio.subprocess.Process] = []
    logs = []
    try:
        for first, count in slices(n, procs):
            log = open(tmp / f"{mode}-{first}.log", "ab")  # noqa: SIM115 (the child's stderr, closed below)
            logs.append(log)
            kids.append(await asyncio.create_subprocess_exec(
                sys.executable, "-m", "bench.topics.worker", "--addr", addr, "--mode", mode, "--first", str(first),
                "--count", str(count), *extra, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=log, env=child_env()))  # fmt: skip
        for k in kids:
            assert k.stdout is not None
            line = await asyncio.wait_for(k.stdout.readline(), READY_TIMEOUT)
            if line.strip() != b"ready":
                raise RuntimeError(f"a {mode} child did not start ({line!r}); see {tmp}/{mode}-*.log")
        for k in kids:
            assert k.stdin is not None
            k.stdin.write(b"go\n")
            await k.stdin.drain()
        docs = []
        for k in kids:
            assert k.stdout is not None
            line = await asyncio.wait_for(k.stdout.readline(), timeout)
            if not line:
                raise RuntimeError(f"a {mode} child ended without a result; see {tmp}/{mode}-*.log")
            docs.append(orjson.loads(line))
            await k.wait()
    finally:
        for k in kids:
            if k.returncode is None:
                k.kill()
                await k.wait()
        for log in logs:
            log.close()
    r = LoadResult()
    if docs:
        r.seconds = max(d["t1"] for d in docs) - min(d["t0"] for d in docs)
    for d in docs:
        r.messages += d["messages"]
        r.requests += d["requests"]
        r.errors += d["errors"]
        r.samples += d["samples"]
    return r
