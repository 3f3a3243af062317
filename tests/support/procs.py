"""Start real sievemq processes on 127.0.0.1 with free ports, for integration and interop tests."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PORTS_LOW, PORTS_HIGH = 10_000, 32_000
"""Ports tests hand out: below the kernel's ephemeral range (32768 and up on Linux), so no outgoing connection's
local port takes one between ``free_port`` and the server's bind."""
_PORTS_PER_WORKER = 2_000
_next_port: list[int] = []


def worker_index() -> int:
    """This pytest process's index among pytest-xdist workers (``gw3`` is 3), 0 without xdist."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    return int(name[2:]) if name[2:].isdigit() else 0


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now, with the port after it free too: a broker listens on port + 1 for
    replication (its HA port) unless told otherwise. (Port - 2, RocketMQ's VIP channel, is left alone.)

    Each pytest-xdist worker takes ports from its own stretch of ``PORTS_LOW``..``PORTS_HIGH``, in turn, so two
    workers never hand out the same port and a port just handed out is not handed out again soon."""
    if not _next_port:
        base = PORTS_LOW + worker_index() * _PORTS_PER_WORKER % (PORTS_HIGH - PORTS_LOW)
        _next_port.append(base + os.getpid() % 97 * 2)
    base = PORTS_LOW + worker_index() * _PORTS_PER_WORKER % (PORTS_HIGH - PORTS_LOW)
    for _ in range(_PORTS_PER_WORKER):
        port = _next_port[0]
        _next_port[0] = port + 3 if port + 3 < base + _PORTS_PER_WORKER - 1 else base
        if _bindable(port) and _bindable(port + 1):
            return port
    raise RuntimeError(f"no free port pair in {base}..{base + _PORTS_PER_WORKER}")


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def wait_port(
    port: int, timeout: float = 20.0, proc: subprocess.Popen[bytes] | None = None, host: str = "127.0.0.1"
) -> None:
    """Wait until something accepts connections on host:port."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before listening on {port}")
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listens on {host}:{port} after {timeout}s")


@dataclass
class Proc:
    """A running sievemq process."""

    args: list[str]
    port: int
    log_path: Path
    popen: subprocess.Popen[bytes] | None = None
    extra: dict[str, object] = field(default_factory=dict)
    ready_text: str | None = None
    """Printed by the process once it serves (a broker after its first registration); waited for after the port."""
    nofile: int | None = None
    """A soft RLIMIT_NOFILE for the process (None: it inherits the test's)."""
    host: str = "127.0.0.1"
    """Where the test reaches it (a network namespace's address when ``prefix`` runs it in one)."""
    prefix: list[str] = field(default_factory=list)
    """Put before the command (``Host.prefix()``: run inside a network namespace)."""
    env: dict[str, str] = field(default_factory=dict)
    """Merged into the child's environment (e.g. ``PYTHONPATH`` to run another checkout's sources)."""

    @property
    def addr(self) -> str:
        """``host:port``."""
        return f"{self.host}:{self.port}"

    def start(self) -> Proc:
        """Start and wait until it listens."""
        # No HTTP port unless a test asks for one (--http-listen-port): the default port follows the role's listen
        # port, which the tests pick at random, so it could be taken by another test's process.
        # ``self.env`` may remove a variable by giving it None.
        merged = {"SIEVEMQ_HTTP_LISTEN_PORT": "0", **os.environ, "PYTHONUNBUFFERED": "1", **self.env}
        env = {k: v for k, v in merged.items() if v is not None}
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")  # noqa: SIM115 (kept open for the child)
        log_start = log.tell()
        self.popen = subprocess.Popen(
            [*self.prefix, sys.executable, "-m", "sievemq.cli", "--log-level", "INFO", *self.args],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
            preexec_fn=_soft_nofile(self.nofile) if self.nofile is not None else None,
        )
        wait_port(self.port, proc=self.popen, host=self.host)
        if self.ready_text is not None:
            self._wait_ready(log_start)
        return self

    def _wait_ready(self, log_start: int, timeout: float = 20.0) -> None:
        """Wait until the log, from ``log_start`` on, holds ``ready_text``."""
        assert self.ready_text is not None and self.popen is not None
        deadline = time.monotonic() + timeout
        while self.ready_text.encode() not in self.log_path.read_bytes()[log_start:]:
            if self.popen.poll() is not None:
                raise RuntimeError(f"process exited with {self.popen.returncode} before it was ready")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.args[0]} did not print {self.ready_text!r} within {timeout}s")
            time.sleep(0.02)

    def stop(self, timeout: float = 15.0) -> int:
        """SIGTERM and wait (a clean stop)."""
        if self.popen is None or self.popen.poll() is not None:
            return self.popen.returncode if self.popen else 0
        self.popen.send_signal(signal.SIGTERM)
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            return self.popen.wait()

    def kill9(self) -> None:
        """SIGKILL: an unclean stop."""
        if self.popen is not None and self.popen.poll() is None:
            self.popen.send_signal(signal.SIGKILL)
            self.popen.wait()

    def log(self) -> str:
        """What the process printed so far."""
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""


def _soft_nofile(limit: int) -> Callable[[], None]:
    """A ``preexec_fn`` that lowers the child's soft RLIMIT_NOFILE to ``limit`` (the hard limit stays)."""

    def apply() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))

    return apply


def namesrv_proc(tmp: Path, name: str = "ns", *extra: str) -> Proc:
    """A name server on a free port (not started); ``extra`` flags are added to its command line."""
    port = free_port()
    return Proc(["namesrv", "--listen-port", str(port), *extra], port, tmp / f"{name}.log")


def broker_proc(
    tmp: Path,
    namesrv_addr: str,
    name: str = "broker-a",
    *extra: str,
    flush: str = "ASYNC_FLUSH",
    port: int | None = None,
    ha_port: int | None = None,
    host: str | None = None,
    prefix: list[str] | None = None,
    label: str | None = None,
) -> Proc:
    """A broker on a free port (and a free HA port) with its store under ``tmp/label`` (not started).

    ``label`` (default: ``name``) also names the log: a master and its slave share a name, not a label. ``host`` and
    ``prefix``: listen on and advertise ``host``, run under ``prefix`` (a network namespace).
    """
    label = label or name
    port = port or free_port()
    where = ["--listen-host", host, "--broker-ip", host] if host else []
    args = [
        "broker",
        *where,
        "--ha-listen-port",
        str(ha_port or free_port()),
        "--broker-name",
        name,
        "--listen-port",
        str(port),
        "--namesrv-addr",
        namesrv_addr,
        "--store-path-root-dir",
        str(tmp / label),
        "--flush-disk-type",
        flush,
        "--mapped-file-size-commitlog",
        str(4 * 1024 * 1024),
        "--register-broker-interval-seconds",
        "2",
        *extra,
    ]
    log = tmp / f"{label}.log"
    return Proc(args, port, log, ready_text=f"sievemq broker {name} listening", host=host or "127.0.0.1",
                prefix=prefix or [])  # fmt: skip


def dev_proc(tmp: Path, *extra: str, http: bool | None = True) -> Proc:
    """``sievemq dev`` on free ports (not started); ``extra['namesrv']`` is its name server address,
    ``extra['http']`` the base URL of its HTTP port (/metrics, /healthz). ``http`` False: no HTTP port
    (``--http-port 0``); None: no ``--http-port`` flag at all (a checkout from before it, a benchmark's baseline)."""
    ns_port, br_port, grpc_port, http_port = free_port(), free_port(), free_port(), free_port()
    http_args = {True: ["--http-port", str(http_port)], False: ["--http-port", "0"], None: []}[http]
    p = Proc(
        ["dev", "--data", str(tmp / "dev-data"), "--namesrv-port", str(ns_port), "--broker-port", str(br_port),
         "--grpc-port", str(grpc_port), *http_args, *extra],
        br_port,
        tmp / "dev.log",
        ready_text="Press Ctrl-C to stop.",
    )
    p.extra["namesrv"] = f"127.0.0.1:{ns_port}"
    p.extra["namesrv_port"] = ns_port
    p.extra["grpc"] = f"127.0.0.1:{grpc_port}"
    if http:
        p.extra["http"] = f"http://127.0.0.1:{http_port}"
    return p


def proxy_proc(tmp: Path, namesrv_addr: str, name: str = "proxy", *extra: str) -> Proc:
    """``sievemq proxy`` (gRPC for 5.x clients) on a free port in front of ``namesrv_addr`` (not started); ``extra``
    flags are added."""
    port = free_port()
    args = ["proxy", "--namesrv-addr", namesrv_addr, "--listen-port", str(port), *extra]
    return Proc(args, port, tmp / f"{name}.log", ready_text="listening on")


def attach_process_logs(report: Any, procs: Iterable[Proc], limit: int = 20_000) -> None:
    """Add the tail of each process's log to a failed pytest report."""
    for proc in procs:
        text = proc.log()
        if len(text) > limit:
            text = "...\n" + text[-limit:]
        report.sections.append((f"process log {proc.log_path.name} ({' '.join(proc.args[:1])})", text))
