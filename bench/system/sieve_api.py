"""The opt-in ``api.py`` rows (``--low-level``): produce and consume through ``sievemq.client.api`` request
wrappers on one connection, without the Producer / PushConsumer machinery."""

from __future__ import annotations

import asyncio
import itertools
import time

from bench.system.common import PULL_BATCH, QUEUES, key_of, props_of, tag_of
from bench.system.measure import Result
from bench.system.sieve import Sieve
from sievemq.client import api
from sievemq.protocol.batch import BatchEntry, encode_batch
from sievemq.protocol.message import properties_to_string
from sievemq.protocol.msgid import UniqIdGenerator
from sievemq.protocol.send_header import SendMessageHeader
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.connection import connect

_groups = itertools.count()


def wire_props(sv: Sieve, i: int, ids: UniqIdGenerator) -> dict[str, str]:
    """Message ``i``'s properties as the broker stores them (tag, key, client id and the three)."""
    props = props_of(i)
    props["TAGS"] = tag_of(i)
    if sv.keys:
        props["KEYS"] = key_of(i)
    props["UNIQ_KEY"] = ids.next()
    return props


async def produce_single(sv: Sieve, n: int, inflight: int, r: Result) -> None:
    """SEND_MESSAGE requests from ``inflight`` tasks on one connection, queue ``i % QUEUES``."""
    conn = await connect("127.0.0.1", sv.proc.port)
    ids = UniqIdGenerator()
    try:
        counter = iter(range(n))
        t0 = time.perf_counter()

        async def worker() -> None:
            for i in counter:
                props = wire_props(sv, i, ids)
                props["WAIT"] = "true"
                header = SendMessageHeader(
                    producer_group="bench-api", topic="BenchApiSingle", queue_id=i % QUEUES,
                    born_timestamp=int(time.time() * 1000), properties=properties_to_string(props),
                )  # fmt: skip
                resp = await api.send_request(conn, header, sv.body)
                if resp.code != ResponseCode.SUCCESS:
                    raise RuntimeError(f"send failed: [{resp.code}] {resp.remark}")

        await asyncio.gather(*(worker() for _ in range(inflight)))
        r.seconds = time.perf_counter() - t0
        r.messages = n
    finally:
        conn.close()


async def produce_batch(sv: Sieve, n: int, r: Result) -> None:
    """SEND_BATCH_MESSAGE requests of ``sv.batch`` messages, ``sv.batch_inflight`` in flight, on one connection."""
    conn = await connect("127.0.0.1", sv.proc.port)
    ids = UniqIdGenerator()
    batch = sv.batch
    try:
        starts = iter(range(0, n, batch))
        t0 = time.perf_counter()

        async def worker() -> None:
            for s in starts:
                entries = [BatchEntry(0, sv.body, wire_props(sv, i, ids)) for i in range(s, min(n, s + batch))]
                header = SendMessageHeader(
                    producer_group="bench-api", topic="BenchApiBatch", queue_id=(s // batch) % QUEUES,
                    born_timestamp=int(time.time() * 1000), batch=True,
                )  # fmt: skip
                resp = await api.send_request(conn, header, encode_batch(entries), code=RequestCode.SEND_BATCH_MESSAGE)
                if resp.code != ResponseCode.SUCCESS:
                    raise RuntimeError(f"send failed: [{resp.code}] {resp.remark}")

        await asyncio.gather(*(worker() for _ in range(sv.batch_inflight)))
        r.seconds = time.perf_counter() - t0
        r.messages = n
    finally:
        conn.close()


async def consume(sv: Sieve, expected: int, tag: str | None, r: Result) -> None:
    """One ``api.pull_message`` loop per queue (32 per pull) from offset 0 to the end of ``BenchApiBatch``."""
    group = f"bench-api-consume-{next(_groups)}"
    selector = tag or "*"
    conn = await connect("127.0.0.1", sv.proc.port)
    count = wrong = 0

    async def loop(qid: int) -> None:
        nonlocal count, wrong
        offset = 0
        while True:
            pr = await api.pull_message(conn, group, "BenchApiBatch", qid, offset, max_nums=PULL_BATCH,
                                        subscription=selector)  # fmt: skip
            if pr.code == ResponseCode.SUCCESS:
                ok = len(pr.messages) if tag is None else sum(1 for m in pr.messages if m.tags == tag)
                count += ok
                wrong += len(pr.messages) - ok
            elif pr.code == ResponseCode.PULL_NOT_FOUND:
                return
            elif pr.code != ResponseCode.PULL_RETRY_IMMEDIATELY:
                raise RuntimeError(f"pull failed: [{pr.code}] {pr.remark}")
            offset = pr.next_begin_offset

    try:
        t0 = time.perf_counter()
        await asyncio.gather(*(loop(q) for q in range(QUEUES)))
        r.seconds = time.perf_counter() - t0
        r.messages = r.received = count
        if count != expected:
            r.note = f"delivered {count}, expected {expected}"
        if wrong:
            r.note += f" {wrong} with another tag (hash collision re-check)"
    finally:
        conn.close()
