"""Uploaded (and named) filter functions that try to escape their worker, run through a real PushConsumer against
real name server, broker and filter server processes: none succeeds, and an ordinary function filters on.

Each escape returns True only when its attempt worked (its message would then be delivered) and raises otherwise,
so the consumer sees the error. The effects are checked directly: the filter server and the broker's topic are
still there, no file was written, no process was started or left behind, and no answer carries the secret, a file's
contents or another module's source.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import textwrap
import time
import uuid
from pathlib import Path

import orjson
import pytest

from sievemq import ConsumeResult, MessageExt, PushConsumer, Selector
from sievemq.cli.filtersrv import fetch_status
from sievemq.protocol.reasons import REASON_FIELD, Reason
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection
from tests.filtersrv.conftest import ACCOUNT, SECRET, FilterCluster, open_conn
from tests.filtersrv.helpers import BIG_EU_SOURCE as BIG_EU
from tests.filtersrv.helpers import is_big_eu, register, send_orders, signed, until
from tests.support import wire
from tests.support.quiet import quiet_period

GROUP = "escapes"
HONEST = "EscHonest"
VICTIM = "EscVictim"
OPERATOR_ESCAPES = '''
"""Named functions of an operator module that try to escape: they are sandboxed like uploads."""


def read_passwd(msg):
    return "root:" in open("/etc/passwd").read()
'''
_instances = itertools.count(1)


def escapes(
    *, marker: str, written: Path, store: Path, store_file: Path, broker_port: int, fs_pid: int
) -> dict[str, str]:
    """Name -> source of an uploaded ``Escape(msg)``."""
    delete = orjson.dumps({"code": int(RequestCode.DELETE_TOPIC_IN_BROKER), "language": "PYTHON", "version": 0,
                           "opaque": 1, "flag": 0, "extFields": {"topic": VICTIM}}).decode()  # fmt: skip
    bodies = {
        "ReadPasswd": "return 'root:' in open('/etc/passwd').read()",
        "ReadStore": f"return len(open({str(store_file)!r}, 'rb').read(16)) == 16",
        "ListStore": f"import os\nreturn len(os.listdir({str(store)!r})) > 0",
        "Write": f"open({str(written)!r}, 'w').write('escaped')\nreturn True",
        "Connect": (
            "import socket, struct\n"
            f"s = socket.create_connection(('127.0.0.1', {broker_port}), timeout=2)\n"
            f"h = {delete!r}.encode()\n"
            "s.sendall(struct.pack('>II', 4 + len(h), len(h)) + h)\n"
            "return len(s.recv(4096)) > 0"
        ),
        "Subprocess": f"import subprocess\nsubprocess.Popen(['/bin/sh', '-c', 'sleep 30', {marker!r}])\nreturn True",
        "System": (
            "import os\n"
            f"rc = os.system(\"sh -c 'sleep 30' {marker} &\")\n"
            "if rc != 0:\n    raise OSError(rc)\nreturn True"
        ),
        "ForkExec": (
            "import os\n"
            "if os.fork() == 0:\n"
            f"    os.execv('/bin/sh', ['/bin/sh', '-c', 'sleep 30', {marker!r}])\n"
            "return True"
        ),
        "ForkOutlive": "import os, time\nif os.fork() == 0:\n    time.sleep(30)\n    os._exit(0)\nreturn True",
        "ParentEnviron": f"return b'SECRET' in open('/proc/{fs_pid}/environ', 'rb').read()",
        "LeakEnviron": f"raise ValueError(open('/proc/{fs_pid}/environ', 'rb').read())",
        "OwnEnviron": (
            "import os\n"
            f"if any('SECRET' in k or {SECRET!r} in v for k, v in os.environ.items()):\n    return True\n"
            "raise LookupError('no secret in the environment')"
        ),
        "KillParent": "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nreturn True",
        "KillServer": f"import os, signal\nos.kill({fs_pid}, signal.SIGKILL)\nreturn True",
        "LeakSource": "import inspect, shop.filters\nraise ValueError(inspect.getsource(shop.filters))",
    }
    return {name: "def Escape(msg):\n" + textwrap.indent(body, "    ") + "\n" for name, body in bodies.items()}


def processes_with(text: str) -> list[int]:
    """Pids of the processes whose command line contains ``text``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if text.encode() in cmdline and int(entry) != os.getpid():
                found.append(int(entry))
    return found


async def topic_exists(conn: Connection, topic: str) -> bool:
    """The broker holds ``topic`` (GET_ALL_TOPIC_CONFIG)."""
    resp = await conn.request(RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG), 5.0)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return f'"{topic}"'.encode() in resp.body


class ByTopic:
    """A listener recording order ids per topic."""

    def __init__(self) -> None:
        self.ids: dict[str, list[int]] = {}

    async def __call__(self, msgs: list[MessageExt]) -> ConsumeResult:
        for m in msgs:
            self.ids.setdefault(m.topic, []).append(orjson.loads(m.body)["id"])
        return ConsumeResult.SUCCESS


async def test_no_escape_succeeds(fc: FilterCluster, conns: list[Connection], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIEVEMQ_FILTERSRV_UPLOAD_SECRET", SECRET)  # as an operator should: not on the command line
    (fc.filters_dir / "shop" / "escapes.py").write_text(OPERATOR_ESCAPES)
    marker = f"sievemq-escape-{uuid.uuid4().hex}"
    written = Path("/tmp") / marker  # a folder anyone may write to: only the sandbox can stop the write
    ns = fc.namesrv()
    broker = fc.broker(ns.addr)
    bconn = await open_conn(conns, broker)
    nconn = await open_conn(conns, ns)
    await send_orders(bconn, VICTIM, range(2))
    store = fc.tmp / "broker-a"
    store_file = next(p for p in sorted((store / "commitlog").iterdir()) if p.is_file())
    fs = fc.filtersrv(
        broker,
        "--client-upload-filter-enable", "true",
        "--upload-accounts", ACCOUNT,
        "--filter-modules", "shop.filters,shop.escapes",
        "--batch-timeout-seconds", "5",
        "--max-upload-workers", "20",  # each escape is a tenant with a worker of its own
        name="fs-sandbox",
    )  # fmt: skip
    assert fs.popen is not None
    status = await fetch_status(fs.addr)
    sandbox = status["workers"]["sandbox"]
    if sandbox["missing"]:
        print(f"this machine lacks sandbox layers: {sandbox['missing']}")
        assert status["uploadsEnabled"] is False and "sandboxRequire" in status["uploadsRefused"], status
        fconn = await open_conn(conns, fs)
        extra = signed(ACCOUNT, SECRET, GROUP, HONEST, "BigEuOrders", BIG_EU, to=fs.addr)
        resp = await register(fconn, GROUP, HONEST, "BigEuOrders", BIG_EU, extra=extra)
        refusal = (resp.code, resp.ext_fields.get(REASON_FIELD))
        assert refusal == (ResponseCode.NO_PERMISSION, Reason.FILTER_NOT_ALLOWED), (refusal, resp.remark)
        pytest.skip(f'sandbox layers missing here ({", ".join(sandbox["missing"])}); "strict" keeps uploads off')
    print(f"sandbox layers: {sandbox['active']}")

    sources = escapes(marker=marker, written=written, store=store, store_file=store_file, broker_port=broker.port,
                      fs_pid=fs.popen.pid)  # fmt: skip
    topics = {f"Esc{name}": src for name, src in sources.items()}
    for topic in [*topics, HONEST, "EscNamed"]:
        await send_orders(bconn, topic, range(40) if topic == HONEST else range(2))

    async def routed() -> bool:
        try:
            route = await wire.get_route(nconn, HONEST)
        except Exception:
            return False
        return fs.addr in [s for servers in route.filter_server_table.values() for s in servers]

    await until(routed, timeout=30.0, what="the filter server in the route")
    c = PushConsumer(ns.addr, GROUP, consume_from="first", instance_name=f"esc-{next(_instances)}")
    for topic, src in topics.items():
        c.subscribe(topic, Selector.function_source(src, name="Escape", access_key=ACCOUNT, secret=SECRET))
    c.subscribe("EscNamed", Selector.function("shop.escapes:read_passwd"))
    c.subscribe(HONEST, Selector.function_source(BIG_EU, name="BigEuOrders", access_key=ACCOUNT, secret=SECRET))
    got = ByTopic()
    c.listener(got)
    await c.start()
    try:
        # The ordinary function filters correctly in the same run.
        expected = {i for i in range(40) if is_big_eu(i)}
        await until(lambda: asyncio.sleep(0, expected <= set(got.ids.get(HONEST, []))), timeout=20.0,
                    what="the honest function's matches")  # fmt: skip
        assert set(got.ids[HONEST]) == expected, got.ids[HONEST]

        # Every escape ran and failed with an error naming the exception and the function's own line.
        def errors() -> dict[str, str]:
            return {t: s.last_error or "" for t, s in c.function_status().items()}

        async def all_failed() -> bool:
            e = errors()
            return all("at line" in e.get(t, "") for t in topics) and "Error" in e.get("EscNamed", "")

        await until(all_failed, timeout=30.0, what="an error from every escape")
        await quiet_period(1.0, "anything started by an escape showing itself")
        delivered = {t: ids for t, ids in got.ids.items() if t != HONEST}
        assert not delivered, f"escapes that worked: {delivered}"
        texts = errors()
        for topic in topics:
            print(f"{topic}: {texts[topic]}")
        assert "LookupError at line" in texts["EscOwnEnviron"], texts["EscOwnEnviron"]
        assert "PermissionError at line" in texts["EscConnect"], texts["EscConnect"]

        # The effects: nothing happened outside the worker.
        assert fs.popen.poll() is None, "the filter server was killed"
        assert (await fetch_status(fs.addr))["functions"], "the filter server stopped answering"
        assert await topic_exists(bconn, VICTIM), "the broker's topic was deleted"
        assert not written.exists(), f"{written} was written"
        assert processes_with(marker) == [], "an escape started a process"
        answers = " ".join(texts.values()) + orjson.dumps(await fetch_status(fs.addr)).decode()
        for leaked in (SECRET, "root:x:0", "def big_eu_orders"):
            assert leaked not in answers, f"an answer carries {leaked!r}"
    finally:
        await c.close()
        written.unlink(missing_ok=True)
        for pid in processes_with(marker):
            os.kill(pid, signal.SIGKILL)

    # The payload that the Connect escape sends does delete a topic when run outside the sandbox.
    control = "EscControl"
    await send_orders(bconn, control, range(1))
    assert await topic_exists(bconn, control)
    resp = await bconn.request(RemotingCommand.request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": control}), 5.0)
    assert resp.code == ResponseCode.SUCCESS and not await topic_exists(bconn, control), resp.remark

    # No worker, nor anything a worker forked, outlives the filter server.
    worker_mark = str(fc.filters_dir)  # in every worker's command line (and the filter server's)
    assert len([p for p in processes_with(worker_mark) if p != fs.popen.pid]) >= 2, "no workers found"
    fs.stop()
    deadline = time.monotonic() + 5.0
    while processes_with(worker_mark) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    assert processes_with(worker_mark) == [], "processes outlived the filter server"


async def test_load_time_escape_error_shows_no_contents(fc: FilterCluster, conns: list[Connection]) -> None:
    """Source whose module body reads a file and raises its contents: the refusal names the type and line only."""
    ns = fc.namesrv()
    broker = fc.broker(ns.addr)
    fs = fc.filtersrv(broker, "--client-upload-filter-enable", "true", "--upload-secret", SECRET,
                      "--upload-accounts", ACCOUNT, "--sandbox-require", "basic")  # fmt: skip
    fconn = await open_conn(conns, fs)
    src = "import inspect, shop.filters\nraise ValueError(inspect.getsource(shop.filters))\ndef F(msg):\n    return 1\n"
    resp = await register(fconn, GROUP, HONEST, "F", src, extra=signed(ACCOUNT, SECRET, GROUP, HONEST, "F", src,
                                                                        to=fs.addr))  # fmt: skip
    refusal = (resp.code, resp.ext_fields.get(REASON_FIELD))
    assert refusal == (ResponseCode.SYSTEM_ERROR, Reason.FILTER_LOAD_FAILED), (refusal, resp.remark)
    remark = resp.remark or ""
    assert "ValueError at line 2" in remark and "big_eu_orders" not in remark, remark
