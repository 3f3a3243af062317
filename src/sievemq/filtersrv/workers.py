"""The sandboxed worker pool: filter functions run in child processes, never in the filter server's own.

Each worker is ``python -I`` running ``sievemq.filtersrv.sandbox`` (see ``sandbox`` for its side and the pipe
protocol) in a session of its own, with an empty environment (no secret of the filter server reaches user code) and
its stderr piped into the filter server's log (``worker_output``). It locks itself down (``lockdown``) and reports
the sandbox layers that hold; the pool keeps the layers every worker has (``sandbox``) and refuses a replacement
worker with fewer. A batch gets a wall-clock limit; a worker that overruns it, dies, runs out of memory or answers
garbage is killed and replaced, and the batch fails with a ``FilterFailure`` whose text says what happened. Workers
are recycled before they reach their CPU budget, and after ``max_batches`` batches.

A pool serves either named functions (``tenant`` empty: the operator's modules) or the one uploaded function whose
content id is ``tenant``; its workers are told which at start and refuse anything else, and replacements belong to
the same pool, so a worker never passes from one tenant to another (``pools.WorkerPools`` routes functions to pools;
docs/protocol/filter-server.md §8).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import signal
import struct
import sys
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson

from sievemq.filtersrv import worker_output
from sievemq.filtersrv.layers import LayerReport
from sievemq.filtersrv.registry import FunctionSpec
from sievemq.util.tasks import cancel_and_wait, spawn

log = logging.getLogger(__name__)

_LEN = struct.Struct(">I")
MAX_REPLY_BYTES = 4 * 1024 * 1024
SPAWN_TIMEOUT = 30.0
_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_BOOT = (
    "import sys\n"
    "if {root!r} not in sys.path: sys.path.insert(0, {root!r})  # the server's own copy of sievemq, first\n"
    "from sievemq.filtersrv.sandbox import main\n"
    "sys.exit(main(sys.argv))"
)
ANY_FUNCTION = "*"
"""``PoolSettings.tenant`` of a pool whose workers load any function (tests only; the filter server never does)."""
WORKER_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
"""The whole environment of a worker."""
T = TypeVar("T")


class FilterFailure(Exception):
    """A batch (or a load) failed in a worker. ``kind`` is a short category, ``detail`` a sentence."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail


@dataclass(frozen=True)
class PoolSettings:
    """Size and limits of a worker pool."""

    size: int = 2
    batch_timeout: float = 2.0
    load_timeout: float = 10.0
    cpu_seconds: int = 60
    memory_mb: int = 1024
    max_batches: int = 100_000
    paths: tuple[str, ...] = ()
    modules: tuple[str, ...] = ()
    read_paths: tuple[str, ...] = ()
    """Extra folders functions may read (``sandboxReadPaths``)."""
    user: str = "nobody"
    skip: frozenset[str] = frozenset()
    tenant: str = ""
    """The content id of the one uploaded function these workers may load; empty: named functions only;
    ``ANY_FUNCTION``: any (only tests of the worker's own mechanics mix functions in one pool)."""


class _Worker:
    """One worker process and what the pool knows about it."""

    def __init__(self, wid: int, proc: asyncio.subprocess.Process) -> None:
        self.wid = wid
        self.proc = proc
        self.output: asyncio.Task[None] | None = None
        self.loaded: set[str] = set()
        self.report = LayerReport()
        self.batches = 0
        self.cpu = 0.0
        self.started = time.monotonic()

    @property
    def pid(self) -> int:
        return int(self.proc.pid)

    async def read_reply(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        (n,) = _LEN.unpack(await self.proc.stdout.readexactly(4))
        if n > MAX_REPLY_BYTES:
            raise FilterFailure("protocol", f"worker sent a {n}-byte reply (garbage on its pipe?)")
        data = await self.proc.stdout.readexactly(n)
        try:
            reply = orjson.loads(data)
        except orjson.JSONDecodeError:
            raise FilterFailure("protocol", "worker sent a reply that is not JSON (garbage on its pipe?)") from None
        if not isinstance(reply, dict):
            raise FilterFailure("protocol", "worker sent a reply that is not a JSON object")
        return reply

    async def call(self, frame: bytes) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(_LEN.pack(len(frame)) + frame)
        await self.proc.stdin.drain()
        return await self.read_reply()

    def kill(self) -> None:
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


class WorkerPool:
    """A fixed number of worker processes; ``run`` takes an idle one, ``load`` validates a function."""

    def __init__(self, settings: PoolSettings, baseline: LayerReport | None = None) -> None:
        """``baseline``: the sandbox layers every worker must have (a tenant's pool: the shared pool's); without it,
        the layers the first workers have."""
        self.settings = settings
        self._idle: asyncio.Queue[_Worker] = asyncio.Queue()
        self._all: dict[int, _Worker] = {}
        self._dying: set[_Worker] = set()
        """Killed workers not reaped yet (``stop`` waits for them too)."""
        self._ids = itertools.count(1)
        self._replacing: set[asyncio.Task[None]] = set()
        """Replacements of retired workers being started (``stop`` cancels them)."""
        self._closing = False
        self.spawned = 0
        self.replaced: dict[str, int] = {}
        self.recycled = 0
        self.sandbox: LayerReport | None = baseline
        """The sandbox layers every worker has (set by ``start`` unless given)."""

    # ------------------------------------------------------------------ lifecycle
    def _argv(self) -> list[str]:
        s = self.settings
        cfg = {
            "cpu": s.cpu_seconds,
            "mem_mb": s.memory_mb,
            "paths": [os.path.abspath(p) for p in s.paths],
            "modules": list(s.modules),
            "read": [os.path.abspath(p) for p in s.read_paths],
            "user": s.user,
            "skip": sorted(s.skip),
            "parent": os.getpid(),
            "tenant": s.tenant,
        }
        return [sys.executable, "-I", "-c", _BOOT.format(root=_PACKAGE_ROOT), orjson.dumps(cfg).decode()]

    async def _spawn(self) -> _Worker:
        proc = await asyncio.create_subprocess_exec(
            *self._argv(),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=dict(WORKER_ENV),
            cwd=os.path.abspath(os.sep),
            start_new_session=True,
        )
        w = _Worker(next(self._ids), proc)
        assert proc.stderr is not None
        w.output = asyncio.create_task(worker_output.forward(proc.stderr, log, f"filter worker {w.wid}"))
        try:
            report = self._check_ready(await asyncio.wait_for(w.read_reply(), SPAWN_TIMEOUT))
        except BaseException as e:  # cancelled too (a stopping pool): never leave the process behind
            w.kill()
            self._dying.add(w)  # should this wait be cancelled too, ``stop`` reaps it
            await asyncio.shield(self._reap(w))
            self._dying.discard(w)
            if isinstance(e, (TimeoutError, asyncio.IncompleteReadError, FilterFailure, OSError)):
                raise RuntimeError(f"filter worker did not start: {e!r}") from None
            raise
        w.report = report
        self._all[w.wid] = w
        self.spawned += 1
        log.debug("filter worker %d started (pid %d)", w.wid, w.pid)
        return w

    def _check_ready(self, ready: dict[str, Any]) -> LayerReport:
        """The sandbox of a worker that says it is ready; RuntimeError when it is not, or has fewer layers than the
        pool's workers had at start."""
        if not ready.get("ready"):
            raise RuntimeError(f"filter worker did not start: {ready!r}")
        report = LayerReport.from_json(ready.get("sandbox"))
        weaker = report.weaker_than(self.sandbox) if self.sandbox is not None else []
        if weaker:
            why = "; ".join(f"{n}: {report.missing.get(n, '?')}" for n in weaker)
            raise RuntimeError(f"filter worker started without the sandbox layers {', '.join(weaker)}: {why}")
        return report

    async def start(self) -> None:
        """Start every worker (fails, with none left running, if one cannot start)."""
        started = await asyncio.gather(*(self._spawn() for _ in range(self.settings.size)), return_exceptions=True)
        workers = [w for w in started if isinstance(w, _Worker)]
        failed = [e for e in started if isinstance(e, BaseException)]
        if failed:
            await self.stop()
            raise failed[0]
        if self.sandbox is None:
            common = workers[0].report
            for w in workers[1:]:
                common = common.common(w.report)
            self.sandbox = common
        for w in workers:
            self._idle.put_nowait(w)

    async def stop(self) -> None:
        """Kill every worker and stop replacing them."""
        self._closing = True
        await cancel_and_wait(*self._replacing)  # a replacement being started is killed and reaped
        for w in list(self._all.values()):
            if w.proc.stdin is not None:
                with contextlib.suppress(Exception):
                    w.proc.stdin.close()
            w.kill()
        for w in [*self._all.values(), *self._dying]:
            await self._reap(w)
        self._all.clear()
        self._dying.clear()

    @staticmethod
    async def _reap(w: _Worker) -> int | None:
        try:
            code = await asyncio.wait_for(w.proc.wait(), 2.0)
        except TimeoutError:
            return None
        if w.output is not None:
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(w.output), 1.0)
        return code

    # ------------------------------------------------------------------ replacing
    def _retire(self, w: _Worker, reason: str) -> None:
        """Kill ``w`` (if alive) and start a replacement in the background."""
        self._all.pop(w.wid, None)
        w.kill()
        self._dying.add(w)
        self.replaced[reason] = self.replaced.get(reason, 0) + 1
        if self._closing:
            return
        spawn(self._replace(w), self._replacing, "filter-worker-replace")

    async def _replace(self, old: _Worker) -> None:
        await self._reap(old)
        self._dying.discard(old)
        delay = 0.1
        while not self._closing:
            try:
                w = await self._spawn()
            except Exception as e:
                log.error("cannot start a filter worker: %s; retrying in %.1fs", e, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
                continue
            self._idle.put_nowait(w)
            return

    def _release(self, w: _Worker) -> None:
        s = self.settings
        if w.cpu >= s.cpu_seconds / 2 or w.batches >= s.max_batches:
            self.recycled += 1
            self._retire(w, "recycled")
        else:
            self._idle.put_nowait(w)

    async def _death(self, w: _Worker, what: str) -> FilterFailure:
        """Why ``w`` stopped answering (it is gone or killed); replaces it."""
        code = await self._reap(w) if w.proc.returncode is None else w.proc.returncode
        if code is not None and -code == signal.SIGXCPU:
            failure = FilterFailure(
                "cpu",
                f"exceeded the worker CPU-time limit (RLIMIT_CPU {self.settings.cpu_seconds} s) during {what}; "
                "the worker was killed and replaced",
            )
        elif code is not None and code < 0:
            failure = FilterFailure("crash", f"the worker died of {_signal_name(-code)} during {what} and was replaced")
        else:
            failure = FilterFailure("crash", f"the worker exited (code {code}) during {what} and was replaced")
        self._retire(w, failure.kind)
        return failure

    # ------------------------------------------------------------------ requests
    async def _exchange(self, w: _Worker, frame: bytes, timeout: float, what: str) -> dict[str, Any]:
        try:
            return await asyncio.wait_for(w.call(frame), timeout)
        except TimeoutError:
            self._retire(w, "timeout")
            raise FilterFailure(
                "timeout", f"exceeded the {timeout:g} s time limit for {what}; the worker was killed and replaced"
            ) from None
        except FilterFailure:
            self._retire(w, "protocol")
            raise
        except (asyncio.IncompleteReadError, ConnectionError, BrokenPipeError, OSError):
            raise await self._death(w, what) from None
        except BaseException:
            self._retire(w, "cancelled")  # only at shutdown: its reply would desynchronise the pipe
            raise

    def _failed(self, w: _Worker, reply: dict[str, Any]) -> FilterFailure:
        kind = str(reply.get("kind", "error"))
        failure = FilterFailure(kind, str(reply.get("error", "unknown error"))[:2000])
        if kind in ("memory", "protocol", "decode"):
            self._retire(w, kind)
        else:
            self._idle.put_nowait(w)
        return failure

    async def _shielded(self, work: Coroutine[Any, Any, T]) -> T:
        """Run ``work`` (which holds a worker) to the end even if the caller is cancelled (a consumer that hangs
        up): killing a healthy worker mid-batch would waste it, and a half-read reply would desync its pipe."""
        task = asyncio.ensure_future(work)
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            task.add_done_callback(lambda t: t.cancelled() or t.exception())
            raise

    async def load(self, spec: FunctionSpec) -> None:
        """Import or compile ``spec`` in a worker; FilterFailure (kind ``load``, ``timeout``...) if it fails."""
        w = await self._idle.get()
        await self._shielded(self._load_on(w, spec))

    async def _load_on(self, w: _Worker, spec: FunctionSpec) -> None:
        frame = b"L" + orjson.dumps(spec.to_json())
        reply = await self._exchange(w, frame, self.settings.load_timeout, "loading the function")
        if not reply.get("ok"):
            raise self._failed(w, reply)
        w.loaded.add(spec.fid)
        w.cpu = float(reply.get("cpu", 0.0))
        self._release(w)

    async def run(self, spec: FunctionSpec, blob: bytes, count: int) -> list[int]:
        """Indexes (0-based, increasing) of the ``count`` records in ``blob`` that ``spec`` accepts."""
        w = await self._idle.get()
        return await self._shielded(self._run_on(w, spec, blob, count))

    async def _run_on(self, w: _Worker, spec: FunctionSpec, blob: bytes, count: int) -> list[int]:
        if spec.fid not in w.loaded:  # first use in this worker: load under the load time limit
            load = b"L" + orjson.dumps(spec.to_json())
            reply = await self._exchange(w, load, self.settings.load_timeout, "loading the function")
            if not reply.get("ok"):
                raise self._failed(w, reply)
            w.loaded.add(spec.fid)
        hb = orjson.dumps({"fid": spec.fid})
        frame = b"B" + _LEN.pack(len(hb)) + hb + blob
        reply = await self._exchange(w, frame, self.settings.batch_timeout, f"a batch of {count} messages")
        if not reply.get("ok"):
            raise self._failed(w, reply)
        w.batches += 1
        w.cpu = float(reply.get("cpu", 0.0))
        matched = reply.get("m")
        if (
            not isinstance(matched, list)
            or not all(isinstance(i, int) and 0 <= i < count for i in matched)
            or any(a >= b for a, b in itertools.pairwise(matched))
        ):
            self._retire(w, "protocol")
            raise FilterFailure("protocol", "the worker answered an invalid list of matches; it was replaced")
        self._release(w)
        return matched

    # ------------------------------------------------------------------ status
    def pids(self) -> list[int]:
        """Process ids of the live workers."""
        return sorted(w.pid for w in self._all.values())

    def status(self) -> dict[str, Any]:
        """Workers, their pids and counts, and replacements by reason."""
        return {
            "size": self.settings.size,
            "idle": self._idle.qsize(),
            "pids": self.pids(),
            "spawned": self.spawned,
            "replaced": dict(self.replaced),
            "batchTimeoutSeconds": self.settings.batch_timeout,
            "cpuSeconds": self.settings.cpu_seconds,
            "memoryMb": self.settings.memory_mb,
            "sandbox": self.sandbox.to_json() if self.sandbox is not None else None,
        }
