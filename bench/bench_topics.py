"""One broker holding 1 to 100,000 topics of 4 queues (issue 32): what each costs, in one table.

For each N of ``--topics`` (default 1,100,1000,10000; add 100000 for the whole issue), on a fresh name server and
broker (``sievemq namesrv`` and ``sievemq broker``, two processes, store in a temporary folder, ``maxTopics`` N + 100
in the broker's TOML, ``ASYNC_FLUSH``, default segment size and registration period):

* N topics of 4 queues created through the admin API: UPDATE_AND_CREATE_TOPIC_LIST (18) of ``--create-batch``
  (1,000) topic configs per request (``--one-by-one``: UPDATE_AND_CREATE_TOPIC, 17, per topic); then until the
  name server routes the last one;
* produce: ``--per-queue`` messages (1; more when N is small, so that a phase sends ``--min-messages`` at least) to
  every queue, one SEND_MESSAGE_V2 per message from ``--senders`` child processes (``bench/topics/worker.py``) with
  ``--inflight`` requests in flight each: first to new queues, then as many again to existing ones; consume:
  PULL_MESSAGE of every queue from offset 0 (no long polling);
* the broker's RSS, mappings (/proc/<pid>/maps lines), open fds, the consume queues' allocated bytes (st_blocks),
  route lookups at the name server;
* a clean restart (SIGTERM) and a kill -9, each followed by a start on the same store, timed from the start until
  the broker answers a pull of the last topic with its messages, and until the name server routes it again.

A row that would leave less than ``--min-free-gib`` free on the disk is skipped, and a row's restarts are left out
when the recovered broker could pass ``--max-restart-gib`` of RSS (both estimated from the previous rows), with the
reason. Output: the table, each figure's ratio to the first row, details per row; ``--json FILE`` writes every
figure. bench/README.md has the columns, the guards and this machine's figures.

    .venv/bin/python bench/bench_topics.py [--topics 1,100,1000,10000] [--per-queue 1] [--src DIR] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.topics.procs import COMMITLOG_SEGMENT, free_bytes, max_map_count
from bench.topics.report import as_json, details, ratios, table
from bench.topics.row import QUEUES, Row, log, run_row

GIB = 1 << 30
FIRST_ROW_QUEUE_BYTES = 6_000_000
"""Consume-queue bytes per queue assumed before any row measured them (a whole 300,000-entry file)."""
GUARD_MIN_QUEUES = 400
"""Rows of fewer queues always restart, and are too small to predict the RSS of a restart with more."""
CQ_UNIT = 20
"""Bytes of a consume-queue entry."""
RECORD_OVERHEAD = 200
"""Commit-log bytes per message beyond its body (header, topic, properties), for the disk estimate."""


def tree(a: argparse.Namespace) -> str:
    """The servers' sources: this checkout's commit and whether it has changes (read-only git), or ``--src``."""
    root = Path(__file__).resolve().parent.parent
    if a.src:
        env = {**os.environ, "PYTHONPATH": str(Path(a.src) / "src")}
        where = subprocess.run([sys.executable, "-c", "import sievemq; print(sievemq.__file__)"], env=env,
                               capture_output=True, text=True, check=False).stdout.strip()  # fmt: skip
        return f"--src {a.src} (servers import {where or 'nothing: check --src'})"
    try:
        rev = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, check=True).stdout.strip()  # fmt: skip
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--", "src"], capture_output=True,
                               text=True, check=True).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return rev + (" + uncommitted changes in src/" if dirty else "")


def header(a: argparse.Namespace, ns: list[int], tmp: Path) -> dict[str, Any]:
    """What ran, with which settings, on what."""
    return {
        "command": " ".join(sys.argv),
        "tree": tree(a),
        "topics": ns,
        "queues_per_topic": QUEUES,
        "per_queue": a.per_queue,
        "min_messages": a.min_messages,
        "size": a.size,
        "senders": a.senders,
        "inflight": a.inflight,
        "create": "one by one (17)" if a.one_by_one else f"lists of {a.create_batch} (18)",
        "cq_entries": a.cq_entries or "default",
        "cpus": os.cpu_count(),
        "load": [round(x, 2) for x in os.getloadavg()],
        "max_map_count": max_map_count(),
        "nofile": resource.getrlimit(resource.RLIMIT_NOFILE)[0],
        "free_gib": round(free_bytes(tmp) / GIB, 1),
        "tmp": str(tmp),
    }


def print_header(h: dict[str, Any]) -> None:
    """The header lines."""
    print(f"bench_topics: {h['command']}")
    print(f"  tree {h['tree']}; N = {', '.join(f'{n:,}' for n in h['topics'])} topics x {QUEUES} queues, a fresh "
          f"name server + broker per N; topics created in {h['create']}; consume-queue file entries: "
          f"{h['cq_entries']}")  # fmt: skip
    print(f"  {h['per_queue']} + {h['per_queue']} messages per queue (each phase at least {h['min_messages']:,}) of "
          f"{h['size']} B, "
          f"{h['senders']} sender processes x {h['inflight']} in flight")  # fmt: skip
    print(f"  {h['cpus']} CPUs, load {' '.join(map(str, h['load']))}, vm.max_map_count {h['max_map_count']:,}, "
          f"RLIMIT_NOFILE {h['nofile']:,}, {h['free_gib']} GiB free under {h['tmp']}", flush=True)  # fmt: skip


def too_big(a: argparse.Namespace, n: int, done: list[Row], tmp: Path) -> str:
    """Why row ``n`` would take too much disk ('' when it fits): the previous row's consume-queue bytes per queue
    less its entries (a whole 6 MB file before any row), plus this row's entries; the commit log; ``--min-free-gib``
    kept free."""
    per_queue_msgs = 2 * max(a.per_queue, -(-a.min_messages // (n * QUEUES)))
    measured = [r for r in done if r.cq.files]
    if measured:
        r = measured[-1]
        stored = r.produce.messages + r.produce2.messages
        empty = max(0, r.cq.allocated - CQ_UNIT * stored) / r.queues
    else:
        empty = FIRST_ROW_QUEUE_BYTES
    per_queue = empty + CQ_UNIT * per_queue_msgs
    messages = n * QUEUES * per_queue_msgs
    need = n * QUEUES * per_queue * 1.1 + messages * (a.size + RECORD_OVERHEAD) + COMMITLOG_SEGMENT // 16
    free = free_bytes(tmp)
    if free - need >= a.min_free_gib * GIB:
        return ""
    return (f"needs ~{need / GIB:.1f} GiB ({per_queue / 1024:,.0f} KiB of consume queue per queue, from the previous "
            f"row), {free / GIB:.1f} GiB free, {a.min_free_gib} GiB to keep free (--min-free-gib; --cq-entries "
            "makes consume-queue files smaller)")  # fmt: skip


def mem_available() -> int:
    """MemAvailable of /proc/meminfo in bytes (0 when unknown)."""
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def too_much_memory(a: argparse.Namespace, n: int, done: list[Row]) -> str:
    """Why row ``n``'s restarts are left out ('' to run them): a recovering broker that maps and touches every
    consume-queue file grows its RSS with them. Estimated from the last row of ``GUARD_MIN_QUEUES`` queues or more:
    its RSS after the restarts less its RSS before them, per queue; without such a row, the consume-queue bytes
    mapped per queue of the last row (the worst case). Against ``--max-restart-gib``."""
    if n * QUEUES < GUARD_MIN_QUEUES:
        return ""
    after = [r for r in done if r.queues >= GUARD_MIN_QUEUES and (r.kill9.broker.rss_kib or r.restart.broker.rss_kib)]
    if after:
        r = after[-1]
        grown = max(r.kill9.broker.rss_kib, r.restart.broker.rss_kib) - r.broker.rss_kib
        per_queue, how = max(0, grown) * 1024 / r.queues, f"the N={r.n:,} row's growth in its restarts"
    else:
        mapped = [r for r in done if r.cq.files]
        if not mapped:
            return ""
        r = mapped[-1]
        per_queue, how = r.cq.apparent / r.queues, f"the N={r.n:,} row's consume-queue bytes mapped, the worst case"
    need = per_queue * n * QUEUES
    limit = a.max_restart_gib * GIB if a.max_restart_gib else mem_available() / 2
    if need <= limit:
        return ""
    return (f"a restarted broker could take ~{need / GIB:.1f} GiB of RSS ({per_queue / 1024:,.0f} KiB per queue: "
            f"{how}), over {limit / GIB:.1f} GiB (--max-restart-gib; default half of MemAvailable)")  # fmt: skip


async def main(a: argparse.Namespace) -> int:
    """Every row, then the table."""
    ns = [int(x) for x in a.topics.split(",") if x.strip()]
    tmp = Path(tempfile.mkdtemp(prefix="bench-topics-", dir=a.tmp))
    h = header(a, ns, tmp)
    print_header(h)
    rows: list[Row] = []
    failed = False
    try:
        for n in ns:
            reason = too_big(a, n, rows, tmp)
            if reason:
                log(f"N={n}: skipped: {reason}")
                rows.append(Row(n, skipped=reason))
                continue
            row = await run_row(a, tmp / f"n{n}", n, too_much_memory(a, n, rows))
            rows.append(row)
            failed = failed or any(x.startswith("FAILED") for x in row.notes)
            if not a.keep:
                shutil.rmtree(tmp / f"n{n}", ignore_errors=True)
            log(f"N={n}: done in {row.took_s:.0f} s")
    finally:
        print("\n" + "\n".join(table(rows)))
        r = ratios(rows)
        if r:
            print("\nratios to the first row:\n" + "\n".join(r))
        print("\n" + "\n".join(details(rows)), flush=True)
        if a.json:
            Path(a.json).write_bytes(orjson.dumps(as_json(rows, h), option=orjson.OPT_INDENT_2))
            print(f"\nwrote {a.json}")
        if a.keep or failed:
            print(f"kept {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failed else 0


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--topics", default="1,100,1000,10000", help="numbers of topics, one row each (100000: the issue's)"
    )
    ap.add_argument("--per-queue", type=int, default=1, help="messages sent to (and pulled from) every queue")
    ap.add_argument(
        "--min-messages", type=int, default=20_000, help="messages per row at least (more per queue when N is small)"
    )
    ap.add_argument("--size", type=int, default=100, help="body bytes")
    ap.add_argument("--senders", type=int, default=2, help="load child processes")
    ap.add_argument("--inflight", type=int, default=32, help="requests in flight per load child")
    ap.add_argument("--create-batch", type=int, default=1000, help="topic configs per UPDATE_AND_CREATE_TOPIC_LIST")
    ap.add_argument("--one-by-one", action="store_true", help="create topics by UPDATE_AND_CREATE_TOPIC, one each")
    ap.add_argument(
        "--cq-entries",
        type=int,
        default=0,
        help="the broker's mappedFileSizeConsumeQueueEntries (0: its default, 300,000 = 6 MB files)",
    )
    ap.add_argument("--prefix", default="BenchT", help="topic names: PREFIX000000 ...")
    ap.add_argument("--request-timeout", type=float, default=300.0, help="seconds an admin request may take")
    ap.add_argument(
        "--start-timeout",
        type=float,
        default=600.0,
        help="seconds a (re)started broker may take to answer and be routed",
    )
    ap.add_argument("--phase-timeout", type=float, default=1800.0, help="seconds a produce or consume may take")
    ap.add_argument("--no-restart", action="store_true", help="leave out the clean restart and the kill -9")
    ap.add_argument(
        "--max-restart-gib",
        type=float,
        default=0.0,
        help="leave out the restarts of a row whose broker would exceed this RSS (0: half of MemAvailable)",
    )
    ap.add_argument("--min-free-gib", type=float, default=10.0, help="skip a row that would leave less disk free")
    ap.add_argument("--src", default="", help="run the name server and broker from DIR/src (another checkout)")
    ap.add_argument("--tmp", default=None, help="where the temporary folder goes (default: the system's)")
    ap.add_argument("--json", default="", help="also write every figure to this file")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder (stores, logs)")
    return ap.parse_args(argv)


if __name__ == "__main__":
    args = parse()
    start = time.monotonic()
    try:
        import uvloop
    except ImportError:
        code = asyncio.run(main(args))
    else:
        code = uvloop.run(main(args))
    log(f"bench_topics took {time.monotonic() - start:.0f} s")
    sys.exit(code)
