"""The name server and broker of one row: start without time limits, stop, kill -9, and what /proc and the disk
say about them."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from tests.support.procs import Proc, broker_proc, namesrv_proc

from bench.system.measure import proc_cpu

BROKER = "broker-a"
COMMITLOG_SEGMENT = 1 << 30
"""The broker's default commit-log segment (tests/support/procs.py's 4 MiB is for tests)."""
REGISTER_INTERVAL_S = 30
"""The broker's default registration period (the test helper's 2 s would re-send every topic 15x as often)."""


def launch(proc: Proc) -> None:
    """Start ``proc`` as ``Proc.start`` does (same command, environment and log), without waiting: the caller
    polls the state it wants, with its own limit (a broker recovering 100,000 topics may take long)."""
    merged = {"SIEVEMQ_HTTP_LISTEN_PORT": "0", **os.environ, "PYTHONUNBUFFERED": "1", **proc.env}
    env = {k: v for k, v in merged.items() if v is not None}
    proc.log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(proc.log_path, "ab") as log:
        proc.popen = subprocess.Popen(
            [*proc.prefix, sys.executable, "-m", "sievemq.cli", "--log-level", "INFO", *proc.args],
            stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
        )  # fmt: skip


def pid_of(proc: Proc) -> int:
    """The running process's PID (RuntimeError when it is not running)."""
    if proc.popen is None or proc.popen.poll() is not None:
        code = proc.popen.returncode if proc.popen is not None else None
        raise RuntimeError(f"{proc.args[0]} is not running (exit status {code}); see {proc.log_path}")
    return proc.popen.pid


async def wait_for(what: str, check: Callable[[], Awaitable[bool]], timeout: float, proc: Proc | None = None,
                   every: float = 0.02) -> float:  # fmt: skip
    """Poll the coroutine function ``check`` (returning true when the state is reached; an exception counts as
    not yet) until it is; returns the seconds it took. TimeoutError past ``timeout``, RuntimeError when ``proc``
    exits meanwhile."""
    t0 = time.monotonic()
    last = ""
    while True:
        try:
            if await check():
                return time.monotonic() - t0
        except Exception as e:  # not there yet (connection refused, topic not yet known...)
            last = f"{type(e).__name__}: {e}"
        if proc is not None:
            pid_of(proc)
        if time.monotonic() - t0 > timeout:
            raise TimeoutError(f"{what}: not reached in {timeout:.0f} s ({last or 'no answer yet'})")
        await asyncio.sleep(every)


async def listening(port: int) -> bool:
    """Whether something accepts connections on 127.0.0.1:port."""
    _, w = await asyncio.open_connection("127.0.0.1", port)
    w.close()
    return True


def stop(proc: Proc, timeout: float = 600.0) -> float:
    """SIGTERM and wait (a clean stop); the seconds it took (SIGKILL past ``timeout``)."""
    if proc.popen is None or proc.popen.poll() is not None:
        return 0.0
    t0 = time.monotonic()
    proc.popen.send_signal(signal.SIGTERM)
    try:
        proc.popen.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.popen.kill()
        proc.popen.wait()
    return time.monotonic() - t0


def kill9(proc: Proc) -> None:
    """SIGKILL and reap."""
    if proc.popen is not None and proc.popen.poll() is None:
        proc.popen.send_signal(signal.SIGKILL)
        proc.popen.wait()


def servers(tmp: Path, config: Path) -> tuple[Proc, Proc]:
    """A name server and a broker (store under ``tmp/broker-a``, settings from ``config``), not started."""
    ns = namesrv_proc(tmp, "ns")
    broker = broker_proc(tmp, ns.addr, BROKER, "--config", str(config),
                         "--mapped-file-size-commitlog", str(COMMITLOG_SEGMENT),
                         "--register-broker-interval-seconds", str(REGISTER_INTERVAL_S))  # fmt: skip
    return ns, broker


@dataclass
class ProcStats:
    """One process as /proc shows it."""

    rss_kib: int = 0
    rss_file_kib: int = 0
    hwm_kib: int = 0
    maps: int = 0
    """Lines of /proc/<pid>/maps: its memory mappings (vm.max_map_count bounds them)."""
    fds: int = 0
    cpu_s: float = 0.0


def proc_stats(pid: int) -> ProcStats:
    """RSS (and its file part), peak RSS, mappings, open descriptors and CPU seconds of ``pid``."""
    s = ProcStats(cpu_s=proc_cpu(pid))
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key == "VmRSS":
                s.rss_kib = int(value.split()[0])
            elif key == "RssFile":
                s.rss_file_kib = int(value.split()[0])
            elif key == "VmHWM":
                s.hwm_kib = int(value.split()[0])
    with open(f"/proc/{pid}/maps", "rb") as f:
        s.maps = sum(1 for _ in f)
    s.fds = len(os.listdir(f"/proc/{pid}/fd"))
    return s


@dataclass
class Peaks:
    """The highest descriptors, mappings and RSS a process showed in samples taken every ``every`` seconds (a
    snapshot after a phase misses what a cache bounds only on average)."""

    pid: int
    every: float = 0.5
    fds: int = 0
    maps: int = 0
    rss_kib: int = 0
    samples: int = 0

    def sample(self) -> None:
        """One sample (nothing when the process is gone)."""
        try:
            s = proc_stats(self.pid)
        except (FileNotFoundError, ProcessLookupError):
            return
        self.fds, self.maps, self.rss_kib = max(self.fds, s.fds), max(self.maps, s.maps), max(self.rss_kib, s.rss_kib)
        self.samples += 1

    async def run(self) -> None:
        """Sample until cancelled."""
        while True:
            self.sample()
            await asyncio.sleep(self.every)


@dataclass
class DiskUse:
    """A folder's files: allocated bytes (``st_blocks * 512``), apparent bytes, files."""

    allocated: int = 0
    apparent: int = 0
    files: int = 0


def disk_use(root: Path) -> DiskUse:
    """What ``du`` and ``du --apparent-size`` say of ``root`` (every file under it; nothing when it is missing)."""
    out = DiskUse()
    stack = [str(root)]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except FileNotFoundError:
            continue
        for e in entries:
            if e.is_dir(follow_symlinks=False):
                stack.append(e.path)
            elif e.is_file(follow_symlinks=False):
                st = e.stat(follow_symlinks=False)
                out.allocated += st.st_blocks * 512
                out.apparent += st.st_size
                out.files += 1
    return out


def free_bytes(path: Path) -> int:
    """Bytes free for an unprivileged process on ``path``'s filesystem."""
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def max_map_count() -> int:
    """vm.max_map_count (0 when unknown): a process's mappings above it fail with ENOMEM."""
    try:
        return int(Path("/proc/sys/vm/max_map_count").read_text())
    except (OSError, ValueError):
        return 0
