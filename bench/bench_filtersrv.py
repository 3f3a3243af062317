"""Benchmark: filtering on the filter server versus consuming everything and filtering in the client.

Starts a name server, a broker and a filter server (real processes on 127.0.0.1), produces N JSON orders of
which 10% match ``big_eu_orders``, then in one run:

* **filter server**: class-filter pulls (FLAG_CLASS_FILTER) of every queue through the filter server, which
  runs the function in its worker pool and sends only the matches;
* **client side**: plain pulls of every queue from the broker with ``*``; the client decodes every message and
  runs the same function itself.

Prints messages filtered per second and the bytes that reached the consumer for each, and their ratios.

    python bench/bench_filtersrv.py [--messages 100000] [--queues 4] [--workers 2] [--body-bytes 300]
                                    [--read-ahead 8]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support import wire
from tests.support.procs import Proc, broker_proc, free_port, namesrv_proc

from sievemq.client import api
from sievemq.protocol.batch import BatchEntry
from sievemq.protocol.message import MessageExt, decode_records
from sievemq.protocol.upload_signing import filter_class_crc
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand, encode_header
from sievemq.remoting.connection import Connection, connect

TOPIC = "BenchOrders"
GROUP = "bench-eu-big"
FILTERS = """
import json


def big_eu_orders(msg):
    order = json.loads(msg.body)
    return order["region"] == "eu" and order["amount"] > 100
"""


def big_eu_orders(msg: MessageExt) -> bool:
    """The same function, run by the client in the client-side case."""
    order = json.loads(msg.body)
    return bool(order["region"] == "eu" and order["amount"] > 100)


def order(i: int, pad: int) -> bytes:
    """Order ``i``: 10% are EU orders above 100 (i % 10 == 0); padded to about ``pad`` bytes."""
    eu = i % 10 == 0
    d: dict[str, Any] = {
        "id": i,
        "region": "eu" if eu else ("us" if i % 2 else "apac"),
        "amount": 150 + i % 50 if eu or i % 3 else 20,
        "customer": f"customer-{i % 9973:05d}",
        "items": [{"sku": f"SKU-{(i * 7 + k) % 1000:04d}", "qty": 1 + k} for k in range(3)],
    }
    body = orjson.dumps(d)
    if len(body) < pad:
        d["note"] = "x" * (pad - len(body) - 10)
        body = orjson.dumps(d)
    return body


def frame_bytes(resp: RemotingCommand) -> int:
    """Bytes of the response on the wire: prefix, header and body."""
    return 8 + len(encode_header(resp)) + len(resp.body)


async def produce(conn: Connection, n: int, queues: int, pad: int) -> None:
    batch = 200
    pending: list[asyncio.Task[api.SendResult]] = []
    for start in range(0, n, batch):
        entries = [
            BatchEntry(body=order(i, pad), properties={"KEYS": f"o{i}"}) for i in range(start, min(n, start + batch))
        ]
        q = (start // batch) % queues
        pending.append(asyncio.create_task(wire.send_batch(conn, TOPIC, entries, queue_id=q, timeout=30)))
        if len(pending) >= 16:
            await asyncio.gather(*pending)
            pending.clear()
    await asyncio.gather(*pending)


async def pull_queue(conn: Connection, qid: int, class_filter: bool) -> tuple[int, int, int]:
    """(messages matched, messages examined by the client, bytes received) for one queue, from offset 0."""
    offset = matched = examined = wire = 0
    while True:
        fields = {
            "consumerGroup": GROUP if class_filter else "bench-client-side",
            "topic": TOPIC,
            "queueId": qid,
            "queueOffset": offset,
            "maxMsgNums": 32,
            "sysFlag": 0x8 if class_filter else 0x4,
            "commitOffset": 0,
            "suspendTimeoutMillis": 0,
            "subscription": "*",
            "subVersion": 0,
        }
        resp = await conn.request(RemotingCommand.request(RequestCode.PULL_MESSAGE, fields), 30)
        wire += frame_bytes(resp)
        if resp.code == ResponseCode.PULL_NOT_FOUND:
            return matched, examined, wire
        if resp.code not in (ResponseCode.SUCCESS, ResponseCode.PULL_RETRY_IMMEDIATELY):
            raise RuntimeError(f"pull failed: [{resp.code}] {resp.remark}")
        if resp.code == ResponseCode.SUCCESS:
            msgs = decode_records(resp.body)
            examined += len(msgs)
            if class_filter:
                matched += len(msgs)
            else:
                matched += sum(1 for m in msgs if big_eu_orders(m))
        offset = int(resp.ext_fields["nextBeginOffset"])


async def consume_all(addr: Proc, queues: int, class_filter: bool) -> tuple[int, int, int, float, float]:
    """(matched, messages received, bytes received, wall seconds, consumer CPU seconds) over every queue."""
    conns = [await connect("127.0.0.1", addr.port) for _ in range(queues)]
    t0, c0 = time.perf_counter(), time.process_time()
    results = await asyncio.gather(*(pull_queue(conns[q], q, class_filter) for q in range(queues)))
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    for c in conns:
        c.close()
    return sum(r[0] for r in results), sum(r[1] for r in results), sum(r[2] for r in results), elapsed, cpu


async def run(args: argparse.Namespace, tmp: Path) -> None:
    (tmp / "filters" / "shop").mkdir(parents=True)
    (tmp / "filters" / "shop" / "__init__.py").write_text("")
    (tmp / "filters" / "shop" / "filters.py").write_text(FILTERS)
    procs: list[Proc] = []
    try:
        ns = namesrv_proc(tmp).start()
        procs.append(ns)
        broker = broker_proc(
            tmp, ns.addr, "broker-a", "--mapped-file-size-commitlog", str(256 * 1024 * 1024),
            "--default-topic-queue-nums", str(args.queues),
        ).start()  # fmt: skip
        procs.append(broker)
        port = free_port()
        fs = Proc(
            [
                "filtersrv", "--broker", broker.addr, "--listen-port", str(port),
                "--filter-modules", "shop.filters", "--filter-paths", str(tmp / "filters"),
                "--worker-count", str(args.workers), "--read-ahead-batches", str(args.read_ahead),
            ],
            port,
            tmp / "filtersrv.log",
        ).start()  # fmt: skip
        procs.append(fs)

        bconn = await connect("127.0.0.1", broker.port)
        t0 = time.perf_counter()
        await produce(bconn, args.messages, args.queues, args.body_bytes)
        produce_s = time.perf_counter() - t0
        expected = sum(1 for i in range(args.messages) if i % 10 == 0)
        fconn = await connect("127.0.0.1", fs.port)
        name = "shop.filters:big_eu_orders"
        reg = RemotingCommand.request(
            RequestCode.REGISTER_MESSAGE_FILTER_CLASS,
            {"consumerGroup": GROUP, "topic": TOPIC, "className": name, "classCRC": filter_class_crc(name)},
        )
        resp = await fconn.request(reg, 15)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        # Warm the page cache and both paths once on a few messages so neither pays first-use costs.
        await api.pull_message(bconn, "warm", TOPIC, 0, 0)
        fconn.close()

        fs_matched, fs_examined, fs_bytes, fs_s, fs_cpu = await consume_all(fs, args.queues, class_filter=True)
        cl_matched, cl_examined, cl_bytes, cl_s, cl_cpu = await consume_all(broker, args.queues, class_filter=False)
        bconn.close()
        assert fs_matched == expected == cl_matched, (fs_matched, cl_matched, expected)
        n = args.messages
        body = len(order(1, args.body_bytes))
        print(f"sievemq filter server benchmark: {n} messages (~{body} B JSON bodies), {args.queues} queues, "
              f"{args.workers} filter workers, {expected} matches (10%); produced in {produce_s:.1f} s")  # fmt: skip
        print(f"{'':28}{'filter server':>16}{'client side':>16}{'ratio':>10}")
        print(f"{'messages filtered / s':28}{n / fs_s:16,.0f}{n / cl_s:16,.0f}{(n / fs_s) / (n / cl_s):10.2f}")
        print(f"{'wall time (s)':28}{fs_s:16.2f}{cl_s:16.2f}{fs_s / cl_s:10.2f}")
        print(f"{'messages sent to consumer':28}{fs_examined:16,}{cl_examined:16,}{cl_examined / fs_examined:10.1f}x")
        print(f"{'bytes sent to consumer':28}{fs_bytes:16,}{cl_bytes:16,}{cl_bytes / fs_bytes:10.1f}x")
        print(f"{'consumer CPU (s)':28}{fs_cpu:16.2f}{cl_cpu:16.2f}{cl_cpu / fs_cpu:10.1f}x")
        print(f"{'matched messages':28}{fs_matched:16,}{cl_matched:16,}")
    finally:
        for p in reversed(procs):
            p.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--queues", type=int, default=4)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--body-bytes", type=int, default=300)
    ap.add_argument("--read-ahead", type=int, default=8, help="filter server readAheadBatches (1: as RocketMQ)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="sievemq-bench-"))
    try:
        asyncio.run(run(args, tmp))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
