"""The broker's topic table at 100,000 topics (issue 32), in one run.

A name server and a broker (separate processes, ``ASYNC_FLUSH``, store in a temporary folder, ``--max-topics``
raised). Topics are created through UPDATE_AND_CREATE_TOPIC_LIST (18) in lists of ``--batch`` until the table holds
``--topics``; when it reaches each of ``--probe-at`` (1k, 10k, 100k) ``--singles`` more are created one at a time
through UPDATE_AND_CREATE_TOPIC (17), one request in flight, as ``mqadmin updateTopic`` does. Per step: the time
per request, the broker's and the name server's CPU per request (``/proc``). At the end: GET_ALL_TOPIC_CONFIG (21)
and GET_TOPIC_NAME_LIST (23) from the broker, GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206) from the name server (time,
frame size), ``topics.json``'s size, the broker's RSS, and a restart's time to serve (the table's load).

    .venv/bin/python bench/bench_topic_table.py [--topics 100000] [--batch 1000] [--singles 20]
                                                [--probe-at 1000,10000,100000] [--queues 4] [--keep]
                                                [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import orjson
from tests.support.procs import Proc, broker_proc, namesrv_proc

from bench.groups.profile import PySpy, summarize
from bench.system.measure import proc_cpu, proc_mem
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection, connect


def log(text: str) -> None:
    """A progress line on stderr."""
    print(f"  ... {text}", file=sys.stderr, flush=True)


def pid(p: Proc) -> int:
    """The process id of a started Proc."""
    assert p.popen is not None
    return p.popen.pid


async def ask(conn: Connection, code: int, fields: dict[str, object] | None = None, body: bytes = b"",
              timeout: float = 120.0) -> RemotingCommand:  # fmt: skip
    """One request; asserts success."""
    resp = await conn.request(RemotingCommand.request(code, fields, body), timeout=timeout)
    assert resp.code == ResponseCode.SUCCESS, f"request {code}: [{resp.code}] {resp.remark}"
    return resp


def topic_json(name: str, queues: int) -> dict[str, object]:
    """A TopicConfig as UPDATE_AND_CREATE_TOPIC_LIST carries it."""
    return {"topicName": name, "readQueueNums": queues, "writeQueueNums": queues, "perm": 6,
            "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False, "attributes": {}}  # fmt: skip


async def create_list(conn: Connection, names: list[str], queues: int) -> None:
    """18 with ``names``."""
    body = orjson.dumps({"topicConfigList": [topic_json(n, queues) for n in names]})
    await ask(conn, RequestCode.UPDATE_AND_CREATE_TOPIC_LIST, body=body)


async def create_one(conn: Connection, name: str, queues: int) -> None:
    """17 for ``name``."""
    await ask(conn, RequestCode.UPDATE_AND_CREATE_TOPIC, {
        "topic": name, "defaultTopic": "TBW102", "readQueueNums": queues, "writeQueueNums": queues, "perm": 6,
        "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False})  # fmt: skip


class Meter:
    """Wall time and CPU of the broker and the name server over a step."""

    def __init__(self, broker: Proc, ns: Proc) -> None:
        self.broker, self.ns = broker, ns
        self.t0, self.b0, self.n0 = time.perf_counter(), proc_cpu(pid(broker)), proc_cpu(pid(ns))

    def per(self, n: int) -> str:
        """ms per request: wall, broker CPU, name server CPU."""
        wall = time.perf_counter() - self.t0
        b, ns = proc_cpu(pid(self.broker)) - self.b0, proc_cpu(pid(self.ns)) - self.n0
        return f"{wall / n * 1e3:9.2f} ms {b / n * 1e3:9.2f} ms {ns / n * 1e3:9.2f} ms"


async def timed(conn: Connection, code: int, fields: dict[str, object] | None = None) -> str:
    """Time and body size of one request."""
    t0 = time.perf_counter()
    resp = await ask(conn, code, fields)
    return f"{(time.perf_counter() - t0) * 1e3:8.1f} ms, body {len(resp.body or b'') / 1e6:6.2f} MB"


async def run(a: argparse.Namespace, tmp: Path) -> None:
    """The whole benchmark."""
    ns = namesrv_proc(tmp).start()
    broker = broker_proc(tmp, ns.addr, "broker-a", "--max-topics", str(a.topics + 10_000)).start()
    try:
        conn = await connect("127.0.0.1", broker.port)
        probes = sorted(int(x) for x in a.probe_at.split(","))
        print(f"{'step':44} {'wall/req':>12} {'broker CPU':>12} {'namesrv CPU':>12}")
        made, singles = 0, 0
        ramp = Meter(broker, ns)
        while made < a.topics:
            if probes and made >= probes[0]:
                probes.pop(0)
                m = Meter(broker, ns)
                for i in range(a.singles):
                    await create_one(conn, f"S{made}_{i:05d}", a.queues)
                singles += a.singles
                print(f"{f'17 one at a time, table {made:,}':44} {m.per(a.singles)}", flush=True)
            n = min(a.batch, a.topics - made)
            m = Meter(broker, ns)
            await create_list(conn, [f"T{made + i:07d}" for i in range(n)], a.queues)
            made += n
            if made in (a.batch, 10_000, 50_000) or made == a.topics or made % 20_000 == 0:
                print(f"{f'18 list of {n:,}, table {made:,}':44} {m.per(1)}", flush=True)
        print(f"{f'all {made + singles:,} creations':44} {ramp.per(1)}", flush=True)
        if probes:
            spy = PySpy(pid(broker), tmp / "singles.raw") if a.profile else None
            if spy is not None:
                spy.start()
            m = Meter(broker, ns)
            for i in range(a.singles):
                await create_one(conn, f"S{made}_{i:05d}", a.queues)
            singles += a.singles
            print(f"{f'17 one at a time, table {made:,}':44} {m.per(a.singles)}", flush=True)
            if spy is not None:
                spy.stop()
                print("\n".join(summarize(tmp / "singles.raw")))
        print(f"21 GET_ALL_TOPIC_CONFIG: {await timed(conn, RequestCode.GET_ALL_TOPIC_CONFIG)}")
        print(f"23 GET_TOPIC_NAME_LIST: {await timed(conn, RequestCode.GET_TOPIC_NAME_LIST)}")
        nconn = await connect("127.0.0.1", ns.port)
        print(f"206 GET_ALL_TOPIC_LIST_FROM_NAMESERVER: {await timed(nconn, 206)}")
        cfg = tmp / "broker-a" / "config" / "topics.json"
        print(f"topics.json: {cfg.stat().st_size / 1e6:.1f} MB; broker RSS {proc_mem(pid(broker))['VmRSS'] / 1024:.0f}"
              f" MB, name server RSS {proc_mem(pid(ns))['VmRSS'] / 1024:.0f} MB")  # fmt: skip
        conn.close()
        nconn.close()
        broker.kill9()
        t0 = time.perf_counter()
        broker.start()
        print(f"restart after kill -9 until serving: {time.perf_counter() - t0:.1f} s")
        conn = await connect("127.0.0.1", broker.port)
        names = orjson.loads((await ask(conn, RequestCode.GET_TOPIC_NAME_LIST)).body)["topicList"]
        ours = [t for t in names if t[0] in "ST" and t[1:2].isdigit()]
        print(f"topics after the restart: {len(ours):,} of {made + singles:,} created")
        conn.close()
    finally:
        broker.stop()
        ns.stop()


def main() -> None:
    """Parse the arguments, run, clean up."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--topics", type=int, default=100_000)
    p.add_argument("--batch", type=int, default=1000)
    p.add_argument("--singles", type=int, default=20)
    p.add_argument("--probe-at", default="1000,10000,100000")
    p.add_argument("--queues", type=int, default=4)
    p.add_argument("--keep", action="store_true", help="keep the temporary folder")
    p.add_argument("--profile", action="store_true", help="py-spy on the broker during the last one-at-a-time step")
    a = p.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-topic-table-"))
    try:
        asyncio.run(run(a, tmp))
    finally:
        if a.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
