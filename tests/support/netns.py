"""Several hosts on one machine: Linux network namespaces joined by a bridge, made and removed by the test.

Each ``Host`` is a namespace with one veth leg on a private bridge and an address in ``10.231.<net>.0/24`` (a range
used only inside these namespaces); the test's own process reaches every host through the bridge's address
``10.231.<net>.254``. Faults: ``link_down``/``link_up`` (a partition), ``delay`` (``tc netem``, where the kernel
has it). ``hosts(n)`` is a context manager that always removes everything it made, and raises ``NoNamespaces``
where namespaces cannot be made (not root, no ``ip``): callers fall back to several processes on 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Host", "NoNamespaces", "hosts", "loopback_only", "netem_available"]


class NoNamespaces(RuntimeError):
    """Network namespaces cannot be made here (the reason is the message)."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=10)


@dataclass(frozen=True)
class Host:
    """One namespace: ``ns`` its name, ``ip`` its address, ``veth`` its leg's name on the bridge side."""

    ns: str
    ip: str
    veth: str

    def prefix(self) -> list[str]:
        """The command prefix that runs a program inside this host."""
        return ["ip", "netns", "exec", self.ns]

    def link_down(self) -> None:
        """Cut this host off the network (its processes keep running)."""
        _ip("link", "set", self.veth, "down")

    def link_up(self) -> None:
        """Reconnect it."""
        _ip("link", "set", self.veth, "up")

    def delay(self, ms: int) -> None:
        """Delay every packet leaving the bridge towards this host by ``ms`` (``tc netem``)."""
        subprocess.run(["tc", "qdisc", "replace", "dev", self.veth, "root", "netem", "delay", f"{ms}ms"],
                       capture_output=True, text=True, check=True, timeout=10)  # fmt: skip

    def throttle(self, kbit: int, latency_ms: int = 300) -> None:
        """Limit what the bridge sends towards this host to ``kbit`` kbit/s, queueing up to ``latency_ms`` (``tc
        tbf``: a slow link where the kernel has no netem)."""
        subprocess.run(["tc", "qdisc", "replace", "dev", self.veth, "root", "tbf", "rate", f"{kbit}kbit", "burst",
                        "16kbit", "latency", f"{latency_ms}ms"], capture_output=True, text=True, check=True,
                       timeout=10)  # fmt: skip

    def undelay(self) -> None:
        """Remove the delay (or the throttle)."""
        subprocess.run(["tc", "qdisc", "del", "dev", self.veth, "root"], capture_output=True, text=True, timeout=10)


def netem_available(host: Host) -> str | None:
    """None when ``tc netem`` works on ``host``'s link (tried with a 1 ms delay, then removed), else why not."""
    if shutil.which("tc") is None:
        return "tc (iproute2) is not installed"
    try:
        host.delay(1)
    except subprocess.CalledProcessError as e:
        return f"tc netem does not work here: {(e.stderr or '').strip() or e}"
    host.undelay()
    return None


def _why_not() -> str | None:
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "iproute2 (ip) is not installed"
    return None


def _subnet() -> int:
    """The third byte of this process's 10.231.x.0/24: one stretch of 10.231.20-219 per pytest-xdist worker, so two
    workers' bridges never share a subnet (``_claim`` makes sure, across test runs too)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")[2:]
    index = int(worker) if worker.isdigit() else 0
    return 20 + (index % 4) * 50 + os.getpid() % 50


_CLAIMS = Path(tempfile.gettempdir()) / "sievemq-netns-subnets"


def _claim(first: int) -> tuple[int, int]:
    """A subnet no other test process uses now, from ``first`` on (``(subnet, fd)``: hold the fd, an exclusive
    flock, while the bridge exists). Two test runs at once (a developer's beside the suite) would otherwise route
    each other's traffic: the same subnet on two bridges."""
    _CLAIMS.mkdir(exist_ok=True)
    in_use = _ip("-br", "addr", check=False).stdout
    for k in range(200):
        net = 20 + (first - 20 + k) % 200
        if f"10.231.{net}." in in_use:
            continue
        fd = os.open(_CLAIMS / f"{net}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        return net, fd
    raise NoNamespaces("no free 10.231.x.0/24 subnet for a test bridge (200 in use?)")


@contextlib.contextmanager
def hosts(n: int, net: int | None = None) -> Iterator[list[Host]]:
    """``n`` hosts on a fresh bridge; everything made is removed on exit, whatever happened."""
    why = _why_not()
    if why is not None:
        raise NoNamespaces(why)
    claim = -1
    if net is None:
        net, claim = _claim(_subnet())
    tag = f"{os.getpid() % 100000}"
    bridge = f"smqbr{tag}"
    made: list[tuple[str, str]] = []  # ("ns"|"link", name), removed in reverse
    try:
        r = _ip("link", "add", bridge, "type", "bridge", check=False)
        if r.returncode != 0:
            raise NoNamespaces(f"cannot make a bridge: {r.stderr.strip()}")
        made.append(("link", bridge))
        _ip("addr", "add", f"10.231.{net}.254/24", "dev", bridge)
        _ip("link", "set", bridge, "up")
        out: list[Host] = []
        for i in range(1, n + 1):
            ns, veth, peer = f"smq{tag}h{i}", f"smq{tag}v{i}", f"smq{tag}p{i}"
            r = _ip("netns", "add", ns, check=False)
            if r.returncode != 0:
                raise NoNamespaces(f"cannot make a network namespace: {r.stderr.strip()}")
            made.append(("ns", ns))
            _ip("link", "add", veth, "type", "veth", "peer", "name", peer)
            made.append(("link", veth))
            _ip("link", "set", peer, "netns", ns)
            _ip("link", "set", veth, "master", bridge)
            _ip("link", "set", veth, "up")
            ip = f"10.231.{net}.{i}"
            _ip("-n", ns, "addr", "add", f"{ip}/24", "dev", peer)
            _ip("-n", ns, "link", "set", peer, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
            out.append(Host(ns, ip, veth))
        yield out
    finally:
        for kind, name in reversed(made):
            if kind == "ns":
                subprocess.run(["ip", "netns", "pids", name], capture_output=True)  # (processes are the caller's)
                _ip("netns", "del", name, check=False)
            else:
                _ip("link", "del", name, check=False)
        if claim >= 0:
            os.close(claim)  # releases the flock


@contextlib.contextmanager
def loopback_only(label: str) -> Iterator[list[str]]:
    """A namespace with only its loopback (up): the command prefix that runs a program in it. Programs there can
    listen on any port of 127.0.0.1 (sievemq's defaults) without meeting anything else on the machine."""
    why = _why_not()
    if why is not None:
        raise NoNamespaces(why)
    ns = f"smq{label}{os.getpid() % 100000}"
    r = _ip("netns", "add", ns, check=False)
    if r.returncode != 0:
        raise NoNamespaces(f"cannot make a network namespace: {r.stderr.strip()}")
    try:
        _ip("-n", ns, "link", "set", "lo", "up")
        yield ["ip", "netns", "exec", ns]
    finally:
        _ip("netns", "del", ns, check=False)
