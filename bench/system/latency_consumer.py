"""The latency phase's consumer, in a process of its own (started by ``bench.system.latency.LatencyChild``).

    python -m bench.system.latency_consumer --system sievemq|redis|tansu --addr ADDR --topic T --group G
                                            --expect N --out FILE [--redis-parser auto|hiredis|python]
                                            [--fetch-wait-ms 500]

Subscribes from the end of the topic / stream, prints ``ready`` once it receives, and records for every message
with a ``ts`` property (sievemq), field (Redis) or header (Tansu) the receive time minus that stamp in ms. Stops
after ``--expect`` samples, on a ``stop`` line or at the end of its stdin; then writes the samples to ``--out``
(one per line) and prints ``done <samples> <cpu seconds of this process>``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import threading
import time
from typing import Any

from bench.system.common import PULL_BATCH, QUEUES


def ready() -> None:
    """Tell the parent this consumer receives."""
    print("ready", flush=True)


def watch_stdin(stop: threading.Event) -> None:
    """Set ``stop`` on a ``stop`` line or at the end of stdin."""
    for line in sys.stdin:
        if line.strip() == "stop":
            break
    stop.set()


async def wait_stop(stop: threading.Event) -> None:
    """Wait in the event loop until ``stop`` is set."""
    while not stop.is_set():
        await asyncio.sleep(0.02)


async def consume_sievemq(a: argparse.Namespace, lat: list[float], stop: threading.Event) -> None:
    """A ``PushConsumer`` from the last offset (long polling)."""
    from sievemq import ConsumeFrom, PushConsumer
    from sievemq.protocol.message import MessageExt

    c = PushConsumer(a.addr, group=a.group, consume_from=ConsumeFrom.LAST, pull_batch_size=PULL_BATCH)
    c.subscribe(a.topic, "*")

    @c.listener
    async def on_messages(msgs: list[MessageExt]) -> None:
        now = time.time_ns()
        for m in msgs:
            ts = m.properties.get("ts")
            if ts is not None:
                lat.append((now - int(ts)) / 1e6)
        if len(lat) >= a.expect:
            stop.set()

    await c.start()
    try:
        for _ in range(400):  # the first rebalance owns every queue
            if len(c.assignment()) >= QUEUES:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)  # pulls parked at the broker
        ready()
        await wait_stop(stop)
    finally:
        await c.close()


async def consume_redis(a: argparse.Namespace, lat: list[float], stop: threading.Event) -> None:
    """One consumer of a new group (from ``$``) looping XACK + ``XREADGROUP BLOCK`` in one round trip."""
    import redis.asyncio as aredis

    from bench.system.redis_peer import parser_class

    host, _, port = a.addr.rpartition(":")
    cls, _name = parser_class(a.redis_parser)
    pool = aredis.ConnectionPool(host=host, port=int(port), parser_class=cls)
    r = aredis.Redis(connection_pool=pool)
    await r.xgroup_create(a.topic, a.group, id="$", mkstream=True)
    ready()
    ack: list[bytes] = []
    try:
        while not stop.is_set():
            pipe = r.pipeline(transaction=False)
            if ack:
                pipe.xack(a.topic, a.group, *ack)
            pipe.xreadgroup(a.group, "lat", {a.topic: ">"}, count=PULL_BATCH, block=100)
            reply: Any = (await pipe.execute())[-1]
            now = time.time_ns()
            ack = []
            for eid, f in reply[0][1] if reply else ():
                ack.append(eid)
                ts = f.get(b"ts")
                if ts is not None:
                    lat.append((now - int(ts)) / 1e6)
            if len(lat) >= a.expect:
                stop.set()
    finally:
        await r.aclose()
        await pool.disconnect()


def consume_tansu(a: argparse.Namespace, lat: list[float], stop: threading.Event) -> None:
    """A confluent-kafka consumer of a new group; on assignment every partition starts at its high watermark."""
    from confluent_kafka import Consumer, TopicPartition

    from bench.system.tansu_peer import consumer_conf, header

    assigned = threading.Event()

    def on_assign(consumer: Consumer, parts: list[TopicPartition]) -> None:
        for p in parts:
            _low, high = consumer.get_watermark_offsets(p, timeout=10)
            p.offset = high
        consumer.assign(parts)
        assigned.set()

    c = Consumer(consumer_conf(a.addr, a.group, "latest", a.fetch_wait_ms))
    c.subscribe([a.topic], on_assign=on_assign)
    try:
        deadline = time.monotonic() + 50
        while not assigned.is_set():
            if time.monotonic() > deadline:
                raise TimeoutError("no partitions assigned")
            c.poll(0.05)
        ready()
        while not stop.is_set():
            msgs = c.consume(PULL_BATCH, 0.05)
            now = time.time_ns()
            for m in msgs:
                if m.error() is not None:
                    continue
                ts = header(m, "ts")
                if ts is not None:
                    lat.append((now - int(ts)) / 1e6)
            if len(lat) >= a.expect:
                stop.set()
    finally:
        c.close()


def main(argv: list[str] | None = None) -> int:
    """Run the consumer until it has ``--expect`` samples or is told to stop; write them."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--system", choices=("sievemq", "redis", "tansu"), required=True)
    ap.add_argument("--addr", required=True, help="sievemq: name server; redis, tansu: host:port")
    ap.add_argument("--topic", required=True, help="topic (sievemq, Tansu) or stream (Redis)")
    ap.add_argument("--group", required=True)
    ap.add_argument("--expect", type=int, required=True, help="stop after this many samples")
    ap.add_argument("--out", required=True, help="file for the samples (ms, one per line)")
    ap.add_argument("--redis-parser", choices=("auto", "hiredis", "python"), default="auto")
    ap.add_argument("--fetch-wait-ms", type=int, default=500, help="Tansu: librdkafka fetch.wait.max.ms")
    a = ap.parse_args(argv)
    stop = threading.Event()
    threading.Thread(target=watch_stdin, args=(stop,), daemon=True).start()
    lat: list[float] = []
    if a.system == "tansu":
        consume_tansu(a, lat, stop)
    else:
        coro = consume_sievemq(a, lat, stop) if a.system == "sievemq" else consume_redis(a, lat, stop)
        try:
            import uvloop
        except ImportError:
            asyncio.run(coro)
        else:
            uvloop.run(coro)
    with open(a.out, "w") as f:
        f.write("\n".join(f"{x:.4f}" for x in lat))
    print(f"done {len(lat)} {time.process_time():.4f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
