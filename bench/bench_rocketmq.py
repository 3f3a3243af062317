"""sievemq against Apache RocketMQ itself (issue 30): the same Java client drives both brokers. The parts are in
``bench/rocketmq/``; bench/README.md explains every row.

Starts Apache RocketMQ 5.5.0's name server and broker (the jars tests/compat/setup_reference.sh resolved into
``.interop/rocketmq-5.5.0/lib``; broker JVM -Xms1g -Xmx1g, G1; ASYNC_FLUSH) and ``sievemq dev`` (name server and
broker in one process, ASYNC_FLUSH, no gRPC proxy, no HTTP port), all on free ports of 127.0.0.1 with stores in a
temporary folder. One JVM running ``bench/rocketmq/BenchDriver.java`` (compiled with javac against RocketMQ's
client jars into ``.interop/bench-driver/``) runs every phase against each broker through its name server, back
to back, the first of the two alternating from phase to phase and run to run:

* **produce, single sends**: ``--messages`` of ``--size`` bytes with a tag, sync ``send()`` from ``--threads``;
* **produce, batched**: sync ``send(Collection)`` of ``--batch`` messages from ``--batch-threads``;
* **consume**: a ``DefaultMQPushConsumer`` of a new group from the first offset over both produce topics, timed
  from ``start()`` to the last message;
* **latency**: ``--rate`` msg/s for ``--seconds``, each an async send at its due time, to a push consumer in the
  driver: receive minus send time (``System.nanoTime()`` in the property ``ts``), p50 / p99 / p99.9 / max.

Every phase runs once, small, against each system first (``--warmup``, not counted). Per phase: msg/s of each,
sievemq / RocketMQ, the brokers' CPU µs per message (``/proc/<pid>/stat``; RocketMQ's name server apart), the
client's; memory after each run; with ``--runs N`` the range of the ratios.

    .venv/bin/python bench/bench_rocketmq.py [--messages 50000] [--size 1024] [--threads 32] [--batch 100]
                                             [--batch-threads 4] [--rate 2000] [--seconds 10] [--runs 1]
                                             [--warmup 10000] [--queues 4] [--settle 1.0] [--keep]
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from types import FrameType

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.rocketmq.runner import run


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=50_000, help="messages per produce phase")
    ap.add_argument("--size", type=int, default=1024, help="body bytes")
    ap.add_argument("--threads", type=int, default=32, help="single sends: threads doing sync send()")
    ap.add_argument("--batch", type=int, default=100, help="messages per send(Collection) (at most 4 MiB)")
    ap.add_argument("--batch-threads", type=int, default=4, help="batched sends: threads")
    ap.add_argument("--rate", type=int, default=2000, help="latency phase: messages per second")
    ap.add_argument("--seconds", type=float, default=10.0, help="latency phase: duration")
    ap.add_argument("--runs", type=int, default=1, help="repeat the whole comparison (the ratios' range)")
    ap.add_argument("--warmup", type=int, default=10_000, help="messages of the uncounted warm-up phases")
    ap.add_argument("--queues", type=int, default=4, help="queues per topic")
    ap.add_argument("--settle", type=float, default=1.0, help="seconds of pause before each system's phase")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder (stores, logs)")
    args = ap.parse_args(argv)
    if min(args.messages, args.size, args.threads, args.batch, args.batch_threads, args.rate, args.runs,
           args.warmup, args.queues) < 1 or args.seconds <= 0:  # fmt: skip
        ap.error("every count, size and duration must be positive")
    return args


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main() -> None:
    """SIGTERM stops the run as Ctrl-C does: every process started is stopped by PID."""
    signal.signal(signal.SIGTERM, _interrupt)
    args = parse_args()
    try:
        code = run(args)
    except KeyboardInterrupt:
        print("interrupted: everything started was stopped", file=sys.stderr)
        code = 130
    sys.exit(code)


if __name__ == "__main__":
    main()
