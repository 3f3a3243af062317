"""The Java driver (``BenchDriver.java``): compiled with javac against RocketMQ's client jars into
``.interop/bench-driver/`` (again when the source is newer), run as one JVM that takes one command per line and
answers JSON lines; each command's CPU is read from /proc around its timed part."""

from __future__ import annotations

import json
import queue
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.rocketmq import interop_dir, java

from bench.system.measure import proc_cpu

SOURCE = Path(__file__).with_name("BenchDriver.java")
REBALANCE_MIN_INTERVAL_MS = 100
JVM = [
    "-server",
    "-Xms512m",
    "-Xmx512m",
    "-XX:+UseG1GC",
    "-XX:-UsePerfData",
    "-Djava.net.preferIPv4Stack=true",
    f"-Drocketmq.client.rebalance.minInterval={REBALANCE_MIN_INTERVAL_MS}",
]
"""The driver's JVM: a fixed heap, G1, the client's defaults but one. The client's first rebalance waits
``rocketmq.client.rebalance.minInterval`` (1000 ms by default) after the client instance was created, just when its
first scheduled heartbeat runs (1000 ms): when the two meet, one of them fails to take the heartbeat lock, and
the new group's pulls wait for the next rebalance (20 s) or are refused as SUBSCRIPTION_NOT_LATEST until the next
heartbeat (30 s), on either broker, at random. 100 ms keeps the two apart (and a consumer's start short)."""
NOISE = (
    "execute the pull request exception",
    "PullMessageServiceScheduledThread has shutdown",
    "RouteInfoFromNameServer is not exist",
    "didn't terminate",
    "No matched consumer for the PullRequest",
    "removeMessage exception",
    "so do flow control",
)
"""Client log warnings of every run: pulls and consume threads cut short by a consumer's shutdown, a new group's
retry topic without a route, a consumer's own flow control (more than 1,000 messages cached for a queue)."""


def compile_driver(lib: Path) -> Path:
    """The folder of the compiled driver, compiled first when missing or older than its source."""
    out = interop_dir() / "bench-driver"
    cls = out / "BenchDriver.class"
    if cls.is_file() and cls.stat().st_mtime >= SOURCE.stat().st_mtime:
        return out
    javac = shutil.which("javac")
    if javac is None:
        raise SystemExit("javac is not on PATH (a JDK 17 compiles bench/rocketmq/BenchDriver.java)")
    out.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([javac, "-nowarn", "-encoding", "UTF-8", "-d", str(out), "-cp", f"{lib}/*", str(SOURCE)],
                          capture_output=True, text=True, check=False)  # fmt: skip
    if proc.returncode != 0:
        raise SystemExit(f"javac failed:\n{proc.stdout}{proc.stderr}")
    return out


@dataclass
class Outcome:
    """One command against one system: the driver's result line and the CPU seconds each watched process spent
    in the timed part (from the driver's ``start`` event to its result line)."""

    system: str
    phase: str
    line: dict[str, Any]
    cpu: dict[str, float] = field(default_factory=dict)

    @property
    def messages(self) -> int:
        """Messages the phase counted (sent with SEND_OK, received, latency samples)."""
        return int(self.line.get("messages", 0))

    @property
    def rate(self) -> float:
        """Messages per second."""
        return float(self.line.get("rate") or 0.0)

    @property
    def failed(self) -> bool:
        """The phase did not do its work (a consumer stalled, an exception), or a send failed."""
        return bool(self.line.get("failed")) or bool(self.line.get("errors")) or bool(self.line.get("statuses"))

    def us_per_msg(self, role: str) -> float:
        """CPU microseconds per message of ``role`` (``broker``, ``namesrv``, ``client``); NaN when not watched."""
        if role not in self.cpu or not self.messages:
            return float("nan")
        return self.cpu[role] * 1e6 / self.messages

    def ms(self, key: str) -> float:
        """A latency figure of the line (``p50_ms``...), NaN when absent."""
        v = self.line.get(key)
        return float("nan") if v is None else float(v)


class Driver:
    """One running driver JVM."""

    def __init__(self, classes: Path, lib: Path, home: Path) -> None:
        self.home = home
        home.mkdir(parents=True, exist_ok=True)
        self.args = [java(), *JVM, f"-Duser.home={home}", "-cp", f"{classes}:{lib}/*", "BenchDriver"]
        self.popen: subprocess.Popen[bytes] | None = None
        self.lines: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.hello: dict[str, Any] = {}

    @property
    def pid(self) -> int:
        """The driver JVM's PID."""
        assert self.popen is not None
        return self.popen.pid

    @property
    def client_log(self) -> Path:
        """The Java client's main log (pull errors of a consumer are only in its logs). With the broker's jars on
        the class path it logs through their configuration: ``broker_default.log`` beside the others."""
        return self.home / "logs" / "rocketmqlogs" / "broker_default.log"

    def start(self, timeout: float = 60.0) -> None:
        """Start the JVM and wait for its ``ready`` line."""
        with open(self.home / "driver.err", "ab") as err:
            self.popen = subprocess.Popen(self.args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                                          start_new_session=True)  # fmt: skip
        threading.Thread(target=self._read, daemon=True).start()
        self.hello = self._next(timeout)

    def _read(self) -> None:
        assert self.popen is not None and self.popen.stdout is not None
        for raw in self.popen.stdout:
            if raw.startswith(b"{"):
                self.lines.put(json.loads(raw))
        self.lines.put(None)

    def _next(self, timeout: float) -> dict[str, Any]:
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"the driver said nothing for {timeout:.0f} s") from None
        if line is None:
            raise RuntimeError(f"the driver exited ({self.popen.poll() if self.popen else '?'}):\n{self.stderr()}")
        return line

    def run(self, system: str, command: str, watch: dict[str, int], timeout: float = 600.0) -> Outcome:
        """Send ``command`` (``sys=system`` added) and wait for its result; CPU of ``watch`` (role: PID) and of the
        driver itself (``client``) over the timed part."""
        assert self.popen is not None and self.popen.stdin is not None
        pids = {**watch, "client": self.pid}
        self.popen.stdin.write(f"{command} sys={system}\n".encode())
        self.popen.stdin.flush()
        before: dict[str, float] = {}
        deadline = time.monotonic() + timeout
        while True:
            line = self._next(max(1.0, deadline - time.monotonic()))
            if line.get("event") == "start":
                before = {role: proc_cpu(pid) for role, pid in pids.items()}
                continue
            after = {role: proc_cpu(pid) for role, pid in pids.items()}
            cpu = {role: after[role] - before[role] for role in before}
            return Outcome(system, str(line.get("phase")), line, cpu)

    def stderr(self) -> str:
        """The tail of what the JVM printed on stderr."""
        try:
            return (self.home / "driver.err").read_text(errors="replace")[-4000:]
        except FileNotFoundError:
            return ""

    def client_errors(self, limit: int = 8) -> list[str]:
        """The last WARN / ERROR lines of the Java client's logs (what a consumer's failed pulls say), without those
        every run has (pulls cut by a consumer's shutdown, retry topics without a route yet)."""
        lines: list[str] = []
        for path in sorted(self.client_log.parent.glob("*.log")):
            text = path.read_text(errors="replace")
            lines += [ln for ln in text.splitlines() if (" WARN " in ln or " ERROR " in ln)
                      and not any(n in ln for n in NOISE)]  # fmt: skip
        return lines[-limit:]

    def stop(self, now: bool = False) -> None:
        """``quit``, then SIGKILL when it has not ended within 20 s; ``now``: SIGKILL at once (an interrupted run:
        the driver reads ``quit`` only after its current phase)."""
        if self.popen is None or self.popen.poll() is not None:
            return
        if now:
            self.popen.send_signal(signal.SIGKILL)
            self.popen.wait()
            return
        try:
            assert self.popen.stdin is not None
            self.popen.stdin.write(b"quit\n")
            self.popen.stdin.close()
            self.popen.wait(20)
        except (OSError, subprocess.TimeoutExpired):
            self.popen.send_signal(signal.SIGKILL)
            self.popen.wait()
