#!/usr/bin/env python3
"""bench_proxy.py's driver for the RocketMQ 5.x Python client (``rocketmq-python-client==5.1.2``, gRPC).

It runs with the interpreter of ``<INTEROP_DIR>/venv-rmq5`` (the client needs a newer protobuf than sievemq's), so it
imports nothing from sievemq. Two commands::

    proxy_driver.py produce --endpoints H:P --topic T --count N [--size B] [--inflight K] [--warmup W] [--tag T]
    proxy_driver.py consume --endpoints H:P --topic T --group G --count N [--sql E | --tag-expr E] [--batch 32]
                            [--invisible S] [--await S] [--want-prop k=v] [--drain S] [--timeout S]

Each starts its client, warms it up and prints ``{"event": "ready", ...}`` with the start-up times; then it waits
for a line on stdin (the bench reads the servers' CPU counters meanwhile) and runs the timed part, then prints
``{"event": "timed", ...}`` at once: counts, ``elapsed_s`` of the timed part only, and ``cpu_s``, this process's
CPU time (all threads) during it; then, after what is not timed (a consumer's drain, the client's shutdown),
``{"event": "done", ...}``. A fatal problem prints ``{"event": "error", ...}`` and exits 1.

* ``produce``: ``--warmup`` sends (not timed) to the same topic, then ``--count`` messages of ``--size`` bytes:
  ``Producer.send`` one after the other when ``--inflight`` is 1, else ``Producer.send_async`` with ``--inflight``
  sends in flight (a semaphore released by each send's callback).
* ``consume``: a SimpleConsumer of a new group; before ``ready`` it makes one receive of the (still empty) topic,
  which registers the group and places its cursors at the queues' ends; the bench then fills the topic. Timed:
  ``receive(--batch, --invisible)`` and a synchronous ``ack`` of each message, until ``--count`` are acked. Then,
  not timed, ``--drain`` seconds of further receives: anything they get is counted as ``extra`` (a filter that let
  through more than it should, or a redelivery). ``--want-prop k=v``: every message must carry property k = v
  (``unwanted`` counts those that do not).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from typing import Any


def emit(event: str, **fields: Any) -> None:
    """One JSON line on stdout."""
    print(json.dumps({"event": event, **fields}), flush=True)


def _version() -> str:
    from importlib.metadata import version

    return version("rocketmq-python-client")


def wait_go() -> None:
    """Block until the bench writes a line (or closes stdin: then stop)."""
    if not sys.stdin.readline():
        raise SystemExit("stdin closed before the go line")


def produce(args: argparse.Namespace) -> int:
    from rocketmq import ClientConfiguration, Credentials, Message, Producer  # type: ignore[import-not-found]

    body = b"x" * args.size

    def message() -> Any:
        m = Message()
        m.topic = args.topic
        m.body = body
        m.tag = args.tag
        return m

    t0 = time.perf_counter()
    producer = Producer(ClientConfiguration(args.endpoints, Credentials()), (args.topic,))
    producer.startup()
    startup_s = time.perf_counter() - t0
    try:
        t1 = time.perf_counter()
        for _ in range(args.warmup):
            producer.send(message())
        emit("ready", version=_version(), startup_s=startup_s, warmup_s=time.perf_counter() - t1)
        wait_go()
        c0, t0 = time.process_time(), time.perf_counter()
        if args.inflight <= 1:
            ok, failed, first_error = _send_sync(producer, message, args.count)
        else:
            ok, failed, first_error = _send_async(producer, message, args.count, args.inflight)
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
        emit("timed", sent=ok, failed=failed, first_error=first_error, elapsed_s=elapsed, cpu_s=cpu)
    finally:
        producer.shutdown()
    emit("done")
    return 0 if failed == 0 else 1


def _send_sync(producer: Any, message: Any, n: int) -> tuple[int, int, str]:
    ok = failed = 0
    first_error = ""
    for _ in range(n):
        try:
            producer.send(message())
            ok += 1
        except Exception as e:
            failed += 1
            first_error = first_error or f"{type(e).__name__}: {e}"
    return ok, failed, first_error


def _send_async(producer: Any, message: Any, n: int, inflight: int) -> tuple[int, int, str]:
    slots = threading.BoundedSemaphore(inflight)
    lock = threading.Lock()
    finished = threading.Event()
    state: dict[str, Any] = {"ok": 0, "failed": 0, "done": 0, "first_error": ""}

    def settle(error: BaseException | None) -> None:
        with lock:
            if error is None:
                state["ok"] += 1
            else:
                state["failed"] += 1
                state["first_error"] = state["first_error"] or f"{type(error).__name__}: {error}"
            state["done"] += 1
            if state["done"] == n:
                finished.set()
        slots.release()

    for _ in range(n):
        slots.acquire()
        try:
            future = producer.send_async(message())
        except Exception as e:
            settle(e)
            continue
        future.add_done_callback(lambda f: settle(f.exception()))
    if n and not finished.wait(300):
        raise TimeoutError(f"{n - state['done']} async sends never completed")
    return state["ok"], state["failed"], state["first_error"]


def consume(args: argparse.Namespace) -> int:
    from rocketmq import ClientConfiguration, Credentials, FilterExpression, SimpleConsumer  # type: ignore[import-not-found]
    from rocketmq.grpc_protocol import FilterType

    sql = args.sql
    expression = FilterExpression(sql, FilterType.SQL) if sql else FilterExpression(args.tag_expr or "*")
    want_key, _, want_value = args.want_prop.partition("=")
    t0 = time.perf_counter()
    consumer = SimpleConsumer(ClientConfiguration(args.endpoints, Credentials()), args.group,
                              {args.topic: expression}, await_duration=args.await_s)  # fmt: skip
    consumer.startup()
    startup_s = time.perf_counter() - t0
    try:
        t1 = time.perf_counter()
        early = len(consumer.receive(args.batch, args.invisible))  # registers the group; the topic is still empty
        emit("ready", version=_version(), startup_s=startup_s, first_receive_s=time.perf_counter() - t1, early=early)
        wait_go()
        seen: set[str] = set()
        stats = {"received": 0, "acked": 0, "unwanted": 0, "receives": 0, "empty_receives": 0, "errors": 0}
        first_error = ""
        deadline = time.monotonic() + args.timeout
        c0, t0 = time.process_time(), time.perf_counter()
        while stats["acked"] < args.count and time.monotonic() < deadline:
            stats["receives"] += 1
            try:
                msgs = consumer.receive(args.batch, args.invisible)
            except Exception as e:
                stats["errors"] += 1
                first_error = first_error or f"receive: {type(e).__name__}: {e}"
                time.sleep(0.1)
                continue
            if not msgs:
                stats["empty_receives"] += 1
            for m in msgs:
                stats["received"] += 1
                seen.add(m.message_id)
                if want_key and m.properties.get(want_key) != want_value:
                    stats["unwanted"] += 1
                try:
                    consumer.ack(m)
                    stats["acked"] += 1
                except Exception as e:
                    stats["errors"] += 1
                    first_error = first_error or f"ack: {type(e).__name__}: {e}"
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
        emit("timed", **stats, unique=len(seen), first_error=first_error, elapsed_s=elapsed, cpu_s=cpu)
        extra = _drain(consumer, args)
    finally:
        consumer.shutdown()
    emit("done", extra=extra)
    return 0 if stats["acked"] >= args.count and not stats["errors"] else 1


def _drain(consumer: Any, args: argparse.Namespace) -> int:
    """Messages received in ``--drain`` seconds after the timed part (acked, so that nothing comes back)."""
    extra = 0
    end = time.monotonic() + args.drain
    while time.monotonic() < end:
        for m in consumer.receive(args.batch, args.invisible):
            extra += 1
            consumer.ack(m)
    return extra


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="proxy_driver.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    sub = p.add_subparsers(dest="cmd", required=True)
    pp = sub.add_parser("produce")
    pp.add_argument("--endpoints", required=True)
    pp.add_argument("--topic", required=True)
    pp.add_argument("--count", type=int, required=True)
    pp.add_argument("--size", type=int, default=1024)
    pp.add_argument("--inflight", type=int, default=1)
    pp.add_argument("--warmup", type=int, default=20)
    pp.add_argument("--tag", default="TagA")
    cp = sub.add_parser("consume")
    cp.add_argument("--endpoints", required=True)
    cp.add_argument("--topic", required=True)
    cp.add_argument("--group", required=True)
    cp.add_argument("--count", type=int, required=True)
    cp.add_argument("--sql", default="")
    cp.add_argument("--tag-expr", default="")
    cp.add_argument("--batch", type=int, default=32)
    cp.add_argument("--invisible", type=int, default=60)
    cp.add_argument("--await", dest="await_s", type=int, default=0)
    cp.add_argument("--want-prop", default="")
    cp.add_argument("--drain", type=float, default=1.0)
    cp.add_argument("--timeout", type=float, default=120.0)
    args = p.parse_args(argv)
    return produce(args) if args.cmd == "produce" else consume(args)


if __name__ == "__main__":
    try:
        code = main(sys.argv[1:])
    except Exception as exc:
        emit("error", error=f"{type(exc).__name__}: {exc}")
        code = 1
    sys.exit(code)
