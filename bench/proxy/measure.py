"""The servers (name server, broker, proxy) and what a row measures: elapsed time and CPU time from ``/proc``."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.support.procs import Proc, broker_proc, namesrv_proc, proxy_proc

CLK_TCK = os.sysconf("SC_CLK_TCK")


def proc_cpu(pid: int) -> float:
    """utime + stime of a process (all its threads) and of the children it waited for, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        rest = f.read().rpartition(")")[2].split()
    return sum(int(x) for x in rest[11:15]) / CLK_TCK


def pid(p: Proc) -> int:
    """The process id of a started Proc."""
    assert p.popen is not None
    return p.popen.pid


@dataclass
class Sample:
    """One row of one round."""

    count: int
    """Messages the rate counts (the delivered ones in the filtered rows)."""
    scanned: int
    """Messages the row went through (the whole topic in the filtered rows): CPU is per scanned message."""
    elapsed: float
    broker_cpu: float
    proxy_cpu: float
    client_cpu: float
    note: str = ""
    """What else the row saw (a 5.x consumer's receives)."""

    @property
    def rate(self) -> float:
        """Messages per second."""
        return self.count / self.elapsed if self.elapsed > 0 else 0.0

    def us(self, cpu: float) -> float:
        """Microseconds of ``cpu`` seconds per scanned message."""
        return cpu * 1e6 / self.scanned if self.scanned else 0.0


class Servers:
    """A name server, a broker (ASYNC_FLUSH) and a proxy on free ports of 127.0.0.1, files under ``tmp``."""

    def __init__(self, tmp: Path) -> None:
        self.ns = namesrv_proc(tmp, "namesrv")
        self.broker = broker_proc(tmp, self.ns.addr, "broker-a")
        self.proxy = proxy_proc(tmp, self.ns.addr)

    def start(self) -> None:
        """Start all three; each is serving when this returns."""
        self.ns.start()
        self.broker.start()
        self.proxy.start()

    def stop(self) -> None:
        """Stop those started (SIGTERM to each PID, SIGKILL after 15 s)."""
        for p in (self.proxy, self.broker, self.ns):
            p.stop()

    def cpu(self) -> tuple[float, float]:
        """The broker's and the proxy's CPU seconds so far."""
        return proc_cpu(pid(self.broker)), proc_cpu(pid(self.proxy))


@dataclass
class Measured:
    """What ``window`` measured of its block: elapsed seconds and CPU seconds of the broker, proxy and this process."""

    elapsed: float = 0.0
    broker_cpu: float = 0.0
    proxy_cpu: float = 0.0
    client_cpu: float = 0.0

    def sample(self, count: int, scanned: int) -> Sample:
        """The row's Sample."""
        return Sample(count, scanned, self.elapsed, self.broker_cpu, self.proxy_cpu, self.client_cpu)


@contextlib.contextmanager
def window(servers: Servers) -> Iterator[Measured]:
    """Measure the block: its elapsed time, the broker's and the proxy's CPU time, and this process's (the 4.x
    client's: nothing else runs here while a row is timed)."""
    out = Measured()
    b0, p0 = servers.cpu()
    c0, t0 = time.process_time(), time.perf_counter()
    yield out
    t1, c1 = time.perf_counter(), time.process_time()
    b1, p1 = servers.cpu()
    out.elapsed, out.broker_cpu, out.proxy_cpu, out.client_cpu = t1 - t0, b1 - b0, p1 - p0, c1 - c0
