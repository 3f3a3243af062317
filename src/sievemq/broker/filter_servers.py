"""The broker's side of filter servers: REGISTER_FILTER_SERVER (301), liveness, their functions' counts, and the
local supervisor.

A filter server registers every 10 s; the broker keeps those heard from in the last 30 s (or whose registering
connection is still open and was heard from in that time) and lists them in its REGISTER_BROKER body as
``filterServerList``. ``on_change`` fires when that list changes, so the broker can re-register at once.
A sievemq filter server's 301 carries its functions' counts; ``FunctionCountBook`` adds them up per (group, topic)
for the broker's /metrics (docs/metrics.md §4).
With ``nums > 0`` the broker also starts that many ``sievemq filtersrv`` processes for itself, restarts them
when they die and stops them when it stops. Nothing a client sends is imported or executed here.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from sievemq.errors import RemotingError
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection
from sievemq.remoting.headers import require_str
from sievemq.remoting.server import ProcessorTable

log = logging.getLogger(__name__)

FILTER_SERVER_EXPIRE_SECONDS = 30.0
_CONN_ATTR = "filter_server_addr"
INSTANCES_KEPT = 256
"""Filter server processes whose last counts the broker remembers (a restarted one is a new instance)."""
MAX_COUNTED_PAIRS = 10_000
"""(group, topic) pairs whose function counts the broker adds up; reports of further pairs are left out (a 301
sender cannot grow the broker's memory without end)."""


@dataclass
class FunctionCounts:
    """What the functions of one (group, topic) decided on this broker's filter servers, added up."""

    matched: int = 0
    filtered_out: int = 0
    errors: int = 0
    """Batches that failed (the function raised, overran its time or memory, or its worker died)."""


_Row = tuple[int, int, int, int]  # serial, matched, filtered out, errors


class FunctionCountBook:
    """Function counts per (group, topic), from the reports in filter servers' 301 requests, as counters that only
    grow: each report adds what grew since the same instance's last report of the same registration, and all of a
    registration that is new (a new serial: registered anew, its counts started again) or of an instance that is
    new (a filter server started or restarted). So the totals survive a filter server's restart and add up several
    filter servers of one group; what a filter server counted after its last report before it stopped is lost."""

    def __init__(self, instances_kept: int = INSTANCES_KEPT) -> None:
        self.totals: dict[tuple[str, str], FunctionCounts] = {}
        """(group, topic) -> counts, in the order first reported (``/metrics`` keeps the first ones' series)."""
        self._last: OrderedDict[str, dict[tuple[str, str], _Row]] = OrderedDict()
        self._kept = instances_kept

    def report(self, body: Any) -> None:
        """Add a 301 body's counts (``{"instance": token, "functions": [...]}``); ValueError when malformed."""
        if not isinstance(body, dict) or not isinstance(body.get("instance"), str):
            raise ValueError("not an object with an 'instance'")
        instance, functions = body["instance"], body.get("functions", [])
        if not isinstance(functions, list):
            raise ValueError("'functions' is not a list")
        rows: dict[tuple[str, str], _Row] = {}
        for f in functions:
            try:
                key = (str(f["consumerGroup"]), str(f["topic"]))
                row = (int(f["serial"]), int(f["matched"]), int(f["filteredOut"]), int(f["errors"]))
            except (KeyError, TypeError, ValueError) as e:
                raise ValueError(f"a function's counts lack {e}") from None
            if min(row) < 0:  # counters never go down: a negative count would make the totals shrink
                raise ValueError(f"negative counts for {key}")
            rows[key] = row
        before = self._last.pop(instance, {})
        for key, (serial, matched, filtered_out, errors) in rows.items():
            prev = before.get(key)
            if prev is not None and prev[0] == serial:
                matched, filtered_out, errors = (max(0, n - p) for n, p in zip((matched, filtered_out, errors),
                                                                                prev[1:], strict=True))  # fmt: skip
            total = self.totals.get(key)
            if total is None:
                if len(self.totals) >= MAX_COUNTED_PAIRS:
                    continue
                total = self.totals[key] = FunctionCounts()
            total.matched += matched
            total.filtered_out += filtered_out
            total.errors += errors
        self._last[instance] = rows
        while len(self._last) > self._kept:
            self._last.popitem(last=False)


@dataclass
class _Child:
    """One supervised filter server process."""

    slot: int
    popen: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    restarts: int = 0
    backoff: float = 1.0
    next_start: float = 0.0
    exit_codes: list[int] = field(default_factory=list)


class FilterServerManager:
    """Filter servers of one broker: who is alive, and the ones this broker runs itself."""

    def __init__(
        self,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        *,
        nums: int = 0,
        listen_host: str = "127.0.0.1",
        advertised_ip: str = "127.0.0.1",
        config_path: str | None = None,
        extra_args: Sequence[str] = (),
        expire_seconds: float = FILTER_SERVER_EXPIRE_SECONDS,
        scan_interval: float = 5.0,
        on_change: Callable[[], None] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.broker_addr = broker_addr
        self.broker_name = broker_name
        self.broker_id = broker_id
        self.nums = nums
        self.listen_host = listen_host
        self.advertised_ip = advertised_ip
        self.config_path = config_path
        self.extra_args = list(extra_args)
        self.env = dict(env or {})
        """Added to the environment of the filter servers this broker starts (their ACL settings)."""
        self.expire_seconds = expire_seconds
        self.scan_interval = scan_interval
        self.on_change = on_change
        """Called (synchronously, on the loop) whenever ``addresses()`` changes."""
        self._live: dict[str, float] = {}
        self._conns: dict[str, Connection] = {}
        self.function_counts = FunctionCountBook()
        """What the filter servers' functions decided, from their 301s (the broker's /metrics shows them)."""
        self._bad_reports: set[str] = set()
        self._children: list[_Child] = [_Child(i) for i in range(nums)]
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = False

    # ------------------------------------------------------------------ 301
    def register(self, table: ProcessorTable) -> None:
        """Put REGISTER_FILTER_SERVER (301) into ``table``."""
        table.register(RequestCode.REGISTER_FILTER_SERVER, self.process)

    async def process(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """301: note the filter server as alive; answer with this broker's name and id."""
        addr = require_str(cmd.ext_fields, "filterServerAddr")
        host, sep, port = addr.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise RemotingError(ResponseCode.SYSTEM_ERROR, f"filterServerAddr must be ip:port, got {addr!r}")
        self.heard(addr, conn)
        if cmd.body:
            self._counts_reported(addr, cmd.body)
        return cmd.response(
            ResponseCode.SUCCESS, ext_fields={"brokerName": self.broker_name, "brokerId": self.broker_id}
        )

    def _counts_reported(self, addr: str, body: bytes) -> None:
        """Take a 301 body's function counts; a malformed one is logged (once per filter server) and ignored: the
        registration stands."""
        try:
            self.function_counts.report(orjson.loads(body))
        except ValueError as e:  # orjson.JSONDecodeError is one
            if addr not in self._bad_reports and len(self._bad_reports) < INSTANCES_KEPT:
                self._bad_reports.add(addr)
                log.warning("filter server %s sent function counts this broker cannot read (%s); ignored", addr, e)

    def heard(self, addr: str, conn: Connection | None = None, now: float | None = None) -> None:
        """Record a registration from ``addr`` (over ``conn``, if any)."""
        new = addr not in self._live
        self._live[addr] = time.monotonic() if now is None else now
        if conn is not None:
            self._conns[addr] = conn
            conn.attrs[_CONN_ATTR] = addr
        if new:
            log.info("filter server %s registered", addr)
            self._changed()

    def connection_closed(self, conn: Connection) -> None:
        """Drop the filter server whose registering connection closed (wire into the broker's on_close)."""
        addr = conn.attrs.get(_CONN_ATTR)
        if isinstance(addr, str) and self._conns.get(addr) is conn:
            self._conns.pop(addr, None)
            if self._live.pop(addr, None) is not None:
                log.info("filter server %s disconnected", addr)
                self._changed()

    def addresses(self, now: float | None = None) -> list[str]:
        """Filter servers heard from within ``expire_seconds``, sorted."""
        now = time.monotonic() if now is None else now
        return sorted(a for a, t in self._live.items() if now - t <= self.expire_seconds)

    def expire(self, now: float | None = None) -> list[str]:
        """Forget filter servers silent for longer than ``expire_seconds``; returns them."""
        now = time.monotonic() if now is None else now
        gone = [a for a, t in self._live.items() if now - t > self.expire_seconds]
        for a in gone:
            del self._live[a]
            self._conns.pop(a, None)
            log.info("filter server %s expired (silent for more than %.0f s)", a, self.expire_seconds)
        if gone:
            self._changed()
        return gone

    def _changed(self) -> None:
        if self.on_change is not None:
            try:
                self.on_change()
            except Exception:
                log.exception("filter server on_change callback failed")

    # ------------------------------------------------------------------ supervisor
    def command(self) -> list[str]:
        """The command line of a supervised filter server."""
        cmd = [
            sys.executable,
            "-m",
            "sievemq.cli",
            "filtersrv",
            "--broker",
            self.broker_addr,
            "--listen-host",
            self.listen_host,
            "--listen-port",
            "0",
            "--advertised-ip",
            self.advertised_ip,
            "--parent-pid",
            str(os.getpid()),
        ]
        if self.config_path:
            cmd += ["--config", self.config_path]
        return cmd + self.extra_args

    def _spawn(self, child: _Child) -> None:
        try:
            env = {**os.environ, **self.env} if self.env else None
            child.popen = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL, env=env)
        except OSError as e:
            log.error("cannot start filter server %d: %s", child.slot, e)
            child.popen = None
            child.next_start = time.monotonic() + child.backoff
            child.backoff = min(child.backoff * 2, 30.0)
            return
        child.started = time.monotonic()
        log.info("started filter server %d (pid %d)", child.slot, child.popen.pid)

    def _check_children(self) -> None:
        now = time.monotonic()
        for child in self._children:
            if child.popen is not None:
                code = child.popen.poll()
                if code is None:
                    if now - child.started > 60.0:
                        child.backoff = 1.0
                    continue
                child.exit_codes = [*child.exit_codes[-9:], code]
                child.popen = None
                child.restarts += 1
                child.next_start = now + (child.backoff if now - child.started < 10.0 else 0.0)
                child.backoff = min(child.backoff * 2, 30.0) if now - child.started < 10.0 else 1.0
                log.warning("filter server %d exited with %d; restarting", child.slot, code)
            if child.popen is None and now >= child.next_start and not self._stopping:
                self._spawn(child)

    async def _supervise(self) -> None:
        while True:
            try:
                self._check_children()
            except Exception:
                log.exception("filter server supervisor failed")
            await asyncio.sleep(0.5)

    async def _scan(self) -> None:
        while True:
            await asyncio.sleep(self.scan_interval)
            try:
                self.expire()
            except Exception:
                log.exception("filter server expiry failed")

    def children(self) -> list[dict[str, object]]:
        """Supervised processes: slot, pid (None while down), restarts, recent exit codes."""
        return [
            {
                "slot": c.slot,
                "pid": c.popen.pid if c.popen is not None else None,
                "restarts": c.restarts,
                "exitCodes": list(c.exit_codes),
            }
            for c in self._children
        ]

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Start expiring silent filter servers and, with ``nums > 0``, the supervised ones."""
        self._stopping = False
        self._tasks.append(asyncio.create_task(self._scan()))
        if self._children:
            self._check_children()
            self._tasks.append(asyncio.create_task(self._supervise()))

    async def stop(self, timeout: float = 5.0) -> None:
        """Stop the tasks and the supervised filter servers (SIGTERM, then SIGKILL after ``timeout``)."""
        self._stopping = True
        for t in self._tasks:
            t.cancel()
        self._tasks.clear()
        running = [c.popen for c in self._children if c.popen is not None and c.popen.poll() is None]
        for p in running:
            try:
                p.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + timeout
        for p in running:
            while p.poll() is None and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            if p.poll() is None:
                p.kill()
                await asyncio.to_thread(p.wait)
        for c in self._children:
            c.popen = None
